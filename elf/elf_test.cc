#include "elf/elf.h"
#include "elf/toy_program.h"

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
  p.set_schema_version(kSchemaVersion + 1);  // same varint length, so the section size is unchanged
  const std::string next = Serialized(p);
  ASSERT_EQ(next.size(), payload.size());
  const size_t at = bytes.find(payload);
  ASSERT_NE(at, std::string::npos);
  bytes.replace(at, payload.size(), next);
  ExpectError(ReadElf(bytes), absl::StrCat("schema version ", kSchemaVersion + 1, " is not the supported version ",
                                           kSchemaVersion));
  EXPECT_FALSE(WriteElf(p).ok());
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
