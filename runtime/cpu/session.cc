#include "runtime/cpu/session.h"

#include <cstdlib>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "runtime/cpu/cpu_device.h"
#include "util/status.h"

namespace dk::runtime {

absl::StatusOr<std::shared_ptr<const weights::Weights>> LoadWeightsSpec(
    const std::string& spec, const elf::ModelShape& model) {
  if (spec == "synthetic" || absl::StartsWith(spec, "synthetic:")) {
    uint64_t seed = 1;
    if (spec.size() > 10 && !absl::SimpleAtoi(spec.substr(10), &seed)) {
      return absl::InvalidArgumentError(absl::StrCat("bad seed in weights spec '", spec, "'"));
    }
    DK_ASSIGN_OR_RETURN(weights::Weights w, weights::MakeSyntheticWeights(model, seed));
    return std::make_shared<const weights::Weights>(std::move(w));
  }
  DK_ASSIGN_OR_RETURN(weights::Weights w, weights::LoadWeights(spec));
  return std::make_shared<const weights::Weights>(std::move(w));
}

absl::StatusOr<std::unique_ptr<CpuSession>> CpuSession::Open(
    const elf::Program& program, const std::string& elf_name,
    std::shared_ptr<const weights::Weights> weights, const SessionOptions& options) {
  std::unique_ptr<CpuSession> s(new CpuSession());
  s->weights_ = std::move(weights);
  s->device_ = MakeCpuDevice(DeviceOptions{options.validate}, options.pool);
  const weights::Tensor* embed = s->weights_->Find("model.embed_tokens.weight");
  if (embed == nullptr) {
    return absl::NotFoundError(absl::StrCat("weights ", s->weights_->source(),
                                            " have no model.embed_tokens.weight"));
  }
  CpuHostOptions host_options;
  host_options.max_context = options.max_context;
  host_options.pool = options.pool;
  DK_ASSIGN_OR_RETURN(s->host_, MakeCpuHostOps(program.model(), embed->data.data(), host_options));
  if (options.wrap_host) s->host_ = options.wrap_host(std::move(s->host_), program.model());
  Decoder::Options decoder_options;
  decoder_options.validate = options.validate;
  DK_ASSIGN_OR_RETURN(s->decoder_, Decoder::Create(program, elf_name, *s->weights_, s->device_.get(),
                                                   s->host_.get(), decoder_options));
  return s;
}

}  // namespace dk::runtime
