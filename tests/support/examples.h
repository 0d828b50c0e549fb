// File: examples.h
//
// The example descriptions in examples/ and tests/data/, as requests, and measured
// placement jobs, for tests.
#pragma once

#include <cstdint>
#include <string>

#include "gpuest/v1/estimate.pb.h"
#include "gpuest/v1/placement.pb.h"

namespace gpuest::testing {

// examples/<name> (a ModelDescription in JSON) as the model of a request; aborts the
// test binary if the file does not parse, since every test relies on it.
v1::EstimateRequest ExampleRequest(const std::string& name);

// Any ModelDescription JSON file (tests/data/traces/...) as the model of a request;
// aborts likewise.
v1::EstimateRequest RequestFromFile(const std::string& path);

// A job as a node measures it with nvidia-smi: memory in use, utilization.gpu in
// percent, utilization.memory at half of it.
v1::PlacementJob MeasuredJob(const std::string& name, uint64_t bytes,
                             double util_percent);

}  // namespace gpuest::testing
