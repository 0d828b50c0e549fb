// File: examples.h
//
// The example descriptions in examples/ and tests/data/, as requests, for tests.
#pragma once

#include <string>

#include "gpuest/v1/estimate.pb.h"

namespace gpuest::testing {

// examples/<name> (a ModelDescription in JSON) as the model of a request; aborts the
// test binary if the file does not parse, since every test relies on it.
v1::EstimateRequest ExampleRequest(const std::string& name);

// Any ModelDescription JSON file (tests/data/traces/...) as the model of a request;
// aborts likewise.
v1::EstimateRequest RequestFromFile(const std::string& path);

}  // namespace gpuest::testing
