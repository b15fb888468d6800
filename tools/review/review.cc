// A review report of the decode chains a change touches:
//   ./bazelw run //tools/review -- --base=origin/main [--no_build] [--bazel=CMD]
// For each model (models/*/BUILD) whose chain differs between --base and the
// working tree:
//   (a) stages added, removed, re-pointed (src), other attribute changes, and the
//       chain and final stage of each side (tools/review/chain.h);
//   (b) what the final stage's ELF changed (tools/elf_dump/diff.h), both ELFs
//       built with bazel: the base in a temporary `git worktree`, the working
//       tree in place (skipped with --no_build);
//   (c) the phase-5 records' figures side by side (tools/review/record.h).
// Models whose chain did not change are listed on one "Unchanged:" line.
// The report goes to stdout, progress of the slow steps to stderr. Exit status:
// 0 done, 1 failure (not a git repository, unknown revision, a BUILD that does
// not parse, a failed build), 2 usage error.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "elf/elf.h"
#include "tools/elf_dump/diff.h"
#include "tools/review/chain.h"
#include "tools/review/process.h"
#include "tools/review/record.h"
#include "util/exit_codes.h"
#include "util/read_file.h"

ABSL_FLAG(std::string, base, "", "the git revision to compare the working tree against (required)");
ABSL_FLAG(bool, no_build, false, "skip building the final stages and their ELF diff (part b)");
ABSL_FLAG(std::string, bazel, "./bazelw",
          "the bazel command, split at spaces and run in the root of each tree (a relative path is "
          "relative to that tree)");
ABSL_FLAG(std::string, worktree, "",
          "where to check out the base (default: $TMPDIR/dk_review_base_<hash of the repository path>, "
          "stable so its Bazel output base stays warm); removed afterwards");

namespace fs = std::filesystem;

namespace {

constexpr char kRecord[] = "docs/development_progress/phase5_decode.md";
// Variables `bazel run` sets for this tool that must not leak into the builds.
const std::vector<std::string> kBazelRunEnv = {"BUILD_WORKSPACE_DIRECTORY", "BUILD_WORKING_DIRECTORY",
                                               "RUNFILES_DIR", "RUNFILES_MANIFEST_FILE", "JAVA_RUNFILES"};

void Progress(const std::string& line) { std::fprintf(stderr, "review: %s\n", line.c_str()); }

// git -C root args...; its stdout, or an error carrying git's stderr.
absl::StatusOr<std::string> Git(const std::string& root, std::vector<std::string> args) {
  args.insert(args.begin(), {"git", "-C", root});
  auto r = dk::review::Run(args);
  if (!r.ok()) return r.status();
  if (r->exit_code != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        absl::StrJoin(args, " "), " failed: ", absl::StripAsciiWhitespace(dk::review::Tail(r->err, 5))));
  }
  return r->out;
}

std::optional<std::string> ReadFile(const fs::path& path) {
  absl::StatusOr<std::string> text = dk::ReadRegularFile(path.string(), "file");
  if (!text.ok()) return std::nullopt;
  return *std::move(text);
}

// One side of a model: its BUILD (absent when the model does not exist there),
// chain and record.
struct Side {
  std::optional<std::string> build;
  dk::review::Chain chain;
  std::optional<std::string> record_text;
  std::optional<dk::review::Record> record;
  std::string record_error;
  std::string elf;  // the built final stage, when built
};

struct Model {
  std::string name;
  Side base, work;
  std::vector<std::string> changes;
  std::string elf_diff;  // part (b)
};

std::string ChainLine(const dk::review::Chain& c) {
  if (c.stages.empty()) return "(no chain)";
  return absl::StrCat(absl::StrJoin(c.Path(), " -> "), "   (final ", c.final_stage, ", from ", c.final_from,
                      ")");
}

// "note: ..." when a record's stages are not the chain's (the record predates the change).
void StaleNote(const Side& side, const std::string& which, std::string& out) {
  if (!side.record) return;
  std::vector<std::string> missing, extra;
  std::set<std::string> in_record;
  for (const auto& f : side.record->stages) {
    in_record.insert(f.stage);
    if (side.chain.Find(f.stage) == nullptr) extra.push_back(f.stage);
  }
  for (const auto& s : side.chain.stages) {
    if (!in_record.count(s.name)) missing.push_back(s.name);
  }
  if (!extra.empty()) {
    absl::StrAppend(&out, "note: the ", which, " record lists ", absl::StrJoin(extra, ", "),
                    ", not in its chain (re-run :profile)\n");
  }
  if (!missing.empty()) {
    absl::StrAppend(&out, "note: the ", which, " record has no row for ", absl::StrJoin(missing, ", "),
                    " (re-run :profile)\n");
  }
}

class Review {
 public:
  Review(std::string root, std::string base_arg) : root_(std::move(root)), base_arg_(std::move(base_arg)) {}
  ~Review() { RemoveWorktree(); }

  absl::StatusOr<std::string> Report() {
    // The workspace may sit below the repository's top: paths at the base get its prefix.
    auto prefix = Git(root_, {"rev-parse", "--show-prefix"});
    if (!prefix.ok()) {
      return absl::FailedPreconditionError(absl::StrCat(root_, " is not inside a git repository"));
    }
    prefix_ = std::string(absl::StripAsciiWhitespace(*prefix));
    if (absl::StartsWith(base_arg_, "-")) {
      return absl::InvalidArgumentError(absl::StrCat("unknown revision '", base_arg_, "'"));
    }
    auto sha = Git(root_, {"rev-parse", "--verify", "--quiet", absl::StrCat(base_arg_, "^{commit}")});
    if (!sha.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown revision '", base_arg_, "' (not a commit of the repository at ", root_, ")"));
    }
    sha_ = std::string(absl::StripAsciiWhitespace(*sha));

    auto names = ModelNames();
    if (!names.ok()) return names.status();
    std::vector<Model> changed;
    std::vector<std::string> unchanged;
    for (const std::string& name : *names) {
      auto m = LoadModel(name);
      if (!m.ok()) return m.status();
      if (m->changes.empty()) {
        unchanged.push_back(name);
      } else {
        changed.push_back(*std::move(m));
      }
    }
    if (!absl::GetFlag(FLAGS_no_build) && !changed.empty()) {
      if (auto st = BuildAndDiff(changed); !st.ok()) return st;
    }

    std::string out =
        absl::StrCat("# Review: the working tree against ", base_arg_, " (", sha_.substr(0, 12), ")\n");
    if (names->empty()) absl::StrAppend(&out, "\nNo models/*/BUILD on either side.\n");
    for (const Model& m : changed) absl::StrAppend(&out, ModelSection(m));
    if (!unchanged.empty()) absl::StrAppend(&out, "\nUnchanged: ", absl::StrJoin(unchanged, ", "), "\n");
    return out;
  }

 private:
  // Models with a BUILD in the working tree or at the base, sorted.
  absl::StatusOr<std::vector<std::string>> ModelNames() {
    std::set<std::string> names;
    std::error_code ec;
    const fs::path models = fs::path(root_) / "models";
    if (fs::is_directory(models, ec)) {
      for (const auto& entry : fs::directory_iterator(models, ec)) {
        if (fs::is_regular_file(entry.path() / "BUILD", ec)) names.insert(entry.path().filename().string());
      }
    }
    auto listing =
        Git(root_, {"ls-tree", "-r", "--name-only", "--full-tree", sha_, "--", prefix_ + "models"});
    if (!listing.ok()) return listing.status();
    for (absl::string_view path : absl::StrSplit(*listing, '\n', absl::SkipEmpty())) {
      if (!absl::ConsumePrefix(&path, prefix_)) continue;
      std::vector<std::string> parts = absl::StrSplit(path, '/');
      if (parts.size() == 3 && parts[0] == "models" && parts[2] == "BUILD") names.insert(parts[1]);
    }
    return std::vector<std::string>(names.begin(), names.end());
  }

  // The workspace inside a checkout of the repository at `checkout`.
  std::string InRepo(const std::string& checkout) const {
    return prefix_.empty() ? checkout : (fs::path(checkout) / prefix_).string();
  }

  std::optional<std::string> ShowAtBase(const std::string& path) {
    auto text = Git(root_, {"show", absl::StrCat(sha_, ":", prefix_, path)});
    if (!text.ok()) return std::nullopt;
    return *text;
  }

  absl::StatusOr<Model> LoadModel(const std::string& name) {
    Model m;
    m.name = name;
    const std::string dir = absl::StrCat("models/", name);
    m.base.build = ShowAtBase(dir + "/BUILD");
    m.work.build = ReadFile(fs::path(root_) / dir / "BUILD");
    for (Side* side : {&m.base, &m.work}) {
      const bool is_base = side == &m.base;
      if (side->build) {
        auto chain = dk::review::ParseChain(*side->build, name);
        if (!chain.ok()) {
          return absl::InvalidArgumentError(absl::StrCat("cannot parse ", dir, "/BUILD ",
                                                         is_base ? "at " + base_arg_ : "in the working tree",
                                                         ": ", chain.status().message()));
        }
        side->chain = *std::move(chain);
      }
      side->record_text =
          is_base ? ShowAtBase(absl::StrCat(dir, "/", kRecord)) : ReadFile(fs::path(root_) / dir / kRecord);
      if (side->record_text) {
        auto record = dk::review::ParseRecord(*side->record_text);
        if (record.ok()) {
          side->record = *std::move(record);
        } else {
          side->record_error = std::string(record.status().message());
        }
      }
    }
    m.changes = dk::review::ChainChanges(m.base.chain, m.work.chain);
    if (m.base.build.has_value() != m.work.build.has_value()) {
      m.changes.insert(m.changes.begin(), m.base.build ? "- model removed in the working tree"
                                                       : "+ model added in the working tree");
    }
    return m;
  }

  // Runs the bazel command in `tree`: build the targets.
  absl::Status Bazel(const std::string& tree, const std::string& where, const std::vector<std::string>& args,
                     bool base_build) {
    std::vector<std::string> argv = absl::StrSplit(absl::GetFlag(FLAGS_bazel), ' ', absl::SkipEmpty());
    if (argv.empty()) return absl::InvalidArgumentError("--bazel is empty");
    argv.insert(argv.end(), args.begin(), args.end());
    const std::string what = absl::StrJoin(argv, " ");
    Progress(absl::StrCat("running `", what, "` in ", where, " (", tree, ")",
                          base_build ? "; a cold output base takes minutes" : ""));
    const auto start = std::chrono::steady_clock::now();
    auto r = dk::review::Run(argv, tree, kBazelRunEnv);
    if (!r.ok()) return r.status();
    if (dk::review::Interrupted()) {
      return absl::CancelledError(absl::StrCat("interrupted during `", what, "` in ", where));
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (r->exit_code != 0) {
      return absl::AbortedError(absl::StrCat("`", what, "` failed in ", where, " (", tree, ", exit ",
                                             r->exit_code, "); its last lines:\n",
                                             dk::review::Tail(r->err + r->out, 15)));
    }
    Progress(absl::StrFormat("done in %.1f s", s));
    return absl::OkStatus();
  }

  absl::Status BuildSide(const std::string& tree, const std::string& where, std::vector<Model>& models,
                         bool base) {
    std::vector<std::string> args = {"build"};
    for (const Model& m : models) {
      const Side& side = base ? m.base : m.work;
      if (!side.chain.final_stage.empty())
        args.push_back(absl::StrCat("//models/", m.name, side.chain.final_stage));
    }
    if (args.size() == 1) return absl::OkStatus();
    if (auto st = Bazel(tree, where, args, base); !st.ok()) return st;
    for (Model& m : models) {
      Side& side = base ? m.base : m.work;
      if (side.chain.final_stage.empty()) continue;
      side.elf = (fs::path(tree) / "bazel-bin/models" / m.name / (side.chain.final_stage.substr(1) + ".elf"))
                     .string();
      std::error_code ec;
      if (!fs::is_regular_file(side.elf, ec)) {
        return absl::NotFoundError(absl::StrCat("the build in ", where, " succeeded but left no ", side.elf));
      }
    }
    return absl::OkStatus();
  }

  absl::Status BuildAndDiff(std::vector<Model>& models) {
    std::string dir = absl::GetFlag(FLAGS_worktree);
    if (dir.empty()) {
      const char* tmp = std::getenv("TMPDIR");
      dir = absl::StrFormat("%s/dk_review_base_%016x", tmp && *tmp ? tmp : "/tmp",
                            std::hash<std::string>()(root_));
    }
    std::error_code ec;
    if (fs::exists(dir, ec)) {
      return absl::FailedPreconditionError(absl::StrCat(
          dir,
          " already exists (another review running, or one that was killed?); if not in use, remove it: "
          "git worktree remove --force ",
          dir));
    }
    Progress(absl::StrCat("checking out ", base_arg_, " (", sha_.substr(0, 12), ") into the worktree ", dir));
    if (auto st = Git(root_, {"worktree", "add", "--detach", "--quiet", dir, sha_}); !st.ok()) {
      return st.status();
    }
    worktree_ = dir;
    if (dk::review::Interrupted()) return absl::CancelledError("interrupted");
    absl::Status st = BuildSide(InRepo(dir), "the base worktree", models, /*base=*/true);
    if (st.ok()) st = BuildSide(root_, "the working tree", models, /*base=*/false);
    if (!st.ok()) return st;
    for (Model& m : models) {
      if (m.base.elf.empty() || m.work.elf.empty()) {
        m.elf_diff =
            m.base.elf.empty() ? "(no final stage at the base)\n" : "(no final stage in the working tree)\n";
        continue;
      }
      auto a = dk::elf::ReadElfFile(m.base.elf);
      if (!a.ok()) return absl::DataLossError(absl::StrCat(m.base.elf, ": ", a.status().message()));
      auto b = dk::elf::ReadElfFile(m.work.elf);
      if (!b.ok()) return absl::DataLossError(absl::StrCat(m.work.elf, ": ", b.status().message()));
      m.elf_diff = dk::elf_dump::DiffPrograms(*a, *b, absl::StrCat("base ", m.base.chain.final_stage),
                                              absl::StrCat("working tree ", m.work.chain.final_stage));
    }
    RemoveWorktree();
    return absl::OkStatus();
  }

  // Stops the base worktree's Bazel server (of no further use; its output base stays
  // on disk, warm for the next review at the same --worktree path), then removes it.
  void RemoveWorktree() {
    if (worktree_.empty()) return;
    std::vector<std::string> shutdown = absl::StrSplit(absl::GetFlag(FLAGS_bazel), ' ', absl::SkipEmpty());
    shutdown.push_back("shutdown");
    (void)dk::review::Run(shutdown, InRepo(worktree_), kBazelRunEnv);
    Progress(absl::StrCat("removing the worktree ", worktree_));
    if (!Git(root_, {"worktree", "remove", "--force", worktree_}).ok()) {
      std::error_code ec;
      fs::remove_all(worktree_, ec);
      (void)Git(root_, {"worktree", "prune"});
    }
    worktree_.clear();
  }

  std::string ModelSection(const Model& m) {
    std::string out = absl::StrCat("\n## ", m.name, "\n\n### (a) chain\n\n");
    absl::StrAppend(&out, "base:         ", m.base.build ? ChainLine(m.base.chain) : "(no BUILD)", "\n");
    absl::StrAppend(&out, "working tree: ", m.work.build ? ChainLine(m.work.chain) : "(no BUILD)", "\n");
    for (const std::string& c : m.changes) absl::StrAppend(&out, c, "\n");

    absl::StrAppend(&out, "\n### (b) final stage ELF: base ",
                    m.base.chain.final_stage.empty() ? "(none)" : m.base.chain.final_stage,
                    " -> working tree ",
                    m.work.chain.final_stage.empty() ? "(none)" : m.work.chain.final_stage, "\n\n");
    if (absl::GetFlag(FLAGS_no_build)) {
      absl::StrAppend(&out, "skipped (--no_build)\n");
    } else {
      absl::StrAppend(&out, "```\n", m.elf_diff, absl::EndsWith(m.elf_diff, "\n") ? "" : "\n", "```\n");
    }

    absl::StrAppend(&out, "\n### (c) phase-5 record (", kRecord, "): base -> working tree\n\n");
    for (const auto* side : {&m.base, &m.work}) {
      const char* which = side == &m.base ? "base" : "working tree";
      if (!side->record_text) absl::StrAppend(&out, "note: no record in the ", which, "\n");
      if (!side->record_error.empty()) {
        absl::StrAppend(&out, "note: the ", which, " record is unreadable: ", side->record_error, "\n");
      }
    }
    if (m.base.record || m.work.record) {
      absl::StrAppend(&out, dk::review::SideBySide(m.base.record ? &*m.base.record : nullptr,
                                                   m.work.record ? &*m.work.record : nullptr));
    }
    StaleNote(m.base, "base", out);
    StaleNote(m.work, "working tree", out);
    return out;
  }

  std::string root_;    // the working tree's workspace
  std::string prefix_;  // root_ relative to the repository's top, "" or "dir/"
  std::string base_arg_;
  std::string sha_;
  std::string worktree_;  // the base checkout while it exists
};

}  // namespace

int main(int argc, char** argv) {
  constexpr char kUsage[] =
      "usage: review --base=REV [--no_build] [--bazel=CMD] [--worktree=DIR]\n"
      "  (./bazelw run //tools/review -- --base=origin/main)";
  absl::SetProgramUsageMessage(kUsage);
  const std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  if (args.size() != 1) {
    return dk::ExitWithError(
        "review", absl::InvalidArgumentError(absl::StrCat("unexpected argument '", args[1], "'\n", kUsage)),
        dk::kExitUsage);
  }
  if (absl::GetFlag(FLAGS_base).empty()) {
    return dk::ExitWithError(
        "review", absl::InvalidArgumentError(absl::StrCat("--base is required\n", kUsage)), dk::kExitUsage);
  }
  std::string root;
  if (const char* ws = std::getenv("BUILD_WORKSPACE_DIRECTORY"); ws != nullptr && *ws) {
    root = ws;
  } else {
    std::error_code ec;
    root = fs::current_path(ec).string();
  }
  dk::review::InstallInterruptHandler();  // so an interrupted review still removes its worktree
  absl::StatusOr<std::string> report;
  {
    Review review(root, absl::GetFlag(FLAGS_base));
    report = review.Report();
  }  // the base worktree is gone before anything is printed
  if (!report.ok()) return dk::ExitWithError("review", report.status());
  std::fwrite(report->data(), 1, report->size(), stdout);
  return dk::kExitOk;
}
