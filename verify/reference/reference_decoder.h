// The model on one page: a scalar reference forward pass of every architecture
// feature the ModelShape has (the five models: Llama 3.2, SmolLM2, Qwen2.5, Qwen3,
// Gemma 3), f64 math with bf16 rounding where HF's bf16 forward rounds (after every
// op that produces a bf16 tensor). Each feature is read from the shape, so a test can
// switch one off here alone.
//
// Independent of the code the verify gate checks: it reads the shape and the weights
// (elf/, weights/, util/ only), never kernels/, runtime/, graph/ or optimizations/,
// so goldens it records (reference_goldens.h, //tools/reference_goldens) fail a fault
// that every stage of a chain shares. Slow (one f64 dot product per weight per
// token): tiny models in tests, or a few prompts of a small model where HF
// transformers is not wanted.
//
//   verify::ReferenceDecoder ref(shape, weights);   // weights outlive ref
//   std::vector<double> logits;
//   for (uint32_t id : prompt_ids) logits = ref.Step(id);
//
// Thread-safety: one caller at a time per decoder.
#ifndef DK_VERIFY_REFERENCE_REFERENCE_DECODER_H_
#define DK_VERIFY_REFERENCE_REFERENCE_DECODER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "elf/program.pb.h"
#include "weights/weights.h"

namespace dk::verify {

class ReferenceDecoder {
 public:
  // `w` must hold every tensor weights::ExpectedTensors(m) lists, with its data.
  ReferenceDecoder(const elf::ModelShape& m, const weights::Weights& w);

  // Logits (f32, as HF's lm_head in bf16 then .float(): not rounded to bf16 here)
  // for the next token after `token` at the next position.
  std::vector<double> Step(uint32_t token);

  // Positions fed so far.
  int position() const { return pos_; }

 private:
  static double R(double x);
  const weights::Tensor& T(const std::string& name) const;
  double At(const std::string& name, int64_t i) const;
  bool Sliding(int l) const;
  std::vector<double> Attention(int l, const std::vector<double>& xn);
  double Act(double g) const;
  std::vector<double> Row(const std::string& name, int64_t row, int n) const;
  std::vector<double> Linear(const std::vector<double>& x, const std::string& name, bool round = true) const;
  std::vector<double> Projection(const std::vector<double>& x, const std::string& name) const;
  void NormInto(std::vector<double>& x, size_t at, size_t n, const std::string& name) const;
  std::vector<double> Norm(std::vector<double> x, const std::string& name) const;
  std::vector<double> HeadNorm(std::vector<double> x, const std::string& name) const;
  std::vector<double> Rope(std::vector<double> x, int heads, bool local) const;
  double Llama3Scaled(double inv) const;

  const elf::ModelShape m_;
  const weights::Weights& w_;
  int pos_ = 0;
  std::vector<std::vector<std::vector<double>>> k_, v_;  // [layer][pos][kv_dim]
};

}  // namespace dk::verify

#endif  // DK_VERIFY_REFERENCE_REFERENCE_DECODER_H_
