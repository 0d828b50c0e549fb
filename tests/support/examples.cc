#include "tests/support/examples.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "google/protobuf/util/json_util.h"

namespace gpuest::testing {

v1::EstimateRequest ExampleRequest(const std::string& name) {
  const std::string path = std::string(GPUEST_EXAMPLES_DIR) + "/" + name;
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  v1::EstimateRequest request;
  if (!google::protobuf::util::JsonStringToMessage(text.str(), request.mutable_model())
           .ok()) {
    std::fprintf(stderr, "cannot read example %s\n", path.c_str());
    std::abort();
  }
  return request;
}

}  // namespace gpuest::testing
