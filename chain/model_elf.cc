#include "chain/model_elf.h"

#include <fcntl.h>
#include <link.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "elf/elf.h"
#include "graph/baseline.h"
#include "optimizations/passes.h"
#include "registry/registry.h"
#include "util/read_file.h"
#include "util/status.h"
#include "weights/model_file.h"
#include "weights/sha256.h"
#include "weights/weights.h"

namespace dk::chain {
namespace {

// The code that builds the ELFs: the GNU build ids of every object loaded in this
// process (the program and its shared libraries), so a rebuilt toolkit never reads
// an entry an older one wrote. Computed once.
const std::string& CodeIdentity() {
  static const std::string* identity = [] {
    auto* out = new std::string;
    dl_iterate_phdr(
        [](dl_phdr_info* info, size_t, void* data) {
          auto* s = static_cast<std::string*>(data);
          for (int i = 0; i < info->dlpi_phnum; ++i) {
            const ElfW(Phdr)& ph = info->dlpi_phdr[i];
            if (ph.p_type != PT_NOTE) continue;
            const char* p = reinterpret_cast<const char*>(info->dlpi_addr + ph.p_vaddr);
            const char* end = p + ph.p_memsz;
            while (p + sizeof(ElfW(Nhdr)) <= end) {
              const auto* note = reinterpret_cast<const ElfW(Nhdr)*>(p);
              const char* name = p + sizeof(ElfW(Nhdr));
              const char* desc = name + ((note->n_namesz + 3) & ~3u);
              if (note->n_type == NT_GNU_BUILD_ID && desc + note->n_descsz <= end) {
                s->append(desc, note->n_descsz);
              }
              p = desc + ((note->n_descsz + 3) & ~3u);
            }
          }
          return 0;
        },
        out);
    if (out->empty()) {
      // No build id anywhere: fall back to the program's bytes.
      absl::StatusOr<std::string> exe = ReadRegularFile("/proc/self/exe", "the running program", uint64_t{1} << 34);
      *out = exe.ok() ? weights::Sha256Hex(*exe) : "unknown";
    }
    return out;
  }();
  return *identity;
}

absl::Status CacheError(const std::string& what, const std::string& path, int err) {
  return absl::FailedPreconditionError(absl::StrCat("ELF cache: cannot ", what, " ", path, ": ",
                                                    std::strerror(err),
                                                    " (name another directory with --cache_dir)"));
}

absl::Status MakeDirectories(const std::string& dir) {
  std::string partial;
  for (size_t i = 0; i <= dir.size(); ++i) {
    if (i < dir.size() && dir[i] != '/') continue;
    partial = dir.substr(0, i);
    if (partial.empty()) continue;
    if (::mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST) return CacheError("create", partial, errno);
  }
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) return CacheError("create", dir, errno);
  if (!S_ISDIR(st.st_mode)) return CacheError("use", dir, ENOTDIR);
  if (::access(dir.c_str(), W_OK) != 0) return CacheError("write to", dir, errno);
  return absl::OkStatus();
}

// Writes `bytes` to `path` through a temporary file renamed into place.
absl::Status WriteAtomically(const std::string& path, const std::string& bytes) {
  const std::string tmp = absl::StrCat(path, ".tmp.", ::getpid(), ".",
                                       std::hash<std::thread::id>()(std::this_thread::get_id()));
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return CacheError("write", tmp, errno);
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      return CacheError("write", tmp, err);
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return CacheError("write", tmp, err);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return CacheError("write", path, err);
  }
  return absl::OkStatus();
}

// The cached ELF at `path` if it is whole: its sidecar names the sha256 of its
// bytes, and it parses as a valid decode ELF. Anything else is a miss.
bool ReadCached(const std::string& path, bool* existed, std::string* how) {
  struct stat st;
  *existed = ::stat(path.c_str(), &st) == 0;
  if (!*existed) return false;
  absl::StatusOr<std::string> bytes = ReadRegularFile(path, "cached ELF", elf::kMaxBytes);
  absl::StatusOr<std::string> digest = ReadRegularFile(path + ".sha256", "cached ELF digest");
  if (!bytes.ok() || !digest.ok()) return false;
  // "<sha256 of the ELF>\n<how it was made>\n"
  const size_t newline = digest->find('\n');
  if (newline == std::string::npos || digest->substr(0, newline) != weights::Sha256Hex(*bytes)) return false;
  if (!elf::ReadElf(*bytes, path).ok()) return false;
  *how = digest->substr(newline + 1);
  while (!how->empty() && how->back() == '\n') how->pop_back();
  return !how->empty();
}

std::string StoredOption(const std::map<std::string, std::string>& types) {
  std::vector<std::string> entries;
  for (const auto& [tensor, type] : types) entries.push_back(absl::StrCat(tensor, "=", type));
  return absl::StrCat("stored=", absl::StrJoin(entries, ","));
}

// Whether `path` is a GGUF file (by its magic) and whether it holds weights (a GGUF or
// a checkpoint directory; not a config.json alone). ShapeFromModelFile has opened it.
void Classify(const std::string& path, ModelElfs& out) {
  absl::StatusOr<OpenedPath> opened = OpenUserPath(path, "model", PathKinds::kFileOrDirectory);
  if (!opened.ok()) return;
  if (opened->is_directory) {
    out.holds_weights = true;
    return;
  }
  absl::StatusOr<std::string> head = ReadHead(*opened, path, 4);
  out.gguf = out.holds_weights = head.ok() && *head == "GGUF";
}

std::string StandardHow(const Stage& stage) {
  if (stage.pass.empty()) return "the baseline";
  return absl::StrCat(stage.pass, stage.options.empty() ? "" : " ", absl::StrJoin(stage.options, " "), " over ",
                      stage.src);
}

size_t StageIndex(const std::vector<Stage>& chain, const std::string& name) {
  for (size_t i = 0; i < chain.size(); ++i) {
    if (chain[i].name == name) return i;
  }
  return 0;
}

// `stage`'s pass over the ELF `bytes` (named `src` in messages), as elf_opt runs it:
// read back, the pass through ApplyPass, validated, written.
absl::StatusOr<std::string> ApplyToBytes(const std::string& bytes, const std::string& src, const Stage& stage,
                                         const std::vector<std::string>& args,
                                         const registry::TargetConstraints& target) {
  DK_ASSIGN_OR_RETURN(elf::Program program, elf::ReadElf(bytes, src));
  DK_ASSIGN_OR_RETURN(const opt::Pass* pass, opt::FindPass(stage.pass));
  DK_ASSIGN_OR_RETURN(const opt::PassOptions pass_options, opt::ParseOptions(*pass, args));
  DK_RETURN_IF_ERROR(opt::ApplyPass(*pass, program, target, pass_options,
                                    stage.allow_noop ? opt::NoopPolicy::kAllow : opt::NoopPolicy::kFail)
                         .status());
  DK_RETURN_IF_ERROR(elf::ValidateProgram(program));
  return elf::WriteElf(program);
}

}  // namespace

std::vector<Stage> StandardChain(bool gguf) {
  std::vector<Stage> chain = {
      {"decode", "", {}, false, false, ""},
      {"decode_aligned", "layout_alignment", {}, false, false, "decode"},
      {"decode_bo", "buffer_object_reuse", {}, false, false, "decode_aligned"},
      {"decode_opt", "merge_multi_launch", {}, false, false, "decode_bo"},
      // Gemma's graph has nothing these fusions take.
      {"decode_fused", "fuse_kernels", {}, true, false, "decode_opt"},
      {"decode_x12", "compress_weights", {}, false, false, "decode_fused"},
      {"decode_q8", "quantize_weights", {"scheme=q8_0"}, false, false, "decode_x12"},
  };
  if (gguf) chain.push_back({"decode_gguf", "quantize_weights", {"scheme=gguf"}, false, true, "decode_q8"});
  chain.push_back({"decode_spec", "speculative_decode", {"max_draft=4"}, false, false, chain.back().name});
  return chain;
}

std::string BestStage(bool gguf) { return gguf ? "decode_gguf" : "decode_x12"; }

std::string DefaultCacheDir() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && xdg[0] == '/') {
    return absl::StrCat(xdg, "/decodekit/elf");
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && home[0] != '\0') {
    return absl::StrCat(home, "/.cache/decodekit/elf");
  }
  return "";
}

absl::StatusOr<ModelElfs> BuildModelElfs(const std::string& model_path, const ModelElfOptions& options) {
  ModelElfs out;
  DK_ASSIGN_OR_RETURN(out.shape, weights::ShapeFromModelFile(
                                     model_path, {.name = options.name, .max_context = options.max_context}));
  Classify(model_path, out);
  const std::vector<Stage> chain = StandardChain(out.gguf);
  size_t last = chain.size() - 1;
  if (!options.up_to.empty()) {
    std::vector<std::string> names;
    last = chain.size();
    for (size_t i = 0; i < chain.size(); ++i) {
      names.push_back(chain[i].name);
      if (chain[i].name == options.up_to) last = i;
    }
    if (last == chain.size()) {
      return absl::InvalidArgumentError(absl::StrCat("stage \"", options.up_to, "\" is not in the chain of ",
                                                     model_path, ": ", absl::StrJoin(names, ", ")));
    }
  }
  const std::string dir = options.cache_dir.empty() ? DefaultCacheDir() : options.cache_dir;
  if (dir.empty()) {
    return absl::FailedPreconditionError(
        "ELF cache: neither HOME nor XDG_CACHE_HOME is set; name a directory with --cache_dir");
  }
  DK_RETURN_IF_ERROR(MakeDirectories(dir));
  DK_ASSIGN_OR_RETURN(const registry::TargetConstraints* target, registry::FindTarget("cpu"));

  std::string stored;
  if (out.gguf) {
    DK_ASSIGN_OR_RETURN(const auto types, weights::GgufStoredTypes(model_path));
    stored = StoredOption(types);
  }
  std::string shape_bytes;
  out.shape.SerializeToString(&shape_bytes);
  // Every input of an ELF, in order: the code, the shape, each stage up to it.
  std::string key_text = absl::StrCat("decodekit ELF cache 1\n", CodeIdentity().size(), ":", CodeIdentity(),
                                      "\n", shape_bytes.size(), ":", shape_bytes, "\n");

  std::string bytes;                     // the previous stage's ELF
  std::vector<std::string> stage_bytes;  // every stage's, in order
  for (size_t i = 0; i <= last; ++i) {
    const Stage& stage = chain[i];
    std::vector<std::string> args = stage.options;
    if (stage.stored_from_gguf) args.push_back(stored);
    absl::StrAppend(&key_text, stage.name, "|", stage.pass, "|", stage.allow_noop, "|",
                    absl::StrJoin(args, ";"), "\n");
    BuiltStage built;
    built.name = stage.name;
    built.key = weights::Sha256Hex(key_text);
    built.elf_path = absl::StrCat(dir, "/", out.shape.name(), "-", stage.name, "-", built.key.substr(0, 16), ".elf");
    bool existed = false;
    if (ReadCached(built.elf_path, &existed, &built.how)) {
      built.from_cache = true;
      DK_ASSIGN_OR_RETURN(bytes, ReadRegularFile(built.elf_path, "cached ELF", elf::kMaxBytes));
    } else {
      built.rebuilt_corrupt = existed;
      if (stage.pass.empty()) {
        DK_ASSIGN_OR_RETURN(const elf::Program program, graph::BuildBaseline(out.shape));
        DK_ASSIGN_OR_RETURN(bytes, elf::WriteElf(program));
      } else {
        absl::StatusOr<std::string> next = ApplyToBytes(bytes, chain[i - 1].name, stage, args, *target);
        const absl::Status standard_error = next.status();
        if (!next.ok() && stage.stored_from_gguf && i >= 3) {
          // The file's blocks in the unfused program, then the fusions that fit them.
          const size_t opt_index = StageIndex(chain, "decode_opt");
          const Stage fuse = chain[StageIndex(chain, "decode_fused")];
          Stage quantize = stage;
          quantize.src = "decode_opt";
          absl::StatusOr<std::string> unfused =
              ApplyToBytes(stage_bytes[opt_index], "decode_opt", quantize, args, *target);
          if (unfused.ok()) {
            Stage fuse_after = fuse;
            fuse_after.allow_noop = true;
            next = ApplyToBytes(*unfused, stage.name, fuse_after, fuse.options, *target);
            built.how = absl::StrCat(stage.pass, " ", absl::StrJoin(stage.options, " "),
                                     " over decode_opt, then fuse_kernels; over decode_q8 it failed: ",
                                     standard_error.message());
          }
        }
        if (!next.ok()) {
          return absl::Status(standard_error.code(), absl::StrCat(stage.name, " (", stage.pass, " over ",
                                                                  stage.src, "): ", standard_error.message()));
        }
        bytes = *std::move(next);
      }
      if (built.how.empty()) built.how = StandardHow(stage);
      DK_RETURN_IF_ERROR(
          WriteAtomically(built.elf_path + ".sha256", absl::StrCat(weights::Sha256Hex(bytes), "\n", built.how, "\n")));
      DK_RETURN_IF_ERROR(WriteAtomically(built.elf_path, bytes));
    }
    stage_bytes.push_back(bytes);
    out.stages.push_back(std::move(built));
  }
  out.best = static_cast<int>(out.stages.size()) - 1;
  for (size_t i = 0; i < out.stages.size(); ++i) {
    if (out.stages[i].name == BestStage(out.gguf)) out.best = static_cast<int>(i);
  }
  return out;
}

absl::StatusOr<int> FindStage(const ModelElfs& elfs, const std::string& name) {
  if (name.empty()) return elfs.best;
  std::vector<std::string> names;
  for (size_t i = 0; i < elfs.stages.size(); ++i) {
    if (elfs.stages[i].name == name) return static_cast<int>(i);
    names.push_back(elfs.stages[i].name);
  }
  return absl::NotFoundError(
      absl::StrCat("stage \"", name, "\" is not in the chain: ", absl::StrJoin(names, ", ")));
}

std::string Describe(const std::string& model_path, const ModelElfs& elfs, int stage) {
  const BuiltStage& s = elfs.stages[stage];
  return absl::StrCat("model ", model_path, " (", elfs.shape.name(), ", ", elfs.shape.n_layers(), " layers, ",
                      elfs.shape.max_context(), " positions): stage ", s.name, " (", s.how, "), ELF ", s.elf_path,
                      s.from_cache ? " (cached)" : s.rebuilt_corrupt ? " (rebuilt: the cached entry was corrupt)"
                                                                      : " (built)");
}

}  // namespace dk::chain
