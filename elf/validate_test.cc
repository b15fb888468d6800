// Validation of programs (elf/validate.cc): every rule the runtime relies on is
// refused by ValidateProgram, naming what is wrong.
#include <cstdint>
#include <functional>
#include <string>

#include "absl/strings/str_cat.h"
#include "elf/elf.h"
#include "elf/toy_program.h"
#include "gtest/gtest.h"

namespace dk::elf {
namespace {

TEST(Elf, DanglingReferencesAndSizeMismatches) {
  Program p = ToyProgram();
  p.mutable_steps(0)->mutable_group()->mutable_launches(0)->mutable_bindings(1)->set_bo("nope");
  auto s = ValidateProgram(p);
  EXPECT_NE(s.message().find("unknown BO \"nope\""), std::string::npos) << s;
  EXPECT_FALSE(WriteElf(p).ok());

  p = ToyProgram();
  p.mutable_steps(2)->mutable_group()->mutable_launches(0)->set_kernel_symbol("dk_gemv_magic");
  s = ValidateProgram(p);
  EXPECT_NE(s.message().find("unknown kernel symbol \"dk_gemv_magic\""), std::string::npos) << s;

  p = ToyProgram();
  p.mutable_bos(3)->set_size_bytes(8190);
  s = ValidateProgram(p);
  EXPECT_NE(s.message().find("\"q.w\" size_bytes 8190 does not match"), std::string::npos) << s;

  p = ToyProgram();
  p.mutable_bos(4)->set_layout("zigzag");
  s = ValidateProgram(p);
  EXPECT_NE(s.message().find("unknown layout"), std::string::npos) << s;

  p = ToyProgram();
  p.mutable_steps(1)->mutable_host()->mutable_bindings(0)->set_value("ghost");
  s = ValidateProgram(p);
  EXPECT_NE(s.message().find("host step 1 (attention)"), std::string::npos) << s;
  EXPECT_NE(s.message().find("unknown host value \"ghost\""), std::string::npos) << s;

  p = ToyProgram();
  p.mutable_bos(0)->set_host_value("nowhere");
  s = ValidateProgram(p);
  EXPECT_NE(s.message().find("mirrors unknown host value \"nowhere\""), std::string::npos) << s;

  p = ToyProgram();
  *p.add_bos() = p.bos(0);
  s = ValidateProgram(p);
  EXPECT_NE(s.message().find("duplicate BO name \"x\""), std::string::npos) << s;
}

// Issue 15: integer fields out of range reached memory in the decoder.
TEST(Elf, NegativeHostOffsetIsRefused) {
  Program p = ToyProgram();
  p.mutable_bos(0)->set_host_offset(-1000000);
  ExpectInvalid(p, "BO \"x\" (64 elements) at host_offset -1000000 does not lie inside host value \"h\"");
  p.mutable_bos(0)->set_host_offset(1);  // 64 elements from 1 run past the 64 of "h"
  ExpectInvalid(p, "at host_offset 1 does not lie inside");
  p = ToyProgram();
  p.mutable_bos(3)->set_host_offset(4);  // no host value to be an offset into
  ExpectInvalid(p, "BO \"q.w\" has host_offset 4 but no host_value");
}

TEST(Elf, HostValueDtypeMustMatchItsBo) {
  Program p = ToyProgram();
  p.mutable_values(0)->set_dtype(F32);
  ExpectInvalid(p, "BO \"x\" is BF16 but mirrors host value \"h\" of dtype F32");
}

TEST(Elf, WeightRowRangesMustBeNonNegative) {
  Program p = ToyProgram();
  // A negative start with end 0 ("all rows") was not checked at all.
  p.mutable_bos(1)->set_weight_row_begin(-64);
  ExpectInvalid(p, "BO \"norm.w\" has an empty or negative weight row range [weight_row_begin -64");
  p.mutable_bos(1)->set_weight_row_begin(-64);
  p.mutable_bos(1)->set_weight_row_end(-1);
  ExpectInvalid(p, "negative weight row range");
  p = ToyProgram();
  p.mutable_bos(1)->set_weight_row_begin(10);
  p.mutable_bos(1)->set_weight_row_end(20);  // 10 rows, the BO has 64
  ExpectInvalid(p, "BO \"norm.w\" weight rows [10, 20) are 10 rows but the BO has 64");
  p.mutable_bos(1)->set_weight_row_end(74);
  EXPECT_TRUE(ValidateProgram(p).ok()) << ValidateProgram(p);
  p = ToyProgram();
  p.mutable_bos(3)->set_weight_row_end(64);  // rows of no tensor
  ExpectInvalid(p, "BO \"q.w\" has a weight row range [0, 64) but no weight_tensor");
}

TEST(Elf, ModelDimensionsHaveLimits) {
  for (const char* field : {"vocab", "n_layers", "hidden", "ffn", "max_context", "n_heads"}) {
    Program p = ToyProgram();
    const auto* f = p.model().GetDescriptor()->FindFieldByName(field);
    ASSERT_NE(f, nullptr) << field;
    p.mutable_model()->GetReflection()->SetInt32(p.mutable_model(), f, 2147483647);
    ExpectInvalid(p, absl::StrCat("model \"toy\": ", field, " 2147483647 exceeds the limit"));
    p.mutable_model()->GetReflection()->SetInt32(p.mutable_model(), f, -1);
    ExpectInvalid(p, absl::StrCat(field, " is -1, must be positive"));
  }
  Program p = ToyProgram();
  p.mutable_model()->set_n_layers(4000);
  p.mutable_model()->set_n_kv_heads(2);
  p.mutable_model()->set_n_heads(4000);
  p.mutable_model()->set_head_dim(4000);
  p.mutable_model()->set_max_context(1 << 24);
  ExpectInvalid(p, "the KV cache (n_layers 4000 x n_kv_heads 2");
}

TEST(Elf, LayersMustBeOfTheModel) {
  Program p = ToyProgram();
  p.mutable_bos(1)->set_layer(1);  // the toy has one layer
  ExpectInvalid(p, "BO \"norm.w\" has layer 1, outside [-1, 1)");
  p = ToyProgram();
  p.mutable_steps(1)->mutable_host()->set_layer(-2);
  ExpectInvalid(p, "host step 1 (attention) has layer -2");
  p = ToyProgram();
  p.mutable_steps(0)->mutable_group()->set_layer(7);
  ExpectInvalid(p, "group \"layer0.norm\" has layer 7");
}

TEST(Elf, ParametersAreRangeChecked) {
  Program p = ToyProgram();
  auto* params = p.mutable_steps(2)->mutable_group()->mutable_launches(0)->mutable_params();
  (*params)["rows"] = -3;
  ExpectInvalid(p, "group \"lm_head\" launch 0 (dk_gemv_bf16_packed): parameter \"rows\" = -3 is outside");
  (*params)["rows"] = int64_t{1} << 40;
  ExpectInvalid(p, "parameter \"rows\" = 1099511627776 is outside");
  params->erase("rows");
  ExpectInvalid(p, "integer parameter \"rows\" is missing or not positive");
  p = ToyProgram();
  HostStep* topk = p.add_steps()->mutable_host();
  topk->set_kind(HostStep::TOPK);
  topk->set_layer(-1);
  (*topk->mutable_params())["k"] = -1;
  ExpectInvalid(p, "host step 3 (topk): parameter \"k\" = -1 is outside");
  (*topk->mutable_params())["k"] = 101;
  ExpectInvalid(p, "parameter \"k\" = 101 is outside [1, vocab 100]");
  (*topk->mutable_params())["k"] = 5;
  // Its result leaves through two program values of k elements: i32 ids, f32 logits.
  ExpectInvalid(p, "host step 3 (topk): no \"ids\" binding (top-k's result)");
  HostValue* ids = p.add_values();
  ids->set_name("topk.ids");
  ids->add_shape(5);
  ids->set_dtype(I32);
  HostValue* vals = p.add_values();
  vals->set_name("topk.logits");
  vals->add_shape(5);
  vals->set_dtype(F32);
  Binding* b = topk->add_bindings();
  b->set_param("ids");
  b->set_value("topk.ids");
  ExpectInvalid(p, "no \"values\" binding");
  b = topk->add_bindings();
  b->set_param("values");
  b->set_value("topk.logits");
  EXPECT_TRUE(ValidateProgram(p).ok()) << ValidateProgram(p);
  vals->set_dtype(BF16);
  ExpectInvalid(p, "\"values\" is bound to \"topk.logits\", which must be F32 of k = 5 elements");
  vals->set_dtype(F32);
  ids->set_shape(0, 4);
  ExpectInvalid(p, "\"ids\" is bound to \"topk.ids\", which must be I32 of k = 5 elements");
}

TEST(Elf, ShapesAreOverflowChecked) {
  Program p = ToyProgram();
  BufferObject* bo = p.mutable_bos(3);
  bo->clear_shape();
  bo->add_shape(int64_t{1} << 32);
  bo->add_shape(int64_t{1} << 32);  // 2^64 elements: wrapped to 0 before
  bo->set_size_bytes(0);
  ExpectInvalid(p, "BO \"q.w\" has a shape of more than");
  p = ToyProgram();
  p.mutable_values(0)->add_shape(int64_t{1} << 62);
  ExpectInvalid(p, "host value \"h\" has a shape of more than");
  p = ToyProgram();
  p.mutable_values(0)->set_shape(0, -64);
  ExpectInvalid(p, "host value \"h\" has a non-positive dimension -64");
  p = ToyProgram();
  p.mutable_values(0)->set_dtype(DTYPE_UNSPECIFIED);
  ExpectInvalid(p, "host value \"h\" has no dtype");
}

TEST(Elf, BlockFormatsAreValidated) {
  Program p = QuantizedToy();
  p.mutable_steps(2)->mutable_group()->mutable_launches(0)->set_kernel_symbol("dk_gemv_bf16_rowmajor");
  auto s = ValidateProgram(p);
  EXPECT_NE(s.message().find("weight BO \"head.w\" is in block format q8_0 but the kernel reads plain bf16"),
            std::string::npos) << s;

  p = QuantizedToy();
  p.mutable_steps(2)->mutable_group()->mutable_launches(0)->set_kernel_symbol("dk_gemv_q4_0_rowmajor");
  s = ValidateProgram(p);
  EXPECT_NE(s.message().find("but the kernel reads block format q4_0"), std::string::npos) << s;

  p = ToyProgram();  // a plain weight read by a block-format variant
  p.mutable_steps(2)->mutable_group()->mutable_launches(0)->set_kernel_symbol("dk_gemv_q8_0_rowmajor");
  s = ValidateProgram(p);
  EXPECT_NE(s.message().find("is plain bf16 but the kernel reads block format q8_0"), std::string::npos) << s;

  p = QuantizedToy();
  p.mutable_bos(4)->set_shape(1, 48);  // 48 % 32 != 0
  s = ValidateProgram(p);
  EXPECT_NE(s.message().find("needs cols % 32 == 0, cols is 48"), std::string::npos) << s;

  p = QuantizedToy();
  p.mutable_bos(4)->set_layout("packed_panel_v1");
  s = ValidateProgram(p);
  EXPECT_NE(s.message().find("block format q8_0 needs a 2-D row_major BF16 weight"), std::string::npos) << s;

  p = QuantizedToy();
  p.mutable_bos(4)->set_size_bytes(100 * 2 * 18);  // Q4_0's size for a Q8_0 BO
  s = ValidateProgram(p);
  EXPECT_NE(s.message().find("\"head.w\" size_bytes 3600 does not match"), std::string::npos) << s;

  p = QuantizedToy();
  p.mutable_bos(4)->set_block_format(static_cast<BlockFormat>(9));
  s = ValidateProgram(p);
  EXPECT_NE(s.message().find("unknown block format 9"), std::string::npos) << s;

  p = QuantizedToy();  // the file's own blocks: fine on a block-format BO ...
  p.mutable_bos(4)->set_blocks_as_stored(true);
  EXPECT_TRUE(ValidateProgram(p).ok()) << ValidateProgram(p);
  p = ToyProgram();  // ... meaningless on a plain one
  p.mutable_bos(4)->set_blocks_as_stored(true);
  s = ValidateProgram(p);
  EXPECT_NE(s.message().find("\"head.w\": blocks_as_stored without a block format"), std::string::npos) << s;
}

// Programs that elf_dump and elf_opt accepted but the runtime refused at load (or,
// worse, ran): each rule is now part of ValidateProgram, so every tool refuses them.
TEST(ValidateProgramTest, RuntimeRulesAreValidationRules) {
  ASSERT_TRUE(ValidateProgram(ToyProgram()).ok()) << ValidateProgram(ToyProgram());
  auto bo = [](Program& p, const std::string& name) -> BufferObject& {
    for (BufferObject& b : *p.mutable_bos()) {
      if (b.name() == name) return b;
    }
    ADD_FAILURE() << "no BO " << name;
    return *p.mutable_bos(0);
  };
  auto launch = [](Program& p, const std::string& group) -> Launch& {
    for (Step& s : *p.mutable_steps()) {
      if (s.has_group() && s.group().name() == group) return *s.mutable_group()->mutable_launches(0);
    }
    ADD_FAILURE() << "no group " << group;
    return *p.mutable_steps(0)->mutable_group()->mutable_launches(0);
  };
  // The LM head split into two partitions of 50 rows (as layout_alignment does).
  auto split_head = [&](Program& p, int64_t second_offset) {
    bo(p, "logits").set_shape(0, 50);
    bo(p, "logits").set_size_bytes(200);
    BufferObject* y1 = p.add_bos();
    *y1 = bo(p, "logits");
    y1->set_name("logits.part1");
    y1->set_host_offset(second_offset);
    launch(p, "lm_head").mutable_params()->at("rows") = 50;
    Step* s = p.add_steps();
    *s->mutable_group() = p.steps(2).group();
    s->mutable_group()->set_name("lm_head.part1");
    s->mutable_group()->set_entry_symbol("lm_head_part1");
    for (Binding& b : *s->mutable_group()->mutable_launches(0)->mutable_bindings()) {
      if (b.param() == "y") b.set_bo("logits.part1");
    }
  };
  struct Case {
    const char* name;
    std::function<void(Program&)> mutate;
    const char* error;
  };
  const Case cases[] = {
      {"partitions cover", [&](Program& p) { split_head(p, 50); }, ""},
      {"partitions overlap", [&](Program& p) { split_head(p, 42); },
       "OUTPUT BOs \"logits\" and \"logits.part1\" both write logits [42, 50)"},
      {"partitions leave a gap", [&](Program& p) { split_head(p, 50), bo(p, "logits").set_host_offset(2); },
       "logits [0, 2) are written by no OUTPUT BO"},
      {"a partition not read back", [&](Program& p) { split_head(p, 50), bo(p, "logits.part1").set_category(WRITE); },
       "logits [50, 100) are written by no OUTPUT BO"},
      {"no logits value", [&](Program& p) { p.mutable_values(2)->set_name("scores"), bo(p, "logits").set_host_value("scores"); },
       "the program has no F32 host value \"logits\""},
      {"OUTPUT BO read back nowhere", [&](Program& p) { bo(p, "xn").clear_host_value(); },
       "OUTPUT BO \"xn\" (parameter \"y\") mirrors no host value"},
      {"logits not vocab", [&](Program& p) { p.mutable_values(2)->set_shape(0, 120); },
       "host value \"logits\" has 120 elements, the model's vocab is 100"},
      {"logits bf16", [&](Program& p) { p.mutable_values(2)->set_dtype(BF16), bo(p, "logits").set_dtype(BF16),
                                        bo(p, "logits").set_size_bytes(200); },
       "the program has no F32 host value \"logits\""},
      {"rope_theta inf", [](Program& p) { p.mutable_model()->set_rope_theta(INFINITY); },
       "rope_theta inf must be finite and > 0"},
      {"rope_scaling.factor negative", [](Program& p) {
         p.mutable_model()->mutable_rope_scaling()->set_type("llama3");
         p.mutable_model()->mutable_rope_scaling()->set_factor(-8);
         p.mutable_model()->mutable_rope_scaling()->set_low_freq_factor(1);
         p.mutable_model()->mutable_rope_scaling()->set_high_freq_factor(4);
       },
       "rope_scaling.factor -8 must be finite and > 0"},
      {"parameter not bound", [&](Program& p) { launch(p, "lm_head").mutable_bindings()->RemoveLast(); },
       "group \"lm_head\" launch 0 (dk_gemv_bf16_packed): parameter \"y\" is not bound"},
      {"WRITE BO from nowhere", [&](Program& p) { bo(p, "norm.w").clear_weight_tensor(); },
       "WRITE BO \"norm.w\" (parameter \"w\") mirrors neither a host value nor a weight"},
      {"weight layout", [&](Program& p) { bo(p, "head.w").clear_layout(), bo(p, "head.w").set_size_bytes(12800); },
       "weight BO \"head.w\" has layout row_major but the kernel reads packed_panel_v1"},
      {"specialized K", [&](Program& p) { launch(p, "lm_head").set_kernel_symbol("dk_gemv_bf16_packed_k576"); },
       "symbol is specialized for K=576 but cols=64"},
      {"weight too small for rows", [&](Program& p) { launch(p, "lm_head").mutable_params()->at("rows") = 200; },
       "weight BO \"head.w\" (parameter \"w\") must be BF16 of at least"},
      {"operand too small", [&](Program& p) { launch(p, "layer0.norm").mutable_params()->at("n") = 65; },
       "BO \"x\" (parameter \"x\") holds 128 bytes, the launch needs 130"},
      {"operand dtype", [&](Program& p) {
         p.mutable_values(0)->set_dtype(F32), bo(p, "x").set_dtype(F32), bo(p, "x").set_size_bytes(256);
       },
       "BO \"x\" (parameter \"x\") has dtype F32, expected BF16"},
      {"weight rank 3", [&](Program& p) {
         BufferObject& w = bo(p, "norm.w");
         w.clear_shape(), w.add_shape(1), w.add_shape(1), w.add_shape(64);
       },
       "BO \"norm.w\" mirrors weight tensor \"model.layers.0.input_layernorm.weight\" but has rank 3"},
      {"host-only kernel in a group", [&](Program& p) { launch(p, "layer0.norm").set_kernel_symbol("dk_topk_f32"); },
       "runs on the host, not in a launch group"},
  };
  for (const Case& c : cases) {
    Program p = ToyProgram();
    c.mutate(p);
    const absl::Status s = ValidateProgram(p);
    if (std::string(c.error).empty()) {
      EXPECT_TRUE(s.ok()) << c.name << ": " << s;
      continue;
    }
    EXPECT_FALSE(s.ok()) << c.name;
    EXPECT_NE(s.message().find(c.error), std::string::npos) << c.name << ": " << s;
    // ... and every reader of the file (elf_dump, elf_opt, the runtime) with it.
    auto bytes = WriteElfUnvalidatedForTesting(p);
    ASSERT_TRUE(bytes.ok()) << c.name;
    EXPECT_FALSE(ReadElf(*bytes).ok()) << c.name;
  }
}
}  // namespace
}  // namespace dk::elf
