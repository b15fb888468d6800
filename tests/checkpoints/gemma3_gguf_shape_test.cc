// The real Gemma 3 270M GGUF (@gemma3_270m//:model.gguf) read by weights::GgufShape
// gives the shape google/gemma-3-270m's published HF config.json gives
// (testdata/gemma-3-270m/config.json, read by weights::ShapeFromHfConfig): what the
// file's gemma3.* keys say and what the architecture fixes (the sliding pattern, the
// local RoPE theta, the attention scale). Two independent sources of the shape
// models/gemma3_270m builds from the GGUF (weights/model_file.h).
#include <memory>
#include <string>

#include "elf/program.pb.h"
#include "gtest/gtest.h"
#include "tools/cpp/runfiles/runfiles.h"
#include "weights/model_file.h"
#include "weights/weights.h"

namespace dk {
namespace {

TEST(Gemma3GgufShapeTest, EqualsThePublishedConfigJson) {
  std::string error;
  std::unique_ptr<bazel::tools::cpp::runfiles::Runfiles> runfiles(
      bazel::tools::cpp::runfiles::Runfiles::CreateForTest(&error));
  ASSERT_NE(runfiles, nullptr) << error;
  auto from_hf = weights::ShapeFromModelFile(
      runfiles->Rlocation("decodekit/tests/checkpoints/testdata/gemma-3-270m/config.json"));
  ASSERT_TRUE(from_hf.ok()) << from_hf.status();
  ASSERT_EQ(from_hf->n_layers(), 18);  // the file was read
  auto shape = weights::GgufShape(runfiles->Rlocation("gemma3_270m/model.gguf"));
  ASSERT_TRUE(shape.ok()) << shape.status();
  // The name differs (general.basename + size_label; the directory's name).
  EXPECT_EQ(shape->name(), "gemma_3_270m");
  EXPECT_EQ(from_hf->name(), "gemma_3_270m");
  EXPECT_EQ(shape->max_context(), 32768);
  EXPECT_EQ(shape->DebugString(), from_hf->DebugString());
}

}  // namespace
}  // namespace dk
