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
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "elf/program.pb.h"

namespace dk::elf {

inline constexpr uint32_t kSchemaVersion = 1;
inline constexpr char kProgramSection[] = ".dk.program";
inline constexpr char kEntriesSection[] = ".dk.entries";

// Checks a Program on its own: schema version, unique BO and group names, every
// binding names an existing BO, every kernel symbol is in the kernel registry,
// BO sizes match shape x dtype for their layout (or their block format), categories
// are set, a block-format BO is a 2-D row-major BF16 weight with cols % 32 == 0,
// and a GEMV reads its weight through a variant of the weight's block format.
absl::Status ValidateProgram(const Program& program);

// Serializes a valid program to ELF bytes (validates first).
absl::StatusOr<std::string> WriteElf(const Program& program);
absl::Status WriteElfFile(const Program& program, const std::string& path);

// Parses and validates ELF bytes; `name` is used in error messages.
absl::StatusOr<Program> ReadElf(absl::string_view bytes, absl::string_view name = "<memory>");
absl::StatusOr<Program> ReadElfFile(const std::string& path);

// Bytes a BO of this shape, dtype and layout occupies ("" = row_major).
absl::StatusOr<int64_t> BoBytes(const BufferObject& bo);

// Bytes of one element of `dtype`; 0 for DTYPE_UNSPECIFIED.
int64_t DTypeBytes(DType dtype);

// "" for BLOCK_FORMAT_NONE, else "q8_0", "q4_0", "q4_1" (the registry's
// KernelVariant.block_format of the kernels that read it).
std::string BlockFormatName(BlockFormat format);
// Bytes of one 32-element block (0 for BLOCK_FORMAT_NONE).
int64_t BlockBytes(BlockFormat format);
inline constexpr int64_t kBlockElems = 32;

}  // namespace dk::elf

#endif  // DK_ELF_ELF_H_
