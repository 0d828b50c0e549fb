// The libFuzzer entry point of every target, built once per target
// (tests/fuzz/CMakeLists.txt) with GPUEST_FUZZ_PROPERTY naming its property function
// in fuzz_properties.h: a broken property aborts, so libFuzzer keeps the input.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "google/protobuf/stubs/logging.h"
#include "tests/fuzz/fuzz_properties.h"

// Protobuf logs every invalid UTF-8 string it refuses to parse; at tens of thousands
// of inputs a second that is most of the run's time.
extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::Status status = gpuest::fuzz::GPUEST_FUZZ_PROPERTY(
      absl::string_view(reinterpret_cast<const char*>(data), size));
  if (!status.ok()) {
    std::fprintf(stderr, "%s\n", status.ToString().c_str());
    std::abort();
  }
  return 0;
}
