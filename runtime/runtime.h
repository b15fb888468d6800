// The runtime's device model, mirroring XRT so that an NPU backend fits: a device,
// buffer objects (allocate, write, sync to/from the device, read), a loaded ELF,
// and runs (start an entry point with its bound BOs, wait). docs/architecture.md s.4.
//
// A BufferObject has a host-side copy and a device-side copy, as an XRT BO does:
// Write/Read touch the host side, SyncToDevice/SyncFromDevice move the bytes. A
// backend in validation mode checks the BO protocol and reports the first
// violation with the ELF, group, launch and BO names.
#ifndef DK_RUNTIME_RUNTIME_H_
#define DK_RUNTIME_RUNTIME_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "elf/program.pb.h"

namespace dk::runtime {

// Thread-safety: a BO is used by one host thread at a time; the device reads and
// writes its device side only while a run that binds it is in flight.
class BufferObject {
 public:
  virtual ~BufferObject() = default;
  virtual const std::string& name() const = 0;
  virtual size_t size() const = 0;
  // Host side <-> host memory.
  virtual absl::Status Write(const void* src, size_t bytes, size_t offset = 0) = 0;
  virtual absl::Status Read(void* dst, size_t bytes, size_t offset = 0) = 0;
  // Host side <-> device side (whole BO).
  virtual absl::Status SyncToDevice() = 0;
  virtual absl::Status SyncFromDevice() = 0;
  // The same for bytes [offset, offset + bytes) only (one token row of a BO that
  // holds several, as XRT's sync with size and offset).
  virtual absl::Status SyncRangeToDevice(size_t bytes, size_t offset) = 0;
  virtual absl::Status SyncRangeFromDevice(size_t bytes, size_t offset) = 0;
  // The whole BO written once and synced (a weight placed at load): `fill` writes its
  // size() bytes into `dst`, which holds zeros, as Write of the whole BO then
  // SyncToDevice would take them. This default goes through a host buffer; a backend
  // whose device side the host can write (the CPU's; XRT's mapped BOs) lets `fill`
  // write there directly: no host side and no copy, and what the weight's bytes are
  // made in is where they stay.
  using FillFn = std::function<absl::Status(uint8_t* dst)>;
  virtual absl::Status Fill(const FillFn& fill) {
    std::vector<uint8_t> bytes(size());
    if (absl::Status s = fill(bytes.data()); !s.ok()) return s;
    if (absl::Status s = Write(bytes.data(), bytes.size()); !s.ok()) return s;
    return SyncToDevice();
  }
};

// The token rows one run processes: rows [first, first + count). A BO (or host
// value) that holds R token rows keeps row r in its slot r mod R (RowSlot): a BO of
// one row is used whole by every run, and the LM head's BOs, sized for the rows one
// check of draft tokens needs, take a prompt chunk's last row in whatever slot it
// falls. Decode runs one row; a prompt chunk one row per token (docs/architecture.md
// s.4). A run's rows must not wrap within a BO: first mod R + count <= R.
struct RowRange {
  int first = 0;
  int count = 1;
};
inline size_t RowSlot(size_t row, int rows) { return rows > 1 ? row % static_cast<size_t>(rows) : 0; }

// One token row of a batched run (Decoder::StepBatch; docs/architecture.md s.4,
// "Sequences batched"): the row's token, the sequence whose KV cache its host steps read
// and write, and its position in that sequence.
struct BatchRow {
  uint32_t token = 0;
  int sequence = 0;
  int position = 0;
};

// A program loaded on a device: launch groups resolved to kernels, BO bindings
// checked. Thread-safety: immutable after Load.
class LoadedElf {
 public:
  virtual ~LoadedElf() = default;
};

// One started run of an entry point. Wait returns the run's status (a validation
// violation, if any). Thread-safety: one owner.
class Run {
 public:
  virtual ~Run() = default;
  virtual absl::Status Wait() = 0;
};

struct DeviceOptions {
  bool validate = false;  // check the BO protocol (on in tests)
};

// Thread-safety: Allocate/Load/Start are called from one host thread.
class Device {
 public:
  virtual ~Device() = default;
  virtual std::string description() const = 0;
  // `category` is the BO's category in the program (validation uses it). `rows`
  // > 1: the BO holds that many token rows of `bytes` each, one after the other
  // (size() is rows * bytes), and a run's RowRange picks which its kernels use.
  virtual absl::StatusOr<std::unique_ptr<BufferObject>> Allocate(const std::string& name,
                                                                 size_t bytes,
                                                                 elf::BoCategory category,
                                                                 int rows) = 0;
  // `elf_name` is used in messages. `bos[i]` is the BO of program.bos(i).
  virtual absl::StatusOr<std::unique_ptr<LoadedElf>> Load(const elf::Program& program,
                                                          const std::string& elf_name,
                                                          std::vector<BufferObject*> bos) = 0;
  // Starts launch group `group` (0-based, in execution order) of `elf` over token
  // rows `rows`, which must lie within every bound BO that holds token rows.
  virtual absl::StatusOr<std::unique_ptr<Run>> Start(LoadedElf& elf, int group, RowRange rows) = 0;

  // Weight layouts the device's kernels read: the bytes a [rows, cols] bf16 matrix
  // takes in `layout` and block format `format` (BLOCK_FORMAT_NONE: bf16
  // elements), and the host-side packer from row-major bf16 (used once, at load;
  // for a block format it quantizes). `out_zeroed`: `out` holds zeros, so the packer
  // may leave bytes that stay zero unwritten (the bytes are the same either way).
  virtual absl::StatusOr<size_t> LayoutBytes(const std::string& layout, elf::BlockFormat format,
                                             size_t rows, size_t cols) const = 0;
  virtual absl::Status PackWeight(const std::string& layout, elf::BlockFormat format,
                                  const void* row_major_bf16, size_t rows, size_t cols,
                                  void* out, bool out_zeroed) const = 0;
};

// Host-side work between runs (embedding, RoPE lookup, KV cache, attention,
// top-k), implemented by the backend's host library. Thread-safety: one caller.
class HostOps {
 public:
  virtual ~HostOps() = default;
  // The memory of one value a step binds (by parameter name).
  struct Value {
    void* data = nullptr;
    const elf::HostValue* info = nullptr;
    // The token rows the value holds (RowRange: row r in slot r mod rows) and the
    // bytes from one to the next (0 for one row).
    size_t row_bytes = 0;
    int rows = 1;
  };
  // Binds `step` once, before decoding: its kind resolved and its bound values (by
  // parameter name) found. Returns the handle RunHostStep takes; InvalidArgument for
  // a missing binding or a bad layer, Unimplemented for a kind the host lacks.
  // `step` and the values' memory must outlive the host ops.
  virtual absl::StatusOr<int> BindHostStep(const elf::HostStep& step,
                                           const std::vector<std::pair<std::string, Value>>& values) = 0;
  // Runs bound step `handle` for tokens.size() consecutive tokens: tokens[i] is at
  // position + i and its values are at token row first_row + i (decode: one token,
  // row 0). Every token's KV entries are written before any attention step reads
  // them (the program writes a layer's KV before its attention), so row i attends
  // to positions [0, position + i], as decoding the tokens one by one would.
  virtual absl::Status RunHostStep(int handle, absl::Span<const uint32_t> tokens, int position,
                                   int first_row) = 0;
  // Runs bound step `handle` for a batched run: row i (its values at token row i)
  // is rows[i].token of sequence rows[i].sequence at rows[i].position, with that
  // sequence's KV cache (sequence 0's is the one RunHostStep uses). Every row's KV
  // entries are written before any attention step reads them, so rows of one sequence
  // at consecutive positions attend as a prefill chunk does. A host without KV caches
  // per sequence: Unimplemented.
  virtual absl::Status RunHostStepBatch(int handle, absl::Span<const BatchRow> rows) {
    return absl::UnimplementedError("this host runs one sequence (no batched decode)");
  }
  // Forget the KV cache (a new sequence).
  virtual void Reset() = 0;
};

}  // namespace dk::runtime

#endif  // DK_RUNTIME_RUNTIME_H_
