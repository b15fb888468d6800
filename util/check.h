// DK_CHECK: programmer-error assertions (never for bad input, which gets an
// absl::Status). Always on, also in optimized builds; cheap enough outside hot loops.
#ifndef DK_UTIL_CHECK_H_
#define DK_UTIL_CHECK_H_

#include <cstdio>
#include <cstdlib>

#define DK_CHECK(cond)                                                          \
  do {                                                                          \
    if (__builtin_expect(!(cond), 0)) {                                         \
      std::fprintf(stderr, "%s:%d: DK_CHECK failed: %s\n", __FILE__, __LINE__,  \
                   #cond);                                                      \
      std::abort();                                                             \
    }                                                                           \
  } while (0)

#endif  // DK_UTIL_CHECK_H_
