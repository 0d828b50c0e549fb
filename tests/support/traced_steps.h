// File: traced_steps.h
//
// Traced training steps built for tests, small enough to read, valid for the server.
#pragma once

#include <cstdint>

#include "gpuest/v1/estimate.pb.h"

namespace gpuest::testing {

// A one-layer MLP (1024 wide, batch 8) whose traced step caches about twice what it
// needs at once: a temporary of temporary_bytes is freed before an activation 2 MiB
// larger that cannot reuse its block. Its reserved peak is about twice
// temporary_bytes, but with the allocator's cache released and retried about
// temporary_bytes (plus the 20 MiB segment of the weights) suffice.
v1::EstimateRequest CacheHungryStep(uint64_t temporary_bytes);

// CacheHungryStep(64 MiB) followed by `temporaries` short-lived temporaries of sizes
// from 512 bytes to 64 MiB, a few alive at once: a valid request whose replay takes
// about a quarter of a second per million temporaries on the 2-core development VM, for
// tests of long work.
v1::EstimateRequest LongTracedStep(int temporaries);

}  // namespace gpuest::testing
