#include "kernels/common/scratch.h"

#include <atomic>
#include <cstdint>

#include "gtest/gtest.h"
#include "util/thread_pool.h"

namespace dk::kernels {
namespace {

TEST(KernelScratch, EachThreadAndSlotHasItsOwnBufferGrownNeverShrunk) {
  KernelScratch s(3);
  EXPECT_EQ(s.bytes(), 0u);
  float* a = s.Get<float>(0, kAttentionScratch, 100);
  float* b = s.Get<float>(1, kAttentionScratch, 100);
  float* c = s.Get<float>(0, kKSplitX, 100);
  EXPECT_NE(a, b);
  EXPECT_NE(a, c);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 64, 0u);
  EXPECT_EQ(s.bytes(), 3 * 100 * sizeof(float));
  EXPECT_EQ(s.Get<float>(0, kAttentionScratch, 50), a);  // big enough: kept
  s.Get<float>(0, kAttentionScratch, 1000);               // grown
  EXPECT_EQ(s.bytes(), (1000 + 2 * 100) * sizeof(float));
  EXPECT_DEATH(s.Get<float>(3, kAttentionScratch, 1), "");  // no such thread
}

TEST(CallScratch, UsesTheGivenScratchElseItsOwn) {
  KernelScratch given(2);
  {
    const CallScratch s(&given, 2);
    s->Get<float>(1, kKSplitY, 10);
  }
  EXPECT_EQ(given.bytes(), 10 * sizeof(float));
  const CallScratch own(nullptr, 4);
  EXPECT_EQ(own->threads(), 4);
  EXPECT_DEATH(CallScratch(&given, 3), "");  // too few threads for the pool
}

// Inside a team run every member may use its caller-level scratch: CallerThread is
// the member's pool thread there, 0 outside.
TEST(CallerThread, IsTheTeamMembersPoolThread) {
  EXPECT_EQ(CallerThread(), 0);
  ThreadPool pool(3);
  internal::Team team(1);
  std::atomic<int> seen{0};
  pool.RunTeam(team, [&] { seen.fetch_or(1 << CallerThread()); });
  EXPECT_NE(seen.load() & 1, 0);  // the caller always takes part
  EXPECT_EQ(seen.load() & ~7, 0);
}

}  // namespace
}  // namespace dk::kernels
