// common/json_guard: the depth count that runs over every untrusted body before a
// parser sees it, strings and their escapes included.
#include "common/json_guard.h"

#include <string>

#include "gtest/gtest.h"

namespace gpuest {
namespace {

TEST(JsonNestingDepth, CountsObjectsAndArraysNotBracketsInStrings) {
  EXPECT_EQ(JsonNestingDepth(R"({"a": [1, {"b": []}]})"), 4);
  EXPECT_EQ(JsonNestingDepth(R"({"a": "[[[[{{{{"})"), 1);
  EXPECT_EQ(JsonNestingDepth("[]"), 1);
  EXPECT_EQ(JsonNestingDepth(""), 0);
}

TEST(JsonNestingDepth, AnEscapedQuoteDoesNotEndAStringAnEscapedBackslashDoes) {
  // "\"[[" is one string: its brackets do not count.
  EXPECT_EQ(JsonNestingDepth(R"(["\"[[", 1])"), 1);
  // "\\" ends after the escaped backslash: the brackets after it count.
  EXPECT_EQ(JsonNestingDepth(R"(["\\", [[1]]])"), 3);
  // Three backslashes then a quote: escaped; the string goes on to the next quote.
  EXPECT_EQ(JsonNestingDepth(R"(["a\\\"[[", [2]])"), 2);
  // An unterminated string: nothing after it nests.
  EXPECT_EQ(JsonNestingDepth(R"([["abc[[[[)"), 2);
}

TEST(JsonNestingDepth, StopsCountingPastTheBoundAndTheCheckNamesIt) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_EQ(JsonNestingDepth(deep), kMaxJsonDepth + 1);
  const absl::Status status = CheckJsonDepth(deep, "the body");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("nested more than 64 levels"), std::string::npos)
      << status;
  EXPECT_TRUE(CheckJsonDepth(R"({"a": [[1]]})", "x").ok());
}

}  // namespace
}  // namespace gpuest
