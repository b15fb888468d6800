#include "elf/elf.h"

#include <elf.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <cstring>
#include <functional>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"

namespace dk::elf {
namespace {

// A one-layer toy program: an RMSNorm + GEMV group, a host attention step, and an
// LM-head group.
Program ToyProgram() {
  Program p;
  const bool ok = google::protobuf::TextFormat::ParseFromString(R"pb(
    schema_version: 1
    model { name: "toy" n_layers: 1 hidden: 64 n_heads: 2 n_kv_heads: 1 head_dim: 32
            ffn: 128 vocab: 100 rms_eps: 1e-5 rope_theta: 10000 max_context: 16 }
    weights_digest: "sha256:00"
    values { name: "h" shape: 64 dtype: BF16 }
    values { name: "hn" shape: 64 dtype: BF16 }
    values { name: "logits" shape: 100 dtype: F32 }
    bos { name: "x" shape: 64 dtype: BF16 category: WRITE layer: -1 host_value: "h"
          size_bytes: 128 }
    bos { name: "norm.w" shape: 64 dtype: BF16 category: WRITE layer: 0
          weight_tensor: "model.layers.0.input_layernorm.weight" size_bytes: 128 }
    bos { name: "xn" shape: 64 dtype: BF16 category: OUTPUT layer: 0 host_value: "hn"
          size_bytes: 128 }
    bos { name: "q.w" shape: [64, 64] dtype: BF16 category: WRITE layer: 0 size_bytes: 8192 }
    bos { name: "head.w" shape: [100, 64] dtype: BF16 layout: "packed_panel_v1"
          category: STATIC layer: -1 size_bytes: 13312 }
    bos { name: "logits" shape: 100 dtype: F32 category: OUTPUT layer: -1 size_bytes: 400
          host_value: "logits" }
    steps { group { name: "layer0.norm" entry_symbol: "layer0_norm" layer: 0
      launches { kernel_symbol: "dk_rmsnorm_bf16"
                 bindings { param: "x" bo: "x" } bindings { param: "w" bo: "norm.w" }
                 bindings { param: "y" bo: "xn" } params { key: "n" value: 64 } } } }
    steps { host { kind: "attention" layer: 0 bindings { param: "q" value: "hn" } } }
    steps { group { name: "lm_head" entry_symbol: "lm_head" layer: -1
      launches { kernel_symbol: "dk_gemv_bf16_packed"
                 bindings { param: "w" bo: "head.w" } bindings { param: "x" bo: "xn" }
                 bindings { param: "y" bo: "logits" }
                 params { key: "rows" value: 100 } params { key: "cols" value: 64 } } } }
    lineage { pass: "baseline" target: "cpu" applied: true reason: "straight port" }
  )pb", &p);
  EXPECT_TRUE(ok);
  return p;
}

TEST(Elf, RoundTrip) {
  const Program p = ToyProgram();
  ASSERT_TRUE(ValidateProgram(p).ok()) << ValidateProgram(p);
  auto bytes = WriteElf(p);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  auto back = ReadElf(*bytes, "toy.elf");
  ASSERT_TRUE(back.ok()) << back.status();
  // (Not SerializeAsString: without deterministic serialization, map entries may come
  // out in either order.)
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(*back, p));
}

// The same program gives the same bytes whatever order its map fields were filled
// in (Bazel caches and reviews compare ELF bytes).
TEST(Elf, BytesDoNotDependOnMapInsertionOrder) {
  Program a = ToyProgram(), b = ToyProgram();
  auto* pa = a.mutable_steps(0)->mutable_group()->mutable_launches(0)->mutable_params();
  auto* pb = b.mutable_steps(0)->mutable_group()->mutable_launches(0)->mutable_params();
  pa->clear();
  pb->clear();
  for (int i = 0; i < 64; ++i) (*pa)["p" + std::to_string(i)] = i;
  for (int i = 63; i >= 0; --i) (*pb)["p" + std::to_string(i)] = i;
  (*pa)["n"] = (*pb)["n"] = 64;  // the kernel's own parameter
  auto bytes_a = WriteElf(a), bytes_b = WriteElf(b);
  ASSERT_TRUE(bytes_a.ok()) << bytes_a.status();
  ASSERT_TRUE(bytes_b.ok()) << bytes_b.status();
  EXPECT_TRUE(*bytes_a == *bytes_b);
}

TEST(Elf, ReadelfAcceptsItAndListsTheSymbols) {
  const std::string dir = std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp";
  const std::string path = dir + "/toy.elf";
  ASSERT_TRUE(WriteElfFile(ToyProgram(), path).ok());
  const std::string out = dir + "/readelf.txt";
  const std::string cmd = "readelf -h -S -s " + path + " > " + out + " 2>&1";
  if (std::system("command -v readelf > /dev/null") != 0) GTEST_SKIP() << "no readelf";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  std::ifstream f(out);
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("ELF64"), std::string::npos) << text;
  EXPECT_NE(text.find(".dk.program"), std::string::npos) << text;
  EXPECT_NE(text.find("layer0_norm"), std::string::npos) << text;
  EXPECT_NE(text.find("lm_head"), std::string::npos) << text;
  EXPECT_NE(text.find("UND dk_rmsnorm_bf16"), std::string::npos) << text;
  EXPECT_EQ(text.find("Warning"), std::string::npos) << text;
  ASSERT_TRUE(ReadElfFile(path).ok());
}

// The program's bytes as WriteElf stores them (map fields in key order).
std::string Serialized(const Program& p) {
  std::string out;
  {
    google::protobuf::io::StringOutputStream stream(&out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    p.SerializeToCodedStream(&coded);
  }  // the streams flush into `out` here
  return out;
}

void ExpectShapeError(const absl::StatusOr<ModelShape>& r, const std::string& needle) {
  ASSERT_FALSE(r.ok()) << "expected an error containing: " << needle;
  EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status();
}

void ExpectError(absl::StatusOr<Program> r, const std::string& needle) {
  ASSERT_FALSE(r.ok()) << "expected an error containing: " << needle;
  EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status();
}

TEST(Elf, TruncatedFilesAreRefusedAtEveryLength) {
  const std::string bytes = *WriteElf(ToyProgram());
  for (size_t n = 0; n < bytes.size(); n += (n < 128 ? 1 : 37)) {
    EXPECT_FALSE(ReadElf(bytes.substr(0, n), "cut.elf").ok()) << n;
  }
  ExpectError(ReadElf(bytes.substr(0, 10), "cut.elf"), "shorter than an ELF64 header");
}

TEST(Elf, BadHeaders) {
  std::string bytes = *WriteElf(ToyProgram());
  std::string bad = bytes;
  bad[1] = 'X';
  ExpectError(ReadElf(bad), "bad magic");
  bad = bytes;
  bad[4] = 1;  // ELFCLASS32
  ExpectError(ReadElf(bad), "not a 64-bit ELF");
  ExpectError(ReadElf(std::string(200, '\0')), "bad magic");
}

TEST(Elf, SchemaVersionMismatch) {
  Program p = ToyProgram();
  const std::string payload = Serialized(p);
  std::string bytes = *WriteElf(p);
  p.set_schema_version(2);  // same varint length, so the section size is unchanged
  const std::string v2 = Serialized(p);
  ASSERT_EQ(v2.size(), payload.size());
  const size_t at = bytes.find(payload);
  ASSERT_NE(at, std::string::npos);
  bytes.replace(at, payload.size(), v2);
  ExpectError(ReadElf(bytes), "schema version 2 is not the supported version 1");
  EXPECT_FALSE(WriteElf(p).ok());
}

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

void ExpectInvalid(const Program& p, const std::string& needle) {
  const absl::Status s = ValidateProgram(p);
  ASSERT_FALSE(s.ok()) << "expected an error containing: " << needle;
  EXPECT_NE(s.message().find(needle), std::string::npos) << s;
  // Every reader refuses it too (WriteElf validates; ReadElf of such bytes is tested
  // through the tools' sh_tests).
  EXPECT_FALSE(WriteElf(p).ok());
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
  topk->set_kind("topk");
  topk->set_layer(-1);
  (*topk->mutable_params())["k"] = -1;
  ExpectInvalid(p, "host step 3 (topk): parameter \"k\" = -1 is outside");
  (*topk->mutable_params())["k"] = 101;
  ExpectInvalid(p, "parameter \"k\" = 101 is outside [1, vocab 100]");
  (*topk->mutable_params())["k"] = 5;
  EXPECT_TRUE(ValidateProgram(p).ok()) << ValidateProgram(p);
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

// ToyProgram with its LM head in Q8_0 blocks, read by the Q8_0 GEMV.
Program QuantizedToy() {
  Program p = ToyProgram();
  BufferObject* w = p.mutable_bos(4);
  w->set_layout("row_major");
  w->set_weight_tensor("model.embed_tokens.weight");
  w->set_block_format(Q8_0);
  w->set_size_bytes(100 * (64 / 32) * 34);  // rows x blocks per row x 34 bytes
  p.mutable_steps(2)->mutable_group()->mutable_launches(0)->set_kernel_symbol("dk_gemv_q8_0_rowmajor");
  return p;
}

TEST(Elf, BlockFormatsRoundTripAndOldProgramsReadAsBf16) {
  auto bytes = WriteElf(ToyProgram());
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  auto plain = ReadElf(*bytes);
  ASSERT_TRUE(plain.ok()) << plain.status();
  for (const auto& bo : plain->bos()) EXPECT_EQ(bo.block_format(), BLOCK_FORMAT_NONE) << bo.name();

  const Program q = QuantizedToy();
  EXPECT_EQ(*BoBytes(q.bos(4)), 6800);
  bytes = WriteElf(q);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  auto back = ReadElf(*bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->bos(4).block_format(), Q8_0);
  EXPECT_EQ(*WriteElf(*back), *bytes);  // deterministic with the new field set
  EXPECT_EQ(BlockFormatName(Q4_0), "q4_0");
  EXPECT_EQ(BlockFormatName(BLOCK_FORMAT_NONE), "");
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

TEST(Elf, SymbolTableMustMatchTheProgram) {
  std::string bytes = *WriteElf(ToyProgram());
  // Rename the entry symbol in .strtab ("layer0_norm" -> "layer0_norX").
  const size_t at = bytes.find(std::string("layer0_norm\0", 12));
  ASSERT_NE(at, std::string::npos);
  bytes[at + 10] = 'X';
  ExpectError(ReadElf(bytes), "entry symbol \"layer0_norm\" of group \"layer0.norm\" is missing");
}

TEST(Elf, CorruptProgramSection) {
  Program p = ToyProgram();
  const std::string payload = Serialized(p);
  std::string bytes = *WriteElf(p);
  const size_t at = bytes.find(payload);
  ASSERT_NE(at, std::string::npos);
  for (size_t i = 0; i < 16; ++i) bytes[at + i] = '\xff';
  EXPECT_FALSE(ReadElf(bytes).ok());
  ExpectError(ReadElfFile("/nonexistent/x.elf"), "cannot open decode ELF");
}

// /dev/zero (or a FIFO) as --elf was read without bound until std::bad_alloc.
TEST(Elf, ReadElfFileRefusesWhatIsNotARegularFile) {
  ExpectError(ReadElfFile("/dev/zero"), "decode ELF /dev/zero is not a regular file");
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = tmp != nullptr ? tmp : "/tmp";
  ExpectError(ReadElfFile(dir), "decode ELF " + dir + " is a directory, not a file");
  const std::string fifo = dir + "/fifo.elf";
  std::remove(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  ExpectError(ReadElfFile(fifo), "decode ELF " + fifo + " is not a regular file");
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

// Found by //elf:elf_fuzzer: a .dk.program section typed NULL (or NOBITS) skipped
// the bounds check, and an offset near 2^64 had the parser read before the buffer.
TEST(Elf, ProgramSectionMustBeProgbitsInsideTheFile) {
  const std::string good = *WriteElf(ToyProgram());
  Elf64_Ehdr eh;
  std::memcpy(&eh, good.data(), sizeof(eh));
  auto with_program_section = [&](uint32_t type, uint64_t offset) {
    std::string bytes = good;
    Elf64_Shdr sh;
    const size_t at = eh.e_shoff + 1 * sizeof(Elf64_Shdr);  // section 1 is .dk.program
    std::memcpy(&sh, bytes.data() + at, sizeof(sh));
    sh.sh_type = type;
    sh.sh_offset = offset;
    std::memcpy(&bytes[at], &sh, sizeof(sh));
    return bytes;
  };
  const uint64_t wrap = ~uint64_t{0} - 207;  // 208 bytes before the buffer
  ExpectError(ReadElf(with_program_section(SHT_NULL, wrap)), "extends past the end of the file");
  ExpectError(ReadElf(with_program_section(SHT_NOBITS, wrap)), ".dk.program has section type 8, not PROGBITS");
  std::memcpy(&eh, good.data(), sizeof(eh));
  Elf64_Shdr sh;
  std::memcpy(&sh, good.data() + eh.e_shoff + sizeof(Elf64_Shdr), sizeof(sh));
  ExpectError(ReadElf(with_program_section(SHT_NOTE, sh.sh_offset)), "not PROGBITS");
  EXPECT_TRUE(ReadElf(with_program_section(SHT_PROGBITS, sh.sh_offset)).ok());
}

// Issue 15: a directory was read as a 0-byte file ("truncated?").
TEST(Elf, ADirectoryIsSaidToBeADirectory) {
  const std::string dir = std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp";
  ExpectError(ReadElfFile(dir), "decode ELF " + dir + " is a directory, not a file");
  ExpectError(ReadElfFile(dir + "/none.elf"), "No such file or directory");
}

// Issue 15: libprotobuf printed its own "[libprotobuf ERROR ...]" line in front of
// our error for a program message with invalid UTF-8 in a string field.
TEST(Elf, CorruptStringsGiveOneMessageAndNoLibraryLogLine) {
  Program p = ToyProgram();
  p.mutable_model()->set_name("TOYTOY");
  std::string bytes = *WriteElf(p);
  const size_t at = bytes.find("TOYTOY");
  ASSERT_NE(at, std::string::npos);
  bytes.replace(at, 6, "\xff\xfe\xfd\xfc\xfb\xfa");  // not UTF-8, same length
  ::testing::internal::CaptureStderr();
  auto r = ReadElf(bytes, "utf8.elf");
  const std::string logged = ::testing::internal::GetCapturedStderr();
  ExpectError(r, "decode ELF utf8.elf: .dk.program does not hold a valid program message");
  EXPECT_EQ(logged, "");
}

// Model configs (elfc, synthetic_weights): a syntax error names the place and is
// the only message; sizes go through ValidateModelShape.
TEST(Elf, ModelConfigsAreParsedWithoutLogLinesAndValidated) {
  ::testing::internal::CaptureStderr();
  auto bad = ParseModelShapeText("name: \"m\"\nn_layers: banana\n", "m.textproto");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  ExpectShapeError(bad, "m.textproto:2:");
  ExpectShapeError(bad, "not a valid dk.elf.ModelShape text proto");
  const std::string ok = "name: \"m\" n_layers: 1 hidden: 64 n_heads: 2 n_kv_heads: 1 head_dim: 32 "
                         "ffn: 128 vocab: 100 rms_eps: 1e-5 rope_theta: 10000 max_context: 16";
  EXPECT_TRUE(ParseModelShapeText(ok, "m.textproto").ok());
  std::string huge = ok;
  huge.replace(huge.find("n_layers: 1"), 11, "n_layers: 2147483647");
  ExpectShapeError(ParseModelShapeText(huge, "m.textproto"),
                   "m.textproto: model \"m\": n_layers 2147483647 exceeds the limit 4096");
}

// elf_opt tells a failed write from an invalid program by the code.
TEST(Elf, WriteFailureIsUnavailable) {
  const absl::Status s = WriteElfFile(ToyProgram(), "/nonexistent/dir/x.elf");
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_NE(s.message().find("cannot write decode ELF /nonexistent/dir/x.elf: No such file"),
            std::string::npos)
      << s;
  Program bad = ToyProgram();
  bad.mutable_bos(0)->set_host_offset(-1);
  EXPECT_EQ(WriteElfFile(bad, "/nonexistent/dir/x.elf").code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace dk::elf
