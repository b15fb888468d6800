// The kernels' working memory, owned by whoever runs them: one set of buffers per
// thread of the pool the kernels run on, indexed by the pool's thread index (the
// `thread` a ThreadPool task gets; 0 for the caller). A CPU device and its host ops
// each hold one, created and freed with them, so that two sessions (two Engines)
// share no scratch and none outlives its session (docs/architecture.md, "One context
// per engine").
//
// Thread-safety: thread t uses only its own buffers, so the threads of one pool run
// may use one KernelScratch together; two pools must not share one.
#ifndef DK_KERNELS_COMMON_SCRATCH_H_
#define DK_KERNELS_COMMON_SCRATCH_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "util/aligned_buffer.h"
#include "util/check.h"
#include "util/thread_pool.h"

namespace dk::kernels {

// Each buffer a kernel keeps between the steps of one call has a slot of its own, so
// that no two of them, live at once on one thread, share memory.
enum ScratchSlot : int {
  kAttentionScratch,  // the attention kernels' per-task rows (kernels/attention)
  kKSplitX,           // KSplitGemv's x as f32
  kKSplitY,           // KSplitGemv's f32 sums of a bf16 y
  // A bf16-weight GEMV's prepared x (PrepareBf16X, gemv.cc), on the calling thread.
  kGemvSplitX,        // x as even / odd f32 halves, zero-padded (the widening loops)
  kGemvPaddedX,       // bf16 x zero-padded to whole chunks (the vdpbf16ps loops)
  // A block-format GEMV's prepared x (PrepareQuantX, gemv_quant.cc), on the calling thread.
  kQuantXF32,         // bf16 x widened to f32
  kQuantQ,            // x quantized per 32-element block: int8 values,
  kQuantD,            //   their scales,
  kQuantSum,          //   their sums,
  kQuantSx,           //   and scale * sum
  kQuantQuad,         // q re-arranged for the AVX512-VNNI Q4 rows (QuadActivations)
  kQuantSums16,       // q summed per 16 elements for the AVX512-VNNI Q6_K rows (Sums16)
  kQuantActs,         // the Q8Activations a QuantX points at
  // Per pool thread, inside the rows kernels.
  kDpBf16Tiles,       // the vdpbf16ps multi-token kernels' spilled accumulators
  kX12Tiles,          // the x12 multi-token kernels' spilled accumulators
  kX12RowsY,          // X12Gemv's f32 rows of a bf16 y
  kX12Panel,          // one x12 panel decoded to the packed layout (no vdpbf16ps)
  // The fused GEMVs (gemv_fused.cc): f32 rows of weight j at kFusedAcc0 + j (as many
  // as kMaxFusedWeights), then the RmsNorm'd x, on the calling thread.
  kFusedAcc0,
  kFusedAcc1,
  kFusedAcc2,
  kFusedNormedX,
  // The GEMMs (gemm.cc): on the calling thread,
  kGemmNormedX,       // the RmsNorm'd token rows,
  kGemmPrepared,      // every token row's prepared x, copied out of the GEMV's slots,
  kGemmRowsX,         // their Bf16X or QuantX,
  kGemmActs,          // their Q8Activations,
  kGemmPadded,        // their padded bf16 x pointers;
  // per pool thread,
  kGemmX12Rows,       // one token row's f32 x12 rows
  kGemmX12Tile,       // an x12 tile rebuilt in the packed layout
  kGemmBlockAcc,      // a block of f32 results of every token row
  kGemmGate,          // SiLU*mul's f32 gate rows
  kGemmUp,            // and up rows
  kScratchSlots
};

class KernelScratch {
 public:
  static constexpr int kSlots = kScratchSlots;

  // Buffers for `threads` threads (>= 1), empty until first asked for.
  explicit KernelScratch(int threads) : threads_(threads), buffers_(new PerThread[threads]) {
    DK_CHECK(threads >= 1);
  }
  KernelScratch(const KernelScratch&) = delete;
  KernelScratch& operator=(const KernelScratch&) = delete;

  int threads() const { return threads_; }

  // Thread `thread`'s buffer `slot`, at least `n` elements of T, 64-byte aligned;
  // grown (its contents lost) when smaller, never shrunk. Valid until the next call
  // for the same thread and slot.
  template <typename T>
  T* Get(int thread, int slot, size_t n) {
    DK_CHECK(thread >= 0 && thread < threads_ && slot >= 0 && slot < kSlots);
    AlignedBuffer<uint8_t>& b = buffers_[thread].slot[slot];
    const size_t bytes = n * sizeof(T);
    if (b.size() < bytes) b = AlignedBuffer<uint8_t>(bytes);
    return reinterpret_cast<T*>(b.data());
  }

  // Bytes held by all threads' buffers.
  size_t bytes() const {
    size_t total = 0;
    for (int t = 0; t < threads_; ++t) {
      for (const AlignedBuffer<uint8_t>& b : buffers_[t].slot) total += b.size();
    }
    return total;
  }

 private:
  // A thread's buffers on cache lines of their own: the thread's growth of a buffer
  // writes its owner's fields, never a neighbour's line.
  struct alignas(64) PerThread {
    AlignedBuffer<uint8_t> slot[kSlots];
  };
  int threads_;
  std::unique_ptr<PerThread[]> buffers_;
};

// The scratch one kernel call uses: `given`, checked to cover `threads` threads (the
// call's pool's) and the calling thread (CallerThread), or (given null: a test, a
// benchmark) one of the call's own, freed when it returns.
class CallScratch {
 public:
  CallScratch(KernelScratch* given, int threads) : scratch_(given) {
    threads = std::max(threads, CallerThread() + 1);
    if (scratch_ == nullptr) {
      own_ = std::make_unique<KernelScratch>(threads);
      scratch_ = own_.get();
    }
    DK_CHECK(scratch_->threads() >= threads);
  }
  KernelScratch* operator->() const { return scratch_; }
  KernelScratch& operator*() const { return *scratch_; }

 private:
  KernelScratch* scratch_;
  std::unique_ptr<KernelScratch> own_;
};

}  // namespace dk::kernels

#endif  // DK_KERNELS_COMMON_SCRATCH_H_
