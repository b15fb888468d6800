// Batched decode (Decoder::StepBatch) against each sequence stepped alone, on the
// trained GGUFs of SmolLM2-135M (Q4_1 / Q8_0) and Gemma 3 270M (Q5_0 / Q4_K / Q6_K /
// Q8_0) through decode_gguf (the quantized multi-row GEMMs): 1, 3 and 8 sequences of different prompt lengths,
// joining at different steps, their prompts fed a few rows a step beside the other
// sequences' decode rows, leaving when done (and, with 8 slots, two more sequences
// taking the slots of those that left). Every sequence's greedy tokens, top-k and
// logits after each token must be bit-identical to its run alone.
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "elf/elf.h"
#include "gtest/gtest.h"
#include "runtime/cpu/session.h"
#include "tests/e2e/stage_model.h"

namespace dk {
namespace {

constexpr int kContext = 256;

using Model = e2e::StageModel;

std::unique_ptr<runtime::CpuSession> Open(const Model& m, int sequences, int batch_rows) {
  runtime::SessionOptions options;
  options.max_context = kContext;
  options.sequences = sequences;
  options.batch_rows = batch_rows;
  auto s = runtime::CpuSession::Open(m.program, "test.elf", m.weights, options);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *std::move(s) : nullptr;
}

// One sequence of the test: its prompt, when it joins, how many tokens it generates,
// how many prompt rows it feeds per step.
struct Sequence {
  std::vector<uint32_t> prompt;
  int join_step = 0;
  int new_tokens = 0;
  int prompt_rows = 1;
};

// What a sequence's steps gave: after its prompt and after each generated token, the
// top-k and the logits.
struct Trace {
  std::vector<std::vector<uint32_t>> top_ids;
  std::vector<std::vector<float>> logits;
};

std::vector<uint32_t> Prompt(int n, int salt, int vocab) {
  std::vector<uint32_t> ids;
  for (int i = 0; i < n; ++i) ids.push_back(static_cast<uint32_t>((i * 7919 + salt * 104729 + 17) % vocab));
  return ids;
}

std::vector<float> Logits(const float* p, int vocab) { return std::vector<float>(p, p + vocab); }

// Alone: the prompt fed (the prefill path), then greedy decode one token a step.
Trace Alone(runtime::Decoder& d, const Sequence& s) {
  const int vocab = d.program().model().vocab();
  Trace t;
  d.Reset();
  EXPECT_TRUE(d.Feed(s.prompt).ok());
  for (int i = 0; i < s.new_tokens; ++i) {
    t.top_ids.push_back(d.last().top_ids);
    t.logits.push_back(Logits(d.logits(), vocab));
    if (i + 1 < s.new_tokens) EXPECT_TRUE(d.Advance(d.last().token).ok());
  }
  return t;
}

// Batched: every step takes each active sequence's next rows (prompt_rows of its
// prompt, or its last token), in a slot (KV cache) it holds from joining to leaving.
std::vector<Trace> Batched(runtime::Decoder& d, const std::vector<Sequence>& seqs, int* max_rows) {
  const int vocab = d.program().model().vocab();
  struct State {
    int slot = -1;
    int fed = 0;  // prompt tokens fed
    uint32_t next = 0;
    bool done = false;
  };
  std::vector<State> st(seqs.size());
  std::vector<Trace> traces(seqs.size());
  std::vector<bool> slot_used(d.sequences(), false);
  *max_rows = 0;
  for (int step = 0; step < 1000; ++step) {
    std::vector<runtime::BatchRow> rows;
    std::vector<std::pair<int, int>> ends;  // (sequence, its last row) of sequences that produce a token
    bool any = false;
    for (size_t j = 0; j < seqs.size(); ++j) {
      State& s = st[j];
      if (s.done || seqs[j].join_step > step) {
        any |= !s.done;
        continue;
      }
      any = true;
      if (s.slot < 0) {
        for (int k = 0; k < d.sequences() && s.slot < 0; ++k) {
          if (!slot_used[k]) s.slot = k;
        }
        if (s.slot < 0) continue;  // every slot taken: wait for one to leave
        slot_used[s.slot] = true;
      }
      const int len = static_cast<int>(seqs[j].prompt.size());
      if (s.fed < len) {
        const int n = std::min(seqs[j].prompt_rows, len - s.fed);
        for (int i = 0; i < n; ++i) rows.push_back({seqs[j].prompt[s.fed + i], s.slot, s.fed + i});
        s.fed += n;
        if (s.fed == len) ends.push_back({static_cast<int>(j), static_cast<int>(rows.size()) - 1});
      } else {
        const int position = len + static_cast<int>(traces[j].top_ids.size()) - 1;
        rows.push_back({s.next, s.slot, position});
        ends.push_back({static_cast<int>(j), static_cast<int>(rows.size()) - 1});
      }
    }
    if (!any) break;
    if (rows.empty()) continue;
    *max_rows = std::max(*max_rows, static_cast<int>(rows.size()));
    const absl::Status s = d.StepBatch(rows);
    EXPECT_TRUE(s.ok()) << s;
    if (!s.ok()) break;
    for (const auto& [j, row] : ends) {
      runtime::StepResult r;
      EXPECT_TRUE(d.ReadRow(row, &r).ok());
      traces[j].top_ids.push_back(r.top_ids);
      traces[j].logits.push_back(Logits(d.row_logits(row), vocab));
      st[j].next = r.token;
      if (static_cast<int>(traces[j].top_ids.size()) == seqs[j].new_tokens) {
        st[j].done = true;
        slot_used[st[j].slot] = false;
      }
    }
  }
  return traces;
}

void ExpectBatchedEqualsAlone(const std::string& elf, int slots, const std::vector<Sequence>& seqs) {
  const bool gemma = elf.find("gemma3") != std::string::npos;
  const Model m = e2e::LoadStage(elf, gemma ? "gemma3_270m/model.gguf" : "smollm2_135m/model.gguf");
  ASSERT_NE(m.weights, nullptr);
  const int vocab = m.program.model().vocab();
  auto alone = Open(m, 1, 1);
  auto batched = Open(m, slots, 16);
  ASSERT_NE(alone, nullptr);
  ASSERT_NE(batched, nullptr);
  int max_rows = 0;
  const std::vector<Trace> got = Batched(batched->decoder(), seqs, &max_rows);
  EXPECT_GE(max_rows, std::min<int>(slots, 2)) << "the steps never batched";
  for (size_t j = 0; j < seqs.size(); ++j) {
    const Trace want = Alone(alone->decoder(), seqs[j]);
    ASSERT_EQ(got[j].top_ids.size(), want.top_ids.size()) << "sequence " << j;
    for (size_t i = 0; i < want.top_ids.size(); ++i) {
      const std::string where = absl::StrCat(elf, ", sequence ", j, ", token ", i);
      EXPECT_EQ(got[j].top_ids[i], want.top_ids[i]) << where;
      EXPECT_EQ(std::memcmp(got[j].logits[i].data(), want.logits[i].data(), vocab * sizeof(float)), 0)
          << where << ": logits differ";
    }
  }
}

std::vector<Sequence> Sequences(int n, int vocab) {
  std::vector<Sequence> seqs;
  for (int j = 0; j < n; ++j) {
    Sequence s;
    s.prompt = Prompt(3 + 5 * j % 17, j, vocab);  // 3 to 19 tokens
    s.join_step = (j * 3) % 7;
    s.new_tokens = 4 + (j * 5) % 9;
    s.prompt_rows = 1 + j % 4;
    seqs.push_back(s);
  }
  return seqs;
}

constexpr int kVocab = 49152;        // SmolLM2's
constexpr int kGemmaVocab = 262144;  // Gemma 3's

TEST(BatchTest, OneSequence) {
  ExpectBatchedEqualsAlone("decodekit/models/smollm2_135m/decode_gguf.elf", 1, Sequences(1, kVocab));
}

TEST(BatchTest, ThreeSequences) {
  ExpectBatchedEqualsAlone("decodekit/models/smollm2_135m/decode_gguf.elf", 3, Sequences(3, kVocab));
}

// Ten sequences over eight slots: the last two join once others have left.
TEST(BatchTest, EightSlotsTenSequences) {
  ExpectBatchedEqualsAlone("decodekit/models/smollm2_135m/decode_gguf.elf", 8, Sequences(10, kVocab));
}

// Gemma 3's GGUF: other block formats (Q5_0, Q4_K, Q6_K, Q8_0), QK-norm, sliding layers
// (three sequences: its 262144-entry vocabulary makes each step's tail the costly part).
TEST(BatchTest, ThreeSequencesGemma3) {
  ExpectBatchedEqualsAlone("decodekit/models/gemma3_270m/decode_gguf.elf", 3, Sequences(3, kGemmaVocab));
}

TEST(BatchTest, RefusesBadRows) {
  const Model m = e2e::LoadStage("decodekit/models/smollm2_135m/decode_gguf.elf", "smollm2_135m/model.gguf");
  ASSERT_NE(m.weights, nullptr);
  auto s = Open(m, 2, 4);
  ASSERT_NE(s, nullptr);
  runtime::Decoder& d = s->decoder();
  const std::vector<runtime::BatchRow> too_many(5, runtime::BatchRow{1, 0, 0});
  EXPECT_NE(d.StepBatch(too_many).message().find("the decoder takes 1 to 4"), std::string::npos);
  EXPECT_NE(d.StepBatch({{1, 2, 0}}).message().find("sequence 2: the decoder holds 2"), std::string::npos);
  EXPECT_EQ(d.StepBatch({{1, 0, kContext}}).code(), absl::StatusCode::kOutOfRange);
  EXPECT_TRUE(d.StepBatch({}).message().find("0 rows") != std::string::npos);
}

}  // namespace
}  // namespace dk
