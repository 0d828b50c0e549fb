// File: datasets.h
//
// The measured datasets some tests compare against (GPUMemNet's CSVs, Lucid's pairs, the
// timm runs). They are not part of the repository: a clone finds them where
// GPUEST_DATA_DIR points (the folder holding gpumemnet/, lucid/, timm/), or, by default,
// in ../shared/data beside the checkout. A test that needs one it cannot find is skipped
// with one line naming the dataset and how to provide it; with GPUEST_REQUIRE_DATA=1 (CI
// sets it) the same test fails instead, so a run that has the data cannot pass by
// skipping.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"

namespace gpuest::testing {

// The folder holding the datasets: $GPUEST_DATA_DIR, else the build's default
// (../shared/data beside the source tree).
std::string DataRoot();

// DataRoot()/<relative> when that file or folder exists; NotFound otherwise, with the one
// line the skip prints ("dataset gpumemnet/mlp.csv not found ...: set GPUEST_DATA_DIR").
absl::StatusOr<std::string> FindDataset(const std::string& relative);

// GPUEST_REQUIRE_DATA=1: a missing dataset fails the test rather than skipping it.
bool DataRequired();

// The project's own small datasets in the measured files' formats, made by its own
// generators (tests/data/fixture-datasets, README there): every code path that reads a
// dataset runs on them in a clone without the measured data.
std::string FixtureRoot();

}  // namespace gpuest::testing

// Declares `std::string var` holding the dataset's path, or ends the test: skipped (a
// fresh clone) or failed (GPUEST_REQUIRE_DATA=1).
#define GPUEST_DATASET_OR_SKIP(var, relative)                                          \
  std::string var;                                                                     \
  if (auto found_##var = ::gpuest::testing::FindDataset(relative); found_##var.ok()) { \
    var = *found_##var;                                                                \
  } else if (::gpuest::testing::DataRequired()) {                                      \
    GTEST_FAIL() << "GPUEST_REQUIRE_DATA=1: " << found_##var.status().message();       \
  } else {                                                                             \
    GTEST_SKIP() << "skipped: " << found_##var.status().message();                     \
  }
