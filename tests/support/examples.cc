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

}  // namespace gpuest::testing
