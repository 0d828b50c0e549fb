// The measured datasets' readers' tests' shared step (gpumemnet_csv_test,
// exported_rows_test, dataset_test): a file of rows written where a test can read it.
#pragma once

#include <string>

#include "common/text_file.h"
#include "gtest/gtest.h"

namespace gpuest::data::row_files {

// name under the tests' temporary directory, holding text.
inline std::string TempFile(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/" + name;
  EXPECT_TRUE(common::WriteTextFile(path, text).ok());
  return path;
}

}  // namespace gpuest::data::row_files
