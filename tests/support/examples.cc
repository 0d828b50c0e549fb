#include "tests/support/examples.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "google/protobuf/util/json_util.h"

namespace gpuest::testing {

v1::EstimateRequest ExampleRequest(const std::string& name) {
  return RequestFromFile(std::string(GPUEST_EXAMPLES_DIR) + "/" + name);
}

v1::EstimateRequest RequestFromFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  v1::EstimateRequest request;
  if (!google::protobuf::util::JsonStringToMessage(text.str(), request.mutable_model())
           .ok()) {
    std::fprintf(stderr, "cannot read the model description %s\n", path.c_str());
    std::abort();
  }
  return request;
}

v1::PlacementJob MeasuredJob(const std::string& name, uint64_t bytes,
                             double util_percent) {
  v1::PlacementJob job;
  job.set_name(name);
  job.mutable_measured()->set_memory_in_use_bytes(bytes);
  job.mutable_measured()->set_gpu_util(util_percent);
  job.mutable_measured()->set_mem_util(util_percent / 2);
  job.mutable_measured()->set_source(v1::UTILIZATION_SOURCE_NVIDIA_SMI);
  return job;
}

}  // namespace gpuest::testing
