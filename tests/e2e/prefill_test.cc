// The batched prefill (Decoder::Feed with prefill rows > 1) against feeding the same
// tokens one at a time, on every stage of SmolLM2's chain and on Gemma 3's trained
// GGUF: the logits after the prompt, the top-k and the greedy tokens after it must be
// bit-identical, whatever the chunk (a chunk that does not divide the prompt, a
// prompt fed in two calls, Gemma's prompt past its 512-position sliding window).
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "elf/elf.h"
#include "gtest/gtest.h"
#include "runtime/cpu/session.h"
#include "runtime/greedy.h"
#include "tests/e2e/stage_model.h"

namespace dk {
namespace {

// Deterministic ids spread over the vocabulary, with repeats (as text has).
std::vector<uint32_t> Prompt(int n, int vocab) {
  std::vector<uint32_t> ids;
  for (int i = 0; i < n; ++i) ids.push_back(static_cast<uint32_t>((i % 13) * 7919 + (i / 13) * 104729) % vocab);
  return ids;
}

using Model = e2e::StageModel;

std::unique_ptr<runtime::CpuSession> Open(const Model& m, int rows) {
  runtime::SessionOptions options;
  options.validate = true;
  options.prefill_rows = rows;
  auto s = runtime::CpuSession::Open(m.program, "test.elf", m.weights, options);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *std::move(s) : nullptr;
}

void ExpectSameLogits(runtime::Decoder& a, runtime::Decoder& b, const std::string& where) {
  const int vocab = a.program().model().vocab();
  ASSERT_EQ(std::memcmp(a.logits(), b.logits(), vocab * sizeof(float)), 0) << where << ": logits differ";
  EXPECT_EQ(a.last().top_ids, b.last().top_ids) << where;
}

// Token by token in `one`, in chunks of `rows` in `many` (split in two Feed calls
// at `split`), then `decode` greedy tokens each.
void ExpectSame(const Model& m, int rows, int prompt_len, int split, int decode) {
  auto one = Open(m, 1), many = Open(m, rows);
  ASSERT_NE(one, nullptr);
  ASSERT_NE(many, nullptr);
  const std::vector<uint32_t> prompt = Prompt(prompt_len, m.program.model().vocab());
  for (uint32_t t : prompt) ASSERT_TRUE(one->decoder().Advance(t).ok());
  const absl::Span<const uint32_t> all(prompt);
  ASSERT_TRUE(many->decoder().Feed(all.subspan(0, split)).ok());
  ASSERT_TRUE(many->decoder().Feed(all.subspan(split)).ok());
  EXPECT_EQ(many->decoder().position(), prompt_len);
  ExpectSameLogits(one->decoder(), many->decoder(), "after the prompt");
  for (int i = 0; i < decode; ++i) {
    ASSERT_TRUE(one->decoder().Advance(one->decoder().last().token).ok());
    ASSERT_TRUE(many->decoder().Advance(many->decoder().last().token).ok());
    ExpectSameLogits(one->decoder(), many->decoder(), "decode step " + std::to_string(i));
  }
}

class Smollm2Stages : public ::testing::TestWithParam<const char*> {};

TEST_P(Smollm2Stages, ChunkedPromptEqualsTokenByToken) {
  const Model m = e2e::LoadStage(std::string("decodekit/models/smollm2_135m/") + GetParam() + ".elf", "smollm2_135m/model.gguf");
  ASSERT_NE(m.weights, nullptr);
  if (absl::StartsWith(GetParam(), "npu2")) {
    // npu2 runs a chunk as GEMMs over whole tiles of 64 rows: chunks of 64, a short last one.
    ExpectSame(m, /*rows=*/64, /*prompt_len=*/150, /*split=*/70, /*decode=*/2);
  } else {
    ExpectSame(m, /*rows=*/7, /*prompt_len=*/40, /*split=*/11, /*decode=*/3);
  }
}

INSTANTIATE_TEST_SUITE_P(Chain, Smollm2Stages,
                         ::testing::Values("decode", "decode_aligned", "decode_bo", "decode_opt", "decode_fused",
                                           "decode_x12", "decode_q8", "decode_gguf", "npu2_opt"));

TEST(Gemma3, ChunkedPromptPastTheSlidingWindowEqualsTokenByToken) {
  const Model m = e2e::LoadStage("decodekit/models/gemma3_270m/decode_gguf.elf", "gemma3_270m/model.gguf");
  ASSERT_NE(m.weights, nullptr);
  ASSERT_EQ(m.program.model().sliding_window(), 512);
  ExpectSame(m, /*rows=*/128, /*prompt_len=*/530, /*split=*/300, /*decode=*/2);
}

TEST(Prefill, BadChunkAndTooLongPromptAreClearErrors) {
  const Model m = e2e::LoadStage("decodekit/models/smollm2_135m/decode_x12.elf", "smollm2_135m/model.gguf");
  ASSERT_NE(m.weights, nullptr);
  runtime::SessionOptions options;
  options.prefill_rows = -1;
  auto negative = runtime::CpuSession::Open(m.program, "test.elf", m.weights, options);
  ASSERT_FALSE(negative.ok());
  EXPECT_NE(negative.status().message().find("prefill rows (the prompt chunk) must be in [1, 2048] (the context), not -1"),
            std::string::npos)
      << negative.status();
  options.prefill_rows = 0;  // the default: 512, or a shorter context
  options.max_context = 32;
  auto fits = runtime::CpuSession::Open(m.program, "test.elf", m.weights, options);
  ASSERT_TRUE(fits.ok()) << fits.status();
  EXPECT_EQ((*fits)->decoder().prefill_rows(), 32);
  options.prefill_rows = 64;
  auto big = runtime::CpuSession::Open(m.program, "test.elf", m.weights, options);
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find("must be in [1, 32] (the context), not 64"), std::string::npos)
      << big.status();

  options.prefill_rows = 8;
  options.max_context = 16;
  auto s = runtime::CpuSession::Open(m.program, "test.elf", m.weights, options);
  ASSERT_TRUE(s.ok()) << s.status();
  const std::vector<uint32_t> prompt = Prompt(20, m.program.model().vocab());
  const absl::Status status = runtime::FeedPrompt((*s)->decoder(), prompt);
  EXPECT_EQ(status.code(), absl::StatusCode::kOutOfRange);
  EXPECT_NE(status.message().find("a prompt of 20 tokens does not fit the context of 16 positions"),
            std::string::npos)
      << status;
  ASSERT_TRUE(runtime::FeedPrompt((*s)->decoder(), absl::Span<const uint32_t>(prompt).subspan(0, 10)).ok());
  const absl::Status more = (*s)->decoder().Feed(absl::Span<const uint32_t>(prompt).subspan(0, 7));
  EXPECT_NE(more.message().find("a prompt of 7 tokens after 10 others does not fit the context of 16"),
            std::string::npos)
      << more;
}

}  // namespace
}  // namespace dk
