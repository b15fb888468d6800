// libFuzzer target: the safetensors header and data map (issue 15). The input is a
// whole file (SafetensorsFile maps a path, so it goes through a memfd); a file that
// opens has every tensor read. Errors are fine, crashes are not.
//   ./bazelw build --config=fuzz //weights:safetensors_fuzzer
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "weights/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const int fd = memfd_create("fuzz.safetensors", 0);
  if (fd < 0) return 0;
  if (size > 0 && write(fd, data, size) != static_cast<ssize_t>(size)) {
    close(fd);
    return 0;
  }
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  if (auto f = dk::weights::SafetensorsFile::Open(path); f.ok()) {
    for (const dk::weights::SafetensorsTensorInfo& t : (*f)->tensors()) {
      if (t.end - t.begin <= (uint64_t{1} << 24)) (void)(*f)->ReadBf16(t);
    }
  }
  close(fd);
  return 0;
}
