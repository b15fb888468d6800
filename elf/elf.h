// The decode ELF: a real ELF64 file (readelf -S -s reads it) whose section
// .dk.program holds the decode Program (program.proto, serialized) and whose
// symbol table lists the launch-group entry points (defined, in .dk.entries) and
// the kernel symbols the program needs (undefined, resolved by the backend, the way
// an NPU ELF links extern kernel objects).
//
// Reading validates everything and names the first problem: ELF structure (magic,
// class, bounds of every header, section and name), schema version, that every BO
// and kernel reference resolves, that BO sizes match their shapes, and that the
// symbol table matches the program. A malformed file is an error, never a crash.
// Thread-safety: stateless functions.
#ifndef DK_ELF_ELF_H_
#define DK_ELF_ELF_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "elf/program.pb.h"
#include "formats/weight_format.h"

namespace dk::elf {

// 2: ModelShape's family, ffn_activation and layer_types, and HostStep's kind, as enums.
inline constexpr uint32_t kSchemaVersion = 2;
inline constexpr char kProgramSection[] = ".dk.program";
inline constexpr char kEntriesSection[] = ".dk.entries";

// Limits on what a program, checkpoint, GGUF or config.json may state. Far above
// any model this toolkit runs, low enough that every size derived from them fits
// an int64 and a wrong file is refused before anything proportional is allocated.
inline constexpr int64_t kMaxDimension = int64_t{1} << 24;  // hidden, ffn, vocab, max_context, launch params
inline constexpr int64_t kMaxLayers = 4096;                 // n_layers
inline constexpr int64_t kMaxHeads = 4096;                  // n_heads, n_kv_heads
inline constexpr int64_t kMaxHeadDim = 4096;                // head_dim
inline constexpr int64_t kMaxBytes = int64_t{1} << 40;      // one BO, host value or KV cache
// Program.speculative: the draft kinds and the ranges of max_draft and max_ngram.
// Prompt lookup drafts from matches of kMinDraftNgram or more tokens, and a match of
// n tokens drafts at most 2^(n - kMinDraftNgram) (runtime/draft.h), so max_draft can
// be reached only when 2^(max_ngram - kMinDraftNgram) >= max_draft.
inline constexpr char kDraftPromptLookup[] = "prompt_lookup";
inline constexpr int kMaxDraft = 15;
inline constexpr int kMinDraftNgram = 2;
inline constexpr int kMaxNgram = 8;

// Checks a model shape: every size positive and within the limits above, the KV
// cache (n_layers x n_kv_heads x max_context x head_dim) within kMaxBytes, n_heads a
// multiple of n_kv_heads, head_dim even, rms_eps and rope_theta positive, a known
// rope scaling. Errors name the field, e.g. "model \"m\": vocab 2147483647 exceeds ...".
absl::Status ValidateModelShape(const ModelShape& model);

// ModelShape's enums by their lower-case value names, as config.json, GGUF metadata
// and messages spell them ("llama", "gemma3", "gelu_tanh", "sliding_attention"); a
// value the enum does not define is named "<enum>(<number>)". The parsers take those
// names (config.json's "gemma3_text" is mapped by its reader) and return nullopt for
// any other.
std::string FamilyName(ModelShape::Family family);
std::string ActivationName(ModelShape::FfnActivation activation);
std::string AttentionTypeName(ModelShape::AttentionType type);
std::optional<ModelShape::Family> ParseFamily(absl::string_view name);
std::optional<ModelShape::FfnActivation> ParseActivation(absl::string_view name);
std::optional<ModelShape::AttentionType> ParseAttentionType(absl::string_view name);
// A host step kind's lower-case name: its registry kernel's id ("kv_write").
std::string HostStepName(HostStep::Kind kind);

// Whether `layer` attends to a sliding window (layer_types; no entries: every layer full).
inline bool SlidingLayer(const ModelShape& m, int layer) {
  return layer >= 0 && layer < m.layer_types_size() && m.layer_types(layer) == ModelShape::SLIDING_ATTENTION;
}

// Parses a model config (a dk.elf.ModelShape text proto, e.g. config.textproto) and
// validates it (ValidateModelShape). A syntax error names `file`, line and column;
// nothing is logged (libprotobuf's own log line is not printed).
absl::StatusOr<ModelShape> ParseModelShapeText(absl::string_view text, absl::string_view file);

// Checks a Program on its own, once, so that no later code needs to re-check it:
// schema version, the model shape (ValidateModelShape), unique BO and group names,
// every binding names an existing BO, every kernel symbol is in the kernel registry
// and its integer parameters are present and within kMaxDimension, BO sizes match
// shape x dtype for their layout (products overflow-checked, at most kMaxBytes),
// categories are set, layers lie in [-1, n_layers), weight row ranges are
// non-negative and match the BO's rows, and a BO mirroring a host value has its
// dtype and lies inside it at host_offset >= 0, a block-format BO (Q8_0, Q4_0, Q4_1) is a
// 2-D row-major BF16 weight with cols % 32 == 0 (and only such a BO has
// blocks_as_stored), and a GEMV reads its weight through a
// variant of the weight's block format. Each launch binds every input and output of
// its kernel, not a host-only kernel; its operands meet the kernel's contract for
// its integer parameters (dtype, size, a weight's layout and K: the rules every
// device relies on); an OUTPUT BO it writes mirrors a host value and a WRITE BO it
// reads mirrors a host value or a weight. The F32 host value "logits" has vocab
// elements, written by OUTPUT BOs that cover it without overlapping. The one rule
// set of elf_dump, elf_opt and the runtime (Decoder::Create): a program one accepts,
// the others do not refuse. Errors name the field and the BO.
absl::Status ValidateProgram(const Program& program);
// Program.speculative within its ranges (ValidateProgram checks it when set).
absl::Status CheckSpeculative(const Speculative& speculative);

// Serializes a valid program to ELF bytes (validates first).
absl::StatusOr<std::string> WriteElf(const Program& program);
// Tests and fuzzer seeds only: the ELF bytes of `program` without validating it, to
// make the invalid files every reader must refuse. Never for real ELFs.
absl::StatusOr<std::string> WriteElfUnvalidatedForTesting(const Program& program);

// InvalidArgument for an invalid program (nothing written), Unavailable (with the
// system's reason) when the file cannot be written.
absl::Status WriteElfFile(const Program& program, const std::string& path);

// Parses and validates ELF bytes; `name` is used in error messages.
absl::StatusOr<Program> ReadElf(absl::string_view bytes, absl::string_view name = "<memory>");
// NotFound when `path` does not exist, InvalidArgument when it is not a regular
// file (a directory, /dev/zero, a FIFO) or is larger than kMaxElfFileBytes.
// Nothing is logged: the returned error is the only message (libprotobuf's own log
// lines are silenced while parsing).
absl::StatusOr<Program> ReadElfFile(const std::string& path);

// Bytes a BO of this shape, dtype and layout occupies ("" = row_major).
absl::StatusOr<int64_t> BoBytes(const BufferObject& bo);

// Bytes a GEMV streams from a packed_panel_x12_v1 BO when every 8 x 64 block is
// compact (784 of its 1024 bytes: codes and table; formats::X12StreamedBytes);
// blocks stored bf16 at load add up to 240 each. Its size_bytes otherwise (other
// layouts stream what they hold).
int64_t X12StreamedBytes(const BufferObject& bo);

// Bytes of one element of `dtype`; 0 for DTYPE_UNSPECIFIED.
int64_t DTypeBytes(DType dtype);

// The one mapping between the wire enum BlockFormat and the weight formats
// (formats/weight_format.h): the format of a block format (nullopt for
// BLOCK_FORMAT_NONE and values this build does not know), and back
// (BLOCK_FORMAT_NONE for the bf16 formats).
std::optional<formats::WeightFormat> WeightFormatOfBlocks(BlockFormat format);
BlockFormat BlockFormatOf(formats::WeightFormat format);
// "" for BLOCK_FORMAT_NONE, else the format's name: "q8_0", ..., "q6_k" (the
// registry's KernelVariant.block_format of the kernels that read it).
std::string BlockFormatName(BlockFormat format);
// A BO's weight format: its block format, else its layout ("" = row_major); an error
// naming the BO for an unknown block format or layout.
absl::StatusOr<formats::WeightFormat> WeightFormatOf(const BufferObject& bo);

}  // namespace dk::elf

#endif  // DK_ELF_ELF_H_
