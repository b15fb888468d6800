// The real Gemma 3 270M GGUF (@gemma3_270m//:model.gguf) read by weights::GgufShape
// gives the shape models/gemma3_270m/config.textproto states (from the HF
// config.json): what the file's gemma3.* keys say and what the architecture fixes
// (the sliding pattern, the local RoPE theta, the attention scale).
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "elf/program.pb.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "tools/cpp/runfiles/runfiles.h"
#include "weights/weights.h"

namespace dk {
namespace {

TEST(Gemma3GgufShapeTest, EqualsTheModelsConfig) {
  std::string error;
  std::unique_ptr<bazel::tools::cpp::runfiles::Runfiles> runfiles(
      bazel::tools::cpp::runfiles::Runfiles::CreateForTest(&error));
  ASSERT_NE(runfiles, nullptr) << error;
  std::ifstream in(runfiles->Rlocation("decodekit/models/gemma3_270m/config.textproto"));
  std::stringstream text;
  text << in.rdbuf();
  elf::ModelShape config;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(text.str(), &config));
  ASSERT_EQ(config.n_layers(), 18);  // the file was read
  auto shape = weights::GgufShape(runfiles->Rlocation("gemma3_270m/model.gguf"));
  ASSERT_TRUE(shape.ok()) << shape.status();
  // The two fields that differ: the name (general.basename + size_label) and the
  // context (the file's 32768; the config caps it at 2048).
  EXPECT_EQ(shape->name(), "gemma_3_270m");
  EXPECT_EQ(shape->max_context(), 32768);
  elf::ModelShape read = *shape;
  read.set_name(config.name());
  read.set_max_context(config.max_context());
  EXPECT_EQ(read.DebugString(), config.DebugString());
}

}  // namespace
}  // namespace dk
