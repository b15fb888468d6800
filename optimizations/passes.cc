#include "optimizations/passes.h"

#include <algorithm>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "elf/elf.h"
#include "optimizations/buffer_object_reuse/buffer_object_reuse.h"
#include "optimizations/compress_weights/compress_weights.h"
#include "optimizations/fuse_kernels/fuse_kernels.h"
#include "optimizations/layout_alignment/layout_alignment.h"
#include "optimizations/merge_multi_launch/merge_multi_launch.h"
#include "optimizations/quantize_weights/quantize_weights.h"
#include "optimizations/speculative_decode/speculative_decode.h"
#include "util/check.h"
#include "util/status.h"

namespace dk::opt {

namespace {

// quantize_weights' keep: a weight class, or "default".
std::vector<std::string> KeepChoices() {
  std::vector<std::string> choices = quantize_weights::WeightClasses();
  choices.push_back(quantize_weights::kKeepDefault);
  return choices;
}

// One entry of the table per pass: name, doc, options, and the run function that
// turns the parsed options into the pass's own.
Pass LayoutAlignmentEntry() {
  return Pass{
      layout_alignment::kName,
      "GEMV weights packed once at load (packed_panel_v1), launches on the packed kernel; "
      "the LM head split into vocab partitions",
      {{"lm_head_partition_rows", OptionKind::kInt,
        absl::StrCat(layout_alignment::Options{}.lm_head_partition_rows),
        "Rows per LM-head partition (0: do not split); the target's GEMV row limit caps it."}},
      [](elf::Program& p, const registry::TargetConstraints& target, const PassOptions& o) {
        layout_alignment::Options options;
        options.lm_head_partition_rows = o.Int("lm_head_partition_rows");
        return layout_alignment::Run(p, target, options);
      },
  };
}

Pass BufferObjectReuseEntry() {
  return Pass{
      buffer_object_reuse::kName,
      "weights STATIC (written once at load), device-only values INTERMEDIATE; only host-made "
      "values written per run, only what the host reads read back",
      {},
      [](elf::Program& p, const registry::TargetConstraints& target, const PassOptions&) {
        return buffer_object_reuse::Run(p, target);
      },
  };
}

Pass MergeMultiLaunchEntry() {
  return Pass{
      merge_multi_launch::kName,
      "consecutive launches no host step separates become one launch group per layer "
      "(rms_gemv_rope, o_gemv_ffn) plus one for the LM head",
      {{"groups", OptionKind::kStringList, "", "The merges to make (rms_gemv_rope, o_gemv_ffn, lm_head); empty: all.",
        {"rms_gemv_rope", "o_gemv_ffn", "lm_head"}}},
      [](elf::Program& p, const registry::TargetConstraints& target, const PassOptions& o) {
        merge_multi_launch::Options options;
        const std::vector<std::string>& groups = o.StringList("groups");
        options.groups.insert(groups.begin(), groups.end());
        return merge_multi_launch::Run(p, target, options);
      },
  };
}

Pass FuseKernelsEntry() {
  return Pass{
      fuse_kernels::kName,
      "inside each launch group a GEMV and its neighbours become one fused launch (RMSNorm + "
      "q/k/v, RMSNorm + gate/up + SiLU*mul, GEMV + residual add); bit-identical to the parent",
      {{"fusions", OptionKind::kStringList, "",
        "The fusions to make (rms_gemv, rms_gemv_silu_mul, gemv_add); empty: all.", fuse_kernels::Fusions()}},
      [](elf::Program& p, const registry::TargetConstraints& target, const PassOptions& o) {
        fuse_kernels::Options options;
        const std::vector<std::string>& fusions = o.StringList("fusions");
        options.fusions.insert(fusions.begin(), fusions.end());
        return fuse_kernels::Run(p, target, options);
      },
  };
}

Pass CompressWeightsEntry() {
  return Pass{
      compress_weights::kName,
      "bf16 GEMV weights stored in 12 bits each at load (packed_panel_x12_v1: lossless, rebuilt bit "
      "for bit while streaming), launches on the x12 kernels; bit-identical to the parent",
      {},
      [](elf::Program& p, const registry::TargetConstraints& target, const PassOptions&) {
        return compress_weights::Run(p, target);
      },
  };
}

Pass QuantizeWeightsEntry() {
  return Pass{
      quantize_weights::kName,
      "GEMV weights in GGUF blocks (quantized at load to Q8_0 or Q4_0, or the GGUF's own "
      "blocks as stored), launches on the quantized kernel; changes numerics (gated "
      "against the bf16 goldens)",
      {{"scheme", OptionKind::kString, quantize_weights::Options{}.scheme,
        "The block format (q8_0, q4_0); or gguf: each weight in the block format the GGUF file "
        "(the rule's weights, elf_opt's --weights) stores it in, one stored as floats staying bf16.",
        quantize_weights::Schemes()},
       {"keep", OptionKind::kStringList, quantize_weights::kKeepDefault,
        "The GEMV weight classes that stay bf16 (q_proj, k_proj, v_proj, o_proj, gate_proj, "
        "up_proj, down_proj, lm_head); empty: none. default (the default): lm_head for q8_0 / "
        "q4_0, nothing for gguf. The embedding table and the norm weights are never quantized.",
        KeepChoices()},
       {"stored", OptionKind::kStringList, "",
        "Scheme gguf: tensor=ggml type for every tensor of the file (elf_opt --weights fills it).", {}}},
      [](elf::Program& p, const registry::TargetConstraints& target, const PassOptions& o) {
        quantize_weights::Options options;
        options.scheme = o.String("scheme");
        const std::vector<std::string>& keep = o.StringList("keep");
        options.keep = std::set<std::string>(keep.begin(), keep.end());
        options.stored = o.StringList("stored");
        return quantize_weights::Run(p, target, options);
      },
  };
}

Pass SpeculativeDecodeEntry() {
  return Pass{
      speculative_decode::kName,
      "greedy decode drafts tokens by prompt lookup (no second model) and checks them in one run of "
      "max_draft + 1 token rows; the tokens stay the parent's",
      {{"draft", OptionKind::kString, speculative_decode::Options{}.draft, "How drafts are made: prompt_lookup.",
        {speculative_decode::Options{}.draft}},
       {"max_draft", OptionKind::kInt, absl::StrCat(speculative_decode::Options{}.max_draft),
        absl::StrCat("Drafted tokens per check, 1..", elf::kMaxDraft, "."), {}, 1, elf::kMaxDraft},
       {"max_ngram", OptionKind::kInt, absl::StrCat(speculative_decode::Options{}.max_ngram),
        absl::StrCat("The longest n-gram looked up, ", elf::kMinDraftNgram, "..", elf::kMaxNgram,
                     "; a match of n tokens drafts at most 2^(n - 2), so max_draft needs "
                     "2^(max_ngram - 2) >= max_draft."),
        {}, elf::kMinDraftNgram, elf::kMaxNgram}},
      [](elf::Program& p, const registry::TargetConstraints& target, const PassOptions& o) {
        speculative_decode::Options options;
        options.draft = o.String("draft");
        options.max_draft = static_cast<int>(o.Int("max_draft"));
        options.max_ngram = static_cast<int>(o.Int("max_ngram"));
        return speculative_decode::Run(p, target, options);
      },
  };
}

}  // namespace

const std::vector<Pass>& Passes() {
  static const std::vector<Pass>* const passes = new std::vector<Pass>{
      LayoutAlignmentEntry(),
      BufferObjectReuseEntry(),
      MergeMultiLaunchEntry(),
      FuseKernelsEntry(),
      CompressWeightsEntry(),
      QuantizeWeightsEntry(),
      SpeculativeDecodeEntry(),
  };
  return *passes;
}

int64_t PassOptions::Int(const std::string& name) const {
  const auto it = ints_.find(name);
  DK_CHECK(it != ints_.end());
  return it->second;
}

const std::vector<std::string>& PassOptions::StringList(const std::string& name) const {
  const auto it = string_lists_.find(name);
  DK_CHECK(it != string_lists_.end());
  return it->second;
}

const std::string& PassOptions::String(const std::string& name) const {
  const auto it = strings_.find(name);
  DK_CHECK(it != strings_.end());
  return it->second;
}

absl::StatusOr<const Pass*> FindPass(absl::string_view name) {
  std::vector<std::string> known;
  for (const Pass& pass : Passes()) {
    if (pass.name == name) return &pass;
    known.push_back(pass.name);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown pass '", name, "' (known: ", absl::StrJoin(known, ", "), ")"));
}

namespace {

const char* KindName(OptionKind kind) {
  switch (kind) {
    case OptionKind::kInt: return "int";
    case OptionKind::kStringList: return "string list";
    case OptionKind::kString: return "string";
  }
  return "?";
}

// Parses `text` as option `spec`'s value into `options`.
absl::Status SetOption(const Pass& pass, const OptionSpec& spec, absl::string_view text,
                       std::map<std::string, int64_t>& ints,
                       std::map<std::string, std::vector<std::string>>& string_lists,
                       std::map<std::string, std::string>& strings) {
  const std::string what = absl::StrCat(pass.name, " option ", spec.name);
  switch (spec.kind) {
    case OptionKind::kInt: {
      int64_t v = 0;
      if (!absl::SimpleAtoi(text, &v)) {
        return absl::InvalidArgumentError(absl::StrCat(what, ": '", text, "' is not an integer"));
      }
      if (v < spec.min || v > spec.max) {
        return absl::InvalidArgumentError(absl::StrCat(what, ": ", v, " is outside [", spec.min, ", ", spec.max, "]"));
      }
      ints[spec.name] = v;
      return absl::OkStatus();
    }
    case OptionKind::kStringList: {
      std::vector<std::string> items = absl::StrSplit(text, ',', absl::SkipEmpty());
      for (const std::string& item : items) {
        if (!spec.choices.empty() &&
            std::find(spec.choices.begin(), spec.choices.end(), item) == spec.choices.end()) {
          return absl::InvalidArgumentError(absl::StrCat(what, ": '", item, "' is not one of ",
                                                         absl::StrJoin(spec.choices, ", ")));
        }
      }
      string_lists[spec.name] = std::move(items);
      return absl::OkStatus();
    }
    case OptionKind::kString: {
      if (!spec.choices.empty() &&
          std::find(spec.choices.begin(), spec.choices.end(), text) == spec.choices.end()) {
        return absl::InvalidArgumentError(absl::StrCat(what, ": '", text, "' is not one of ",
                                                       absl::StrJoin(spec.choices, ", ")));
      }
      strings[spec.name] = std::string(text);
      return absl::OkStatus();
    }
  }
  return absl::InternalError(absl::StrCat(what, ": unhandled kind"));
}

const OptionSpec* FindOption(const Pass& pass, absl::string_view key) {
  for (const OptionSpec& spec : pass.options) {
    if (spec.name == key) return &spec;
  }
  return nullptr;
}

absl::Status UnknownOption(const Pass& pass, absl::string_view key) {
  std::vector<std::string> names;
  for (const OptionSpec& spec : pass.options) names.push_back(spec.name);
  return absl::InvalidArgumentError(absl::StrCat(
      pass.name, " has no option '", key, "' (",
      names.empty() ? "it takes none" : absl::StrCat("its options: ", absl::StrJoin(names, ", ")), ")"));
}

}  // namespace

absl::StatusOr<PassOptions> ParseOptions(const Pass& pass, absl::Span<const std::string> args) {
  PassOptions options;
  for (const OptionSpec& spec : pass.options) {
    DK_RETURN_IF_ERROR(SetOption(pass, spec, spec.default_value, options.ints_, options.string_lists_,
                                 options.strings_));
  }
  std::set<std::string> given;
  for (const std::string& arg : args) {
    const size_t eq = arg.find('=');
    if (eq == std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat(pass.name, ": option '", arg, "' is not key=value"));
    }
    const std::string key = arg.substr(0, eq);
    const OptionSpec* spec = FindOption(pass, key);
    if (spec == nullptr) return UnknownOption(pass, key);
    if (!given.insert(key).second) {
      return absl::InvalidArgumentError(absl::StrCat(pass.name, " option ", key, " given twice"));
    }
    DK_RETURN_IF_ERROR(
        SetOption(pass, *spec, absl::string_view(arg).substr(eq + 1), options.ints_, options.string_lists_,
                  options.strings_));
  }
  return options;
}

absl::StatusOr<elf::LineageEntry> ApplyPass(const Pass& pass, elf::Program& program,
                                            const registry::TargetConstraints& target,
                                            const PassOptions& options, NoopPolicy noop) {
  DK_ASSIGN_OR_RETURN(PassResult result, pass.run(program, target, options));
  elf::LineageEntry& entry = *program.add_lineage();
  entry.set_pass(pass.name);
  entry.set_target(target.name());
  entry.set_applied(result.changed);
  entry.set_reason(std::move(result.summary));
  if (!result.changed && noop == NoopPolicy::kFail) {
    return absl::FailedPreconditionError(absl::StrCat(
        "changed nothing (", entry.reason(),
        "). An inert stage must not hide in the chain: remove it from BUILD, or set allow_noop = True"));
  }
  return entry;
}

absl::StatusOr<bool> RunPass(absl::string_view name, elf::Program& program,
                             const registry::TargetConstraints& target, absl::Span<const std::string> args) {
  DK_ASSIGN_OR_RETURN(const Pass* pass, FindPass(name));
  DK_ASSIGN_OR_RETURN(const PassOptions options, ParseOptions(*pass, args));
  DK_ASSIGN_OR_RETURN(const elf::LineageEntry entry, ApplyPass(*pass, program, target, options, NoopPolicy::kAllow));
  return entry.applied();
}

std::string DescribePasses() {
  std::string out;
  for (const Pass& pass : Passes()) {
    absl::StrAppend(&out, "  ", pass.name, ": ", pass.doc, "\n");
    for (const OptionSpec& spec : pass.options) {
      absl::StrAppend(&out, "      ", spec.name, "=<", KindName(spec.kind), "> (default '",
                      spec.default_value, "'", spec.choices.empty() ? "" : "; items: ",
                      absl::StrJoin(spec.choices, ", "), "): ", spec.doc, "\n");
    }
  }
  return out;
}

}  // namespace dk::opt
