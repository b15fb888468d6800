// RunTogether(f): f(0) and f(1) on two threads that start together (a spin barrier
// before the calls), so that two sessions' loads and decodes overlap; their results
// in order. For tests of what two engines or sessions share.
#ifndef DK_TESTS_E2E_RUN_TOGETHER_H_
#define DK_TESTS_E2E_RUN_TOGETHER_H_

#include <array>
#include <atomic>
#include <thread>
#include <vector>

namespace dk::testing {

template <typename F>
auto RunTogether(const F& f) {
  std::array<decltype(f(0)), 2> out;
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i) {
    threads.emplace_back([&, i] {
      ready.fetch_add(1);
      while (ready.load() < 2) std::this_thread::yield();
      out[i] = f(i);
    });
  }
  for (std::thread& t : threads) t.join();
  return out;
}

}  // namespace dk::testing

#endif  // DK_TESTS_E2E_RUN_TOGETHER_H_
