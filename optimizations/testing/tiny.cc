#include "optimizations/testing/tiny.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "elf/elf.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/message_differencer.h"
#include "graph/baseline.h"
#include "optimizations/passes.h"
#include "registry/registry.h"
#include "util/status.h"

namespace dk::opt::testing {

elf::ModelShape TinyShape(int n_layers) {
  elf::ModelShape m;
  m.set_name("tiny");
  m.set_n_layers(n_layers);
  m.set_hidden(64);
  m.set_n_heads(4);
  m.set_n_kv_heads(2);
  m.set_head_dim(16);
  m.set_ffn(96);
  m.set_vocab(300);
  m.set_rms_eps(1e-5f);
  m.set_rope_theta(10000);
  m.set_tied_embeddings(true);
  m.set_max_context(16);
  return m;
}

absl::StatusOr<bool> RunPass(const std::string& name, elf::Program& program,
                             const std::string& target_name, int64_t partition_rows) {
  DK_ASSIGN_OR_RETURN(const registry::TargetConstraints* target, registry::FindTarget(target_name));
  DK_ASSIGN_OR_RETURN(const Pass* pass, FindPass(name));
  // The one option the tiny tests set, for each pass that has it.
  std::vector<std::string> args;
  for (const OptionSpec& spec : pass->options) {
    if (spec.name == "lm_head_partition_rows") args.push_back(absl::StrCat(spec.name, "=", partition_rows));
  }
  DK_ASSIGN_OR_RETURN(const PassOptions options, ParseOptions(*pass, args));
  DK_ASSIGN_OR_RETURN(const elf::LineageEntry entry,
                      ApplyPass(*pass, program, *target, options, NoopPolicy::kAllow));
  return entry.applied();
}

absl::StatusOr<elf::Program> BuildChain(const elf::ModelShape& shape,
                                        const std::vector<std::string>& chain,
                                        const std::string& target, int64_t partition_rows) {
  DK_ASSIGN_OR_RETURN(elf::Program p, graph::BuildBaseline(shape));
  for (const std::string& pass : chain) {
    auto changed = RunPass(pass, p, target, partition_rows);
    if (!changed.ok()) {
      return absl::Status(changed.status().code(),
                          absl::StrCat(pass, " after [", absl::StrJoin(chain, ", "), "]: ",
                                       changed.status().message()));
    }
    if (auto s = elf::ValidateProgram(p); !s.ok()) {
      return absl::InternalError(absl::StrCat(pass, " produced an invalid program: ", s.message()));
    }
  }
  return p;
}

std::vector<GoldenCase> GoldenCases() {
  // Every pass of the table on the baseline ...
  std::vector<GoldenCase> cases;
  for (const Pass& pass : Passes()) cases.push_back({pass.name, "baseline", {pass.name}});
  // ... and after the passes the models' chain runs before it.
  cases.push_back({"buffer_object_reuse", "aligned", {"layout_alignment", "buffer_object_reuse"}});
  cases.push_back({"merge_multi_launch", "aligned_bo",
                   {"layout_alignment", "buffer_object_reuse", "merge_multi_launch"}});
  cases.push_back({"fuse_kernels", "opt",
                   {"layout_alignment", "buffer_object_reuse", "merge_multi_launch", "fuse_kernels"}});
  cases.push_back({"compress_weights", "fused",
                   {"layout_alignment", "buffer_object_reuse", "merge_multi_launch", "fuse_kernels",
                    "compress_weights"}});
  cases.push_back({"quantize_weights", "opt",
                   {"layout_alignment", "buffer_object_reuse", "merge_multi_launch", "quantize_weights"}});
  cases.push_back({"quantize_weights", "fused",
                   {"layout_alignment", "buffer_object_reuse", "merge_multi_launch", "fuse_kernels",
                    "quantize_weights"}});
  cases.push_back({"quantize_weights", "x12",
                   {"layout_alignment", "buffer_object_reuse", "merge_multi_launch", "fuse_kernels",
                    "compress_weights", "quantize_weights"}});
  return cases;
}

std::vector<GoldenCase> GoldenCasesOf(const std::string& pass) {
  std::vector<GoldenCase> out;
  for (GoldenCase& c : GoldenCases()) {
    if (c.pass == pass) out.push_back(std::move(c));
  }
  return out;
}

std::string GoldenPath(const GoldenCase& c) {
  return absl::StrCat("optimizations/", c.pass, "/testdata/", c.name, ".after.textproto");
}

absl::StatusOr<std::string> RenderGolden(const GoldenCase& c) {
  DK_ASSIGN_OR_RETURN(const elf::Program p, BuildChain(TinyShape(), c.chain));
  std::string text;
  if (!google::protobuf::TextFormat::PrintToString(p, &text)) {
    return absl::InternalError("TextFormat::PrintToString failed");
  }
  std::vector<std::string> before(c.chain.begin(), c.chain.end() - 1);
  before.insert(before.begin(), "baseline");
  return absl::StrCat(
      "# proto-file: elf/program.proto\n# proto-message: dk.elf.Program\n",
      "# The tiny model (optimizations/testing/tiny.h, target cpu) after ", c.pass, ";\n",
      "# before = ", absl::StrJoin(before, " -> "), ".\n",
      "# Generated: ./bazelw run //optimizations:update_goldens (review the diff).\n", text);
}

absl::Status CheckGolden(const GoldenCase& c) {
  const std::string path = GoldenPath(c);
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path, " (is it in the test's data?)"));
  std::stringstream file;
  file << in.rdbuf();
  DK_ASSIGN_OR_RETURN(const std::string want, RenderGolden(c));
  if (file.str() == want) return absl::OkStatus();
  const std::vector<std::string> a = absl::StrSplit(file.str(), '\n');
  const std::vector<std::string> b = absl::StrSplit(want, '\n');
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  return absl::FailedPreconditionError(absl::StrCat(
      path, " differs from the pass output at line ", i + 1, ":\n  golden: ",
      i < a.size() ? a[i] : "<end of file>", "\n  now:    ", i < b.size() ? b[i] : "<end of output>",
      "\nIf the change is intended: ./bazelw run //optimizations:update_goldens and review the diff."));
}

std::string ProgramDiff(const elf::Program& a, const elf::Program& b) {
  google::protobuf::util::MessageDifferencer differencer;
  std::string report;
  differencer.ReportDifferencesToString(&report);
  differencer.Compare(a, b);
  return report;
}

std::map<std::string, int> CategoryCounts(const elf::Program& program) {
  std::map<std::string, int> counts;
  for (const auto& bo : program.bos()) ++counts[elf::BoCategory_Name(bo.category())];
  return counts;
}

}  // namespace dk::opt::testing
