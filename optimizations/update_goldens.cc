// Rewrites every pass golden under $BUILD_WORKSPACE_DIRECTORY (set by `bazel run`):
//   ./bazelw run //optimizations:update_goldens
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "optimizations/testing/tiny.h"

int main() {
  const char* root = std::getenv("BUILD_WORKSPACE_DIRECTORY");
  if (root == nullptr) {
    std::fprintf(stderr, "update_goldens: run me with `bazel run //optimizations:update_goldens`\n");
    return 2;
  }
  for (const auto& c : dk::opt::testing::GoldenCases()) {
    auto text = dk::opt::testing::RenderGolden(c);
    if (!text.ok()) {
      std::fprintf(stderr, "update_goldens: %s/%s: %s\n", c.pass.c_str(), c.name.c_str(),
                   std::string(text.status().message()).c_str());
      return 1;
    }
    const std::string path = std::string(root) + "/" + dk::opt::testing::GoldenPath(c);
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << *text;
    if (!out.good()) {
      std::fprintf(stderr, "update_goldens: cannot write %s (does the testdata folder exist?)\n",
                   path.c_str());
      return 1;
    }
    std::printf("wrote %s\n", dk::opt::testing::GoldenPath(c).c_str());
  }
  return 0;
}
