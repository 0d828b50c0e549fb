// The libFuzzer entry point of every target, built once per target
// (tests/fuzz/CMakeLists.txt) with GPUEST_FUZZ_PROPERTY naming its property function
// in fuzz_properties.h: a broken property aborts, so libFuzzer keeps the input.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "tests/fuzz/fuzz_properties.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::Status status = gpuest::fuzz::GPUEST_FUZZ_PROPERTY(
      absl::string_view(reinterpret_cast<const char*>(data), size));
  if (!status.ok()) {
    std::fprintf(stderr, "%s\n", status.ToString().c_str());
    std::abort();
  }
  return 0;
}
