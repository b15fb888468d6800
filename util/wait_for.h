// Tests of threads wait for another thread to do something; how long they wait is a
// guard against a deadlock (a worker that never comes), not a measure of speed, so a
// busy host only makes them slower. Test-only.
#ifndef DK_UTIL_WAIT_FOR_H_
#define DK_UTIL_WAIT_FOR_H_

#include <chrono>
#include <functional>
#include <thread>

#include "gtest/gtest.h"

namespace dk::testing {

inline constexpr auto kWaitGuard = std::chrono::seconds(30);

// Waits until `done` is true; false (and a test failure naming `what`) when it is
// still false after kWaitGuard.
inline bool WaitFor(const std::function<bool()>& done, const char* what) {
  const auto deadline = std::chrono::steady_clock::now() + kWaitGuard;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << "waited 30 s for " << what;
      return false;
    }
    std::this_thread::yield();
  }
  return true;
}

}  // namespace dk::testing

#endif  // DK_UTIL_WAIT_FOR_H_
