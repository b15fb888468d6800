// Cuts a GGUF model to its first N blocks (decoder layers):
//
//   gguf_cut --in model.gguf --blocks 6 --out model_6l.gguf
//
// The output is a GGUF v3 file with the input's metadata in the input's key order,
// <arch>.block_count set to N (every other value as it was: the tokenizer, the
// norms' epsilon, the context length...), then the tensors of blocks < N
// ("blk.<i>." with i < N) and every tensor outside the blocks (token_embd, the
// output norm, output), each in its input order and type, its bytes copied byte for
// byte, aligned to the input's general.alignment. Tensors of blocks >= N are dropped.
// A metadata array under "<arch>." with one entry per block (a per-layer value some
// converters write) is cut to its first N entries.
//
// Used at build time (a genrule) to make a shape no shipped model has from trained
// weights; the cut file is never committed. Exit status (util/exit_codes.h): 0
// written, 1 an error, 2 a usage error.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "util/cli.h"
#include "util/exit_codes.h"
#include "util/status.h"
#include "util/user_path.h"
#include "weights/gguf.h"

ABSL_FLAG(std::string, in, "", "the GGUF file to cut");
ABSL_FLAG(int, blocks, 0, "how many blocks (decoder layers) to keep, from block 0");
ABSL_FLAG(std::string, out, "", "the GGUF file to write");

namespace {

using dk::weights::GgufArray;
using dk::weights::GgufFile;
using dk::weights::GgufTensorInfo;
using dk::weights::GgufType;
using dk::weights::GgufValue;

// Little-endian GGUF v3 serialization of metadata values and tensor infos.
class Writer {
 public:
  void U32(uint32_t v) { Raw(&v, 4); }
  void U64(uint64_t v) { Raw(&v, 8); }
  void Str(absl::string_view s) {
    U64(s.size());
    out_.append(s.data(), s.size());
  }
  void Raw(const void* p, size_t n) { out_.append(static_cast<const char*>(p), n); }
  void Pad(uint64_t alignment) {
    while (out_.size() % alignment != 0) out_.push_back('\0');
  }
  // The value's payload (no type tag): what follows the type in a KV pair or an
  // array's element list.
  absl::Status Payload(const GgufValue& v) {
    return std::visit(
        [&](const auto& x) -> absl::Status {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, std::string>) {
            Str(x);
          } else if constexpr (std::is_same_v<T, GgufArray>) {
            U32(static_cast<uint32_t>(x.element_type));
            U64(x.elements.size());
            for (const GgufValue& e : x.elements) {
              if (e.type() != x.element_type) {
                return absl::InvalidArgumentError("an array mixes element types");
              }
              DK_RETURN_IF_ERROR(Payload(e));
            }
          } else if constexpr (std::is_same_v<T, bool>) {
            const uint8_t b = x ? 1 : 0;
            Raw(&b, 1);
          } else {
            Raw(&x, sizeof(x));
          }
          return absl::OkStatus();
        },
        v.storage());
  }
  size_t size() const { return out_.size(); }
  const std::string& bytes() const { return out_; }

 private:
  std::string out_;
};

// "blk.<i>." -> i; -1 for a tensor outside the blocks.
int BlockOf(absl::string_view name) {
  if (!absl::ConsumePrefix(&name, "blk.")) return -1;
  const size_t dot = name.find('.');
  int i = -1;
  if (dot == absl::string_view::npos || !absl::SimpleAtoi(name.substr(0, dot), &i)) return -1;
  return i;
}

absl::Status Cut(const std::string& in_path, int blocks, const std::string& out_path) {
  DK_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> f, GgufFile::Open(in_path));
  DK_ASSIGN_OR_RETURN(const std::string arch, f->GetString("general.architecture"));
  const std::string count_key = arch + ".block_count";
  DK_ASSIGN_OR_RETURN(const int64_t old_blocks, f->GetInt(count_key));
  if (blocks < 1 || blocks > old_blocks) {
    return absl::InvalidArgumentError(
        absl::StrCat("--blocks ", blocks, ": ", in_path, " has ", old_blocks, " blocks (", count_key, ")"));
  }
  const uint64_t alignment = f->alignment();

  Writer meta;
  for (const std::string& key : f->keys()) {
    const GgufValue* v = f->Find(key);
    meta.Str(key);
    if (key == count_key) {
      // The same integer type as the input's, the new count.
      GgufValue::Storage count = v->storage();
      std::visit(
          [&](auto& x) {
            using T = std::decay_t<decltype(x)>;
            if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) x = static_cast<T>(blocks);
          },
          count);
      const GgufValue cut(v->type(), std::move(count));
      meta.U32(static_cast<uint32_t>(cut.type()));
      DK_RETURN_IF_ERROR(meta.Payload(cut));
      continue;
    }
    if (v->type() == GgufType::kArray && absl::StartsWith(key, arch + ".")) {
      DK_ASSIGN_OR_RETURN(const GgufArray* a, v->AsArray());
      if (static_cast<int64_t>(a->elements.size()) == old_blocks) {  // one entry per block
        GgufArray cut{a->element_type, {a->elements.begin(), a->elements.begin() + blocks}};
        meta.U32(static_cast<uint32_t>(GgufType::kArray));
        DK_RETURN_IF_ERROR(meta.Payload(GgufValue(GgufType::kArray, cut)));
        continue;
      }
    }
    meta.U32(static_cast<uint32_t>(v->type()));
    DK_RETURN_IF_ERROR(meta.Payload(*v));
  }

  std::vector<const GgufTensorInfo*> kept;
  for (const GgufTensorInfo& t : f->tensors()) {
    if (BlockOf(t.name) < blocks) kept.push_back(&t);
  }
  Writer infos;
  uint64_t offset = 0;
  for (const GgufTensorInfo* t : kept) {
    offset = (offset + alignment - 1) / alignment * alignment;
    infos.Str(t->name);
    infos.U32(static_cast<uint32_t>(t->dims.size()));
    for (int64_t d : t->dims) infos.U64(static_cast<uint64_t>(d));
    infos.U32(static_cast<uint32_t>(t->type));
    infos.U64(offset);
    offset += t->size_bytes;
  }

  Writer head;
  head.U32(0x46554747);  // "GGUF"
  head.U32(3);
  head.U64(kept.size());
  head.U64(f->keys().size());
  head.Raw(meta.bytes().data(), meta.size());
  head.Raw(infos.bytes().data(), infos.size());
  head.Pad(alignment);

  std::ofstream out(out_path, std::ios::binary | std::ios::trunc);
  if (!out) return absl::NotFoundError(absl::StrCat("cannot create ", out_path));
  out.write(head.bytes().data(), head.size());
  uint64_t written = 0;
  static const char kZeros[64] = {};
  for (const GgufTensorInfo* t : kept) {
    const uint64_t at = (written + alignment - 1) / alignment * alignment;
    for (uint64_t pad = at - written; pad > 0;) {
      const uint64_t n = std::min<uint64_t>(pad, sizeof(kZeros));
      out.write(kZeros, n);
      pad -= n;
    }
    DK_ASSIGN_OR_RETURN(const absl::Span<const uint8_t> data, f->TensorData(*t));
    out.write(reinterpret_cast<const char*>(data.data()), data.size());
    written = at + data.size();
  }
  out.close();
  if (!out) return absl::DataLossError(absl::StrCat("writing ", out_path, " failed"));
  std::printf("gguf_cut: %s (%lld blocks) -> %s: %d blocks, %zu of %zu tensors, %llu data bytes\n",
              in_path.c_str(), static_cast<long long>(old_blocks), out_path.c_str(), blocks, kept.size(),
              f->tensors().size(), static_cast<unsigned long long>(written));
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  if (absl::Status s = dk::cli::RequireNoPositional(args); !s.ok()) {
    return dk::ExitWithError("gguf_cut", s, dk::kExitUsage);
  }
  for (const absl::Status& s : {dk::cli::RequireFlag("in", absl::GetFlag(FLAGS_in)),
                                dk::cli::RequireFlag("out", absl::GetFlag(FLAGS_out)),
                                dk::cli::RequireRange("blocks", absl::GetFlag(FLAGS_blocks), 1, 1 << 16)}) {
    if (!s.ok()) return dk::ExitWithError("gguf_cut", s, dk::kExitUsage);
  }
  if (absl::Status s = Cut(dk::UserPath(absl::GetFlag(FLAGS_in)), absl::GetFlag(FLAGS_blocks),
                           dk::UserPath(absl::GetFlag(FLAGS_out)));
      !s.ok()) {
    return dk::ExitWithError("gguf_cut", s);
  }
  return dk::kExitOk;
}
