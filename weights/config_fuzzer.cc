// libFuzzer target: an HF config.json -> ModelShape (issue 15). Any input gives an
// error or a shape that elf::ValidateModelShape accepts (so nothing sized by it
// later can overflow); the ExpectedTensors of an accepted shape are listed.
//   ./bazelw build --config=fuzz //weights:config_fuzzer
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "absl/strings/string_view.h"
#include "elf/elf.h"
#include "weights/weights.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  auto shape = dk::weights::ShapeFromHfConfig(text, "fuzz", "config.json");
  if (!shape.ok()) return 0;
  if (!dk::elf::ValidateModelShape(*shape).ok()) std::abort();
  if (shape->n_layers() <= 64) (void)dk::weights::ExpectedTensors(*shape);
  return 0;
}
