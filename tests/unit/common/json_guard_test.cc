// common/json_guard: the one pass over every untrusted JSON text before a parser sees
// it (depth, keys named twice), strings and their escapes included.
#include "common/json_guard.h"

#include <string>

#include "gtest/gtest.h"

namespace gpuest::common {
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
  const absl::Status status = CheckJsonText(deep, "the body");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("nested more than 64 levels"), std::string::npos)
      << status;
  EXPECT_TRUE(CheckJsonText(R"({"a": [[1]]})", "x").ok());
}

// The message for text, or "" when it passes.
std::string Refusal(const std::string& text) {
  const absl::Status status = CheckJsonText(text, "the body");
  if (status.ok()) return "";
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  return std::string(status.message());
}

TEST(CheckJsonText, RefusesAKeyNamedTwiceInOneObjectNamingItAndWhere) {
  EXPECT_EQ(Refusal(R"({"batchSize": 1, "batchSize": 64})"),
            "the body: key \"batchSize\" appears twice in one object, at the top level "
            "(readers disagree on which copy counts, so none is taken)");
  const std::string nested = Refusal(
      R"({"items": [{"metadata": {"name": "a"}}, {"metadata": {"name": "b", "name": "c"}}]})");
  EXPECT_NE(nested.find("key \"name\" appears twice in one object, at items[1].metadata"),
            std::string::npos)
      << nested;
}

TEST(CheckJsonText, OneKeyHoweverItIsEscaped) {
  // "\u0061" is "a" to every parser; a surrogate pair is one character.
  EXPECT_NE(Refusal(R"({"a": 1, "\u0061": 2})"), "");
  EXPECT_NE(Refusal(R"({"\ud83d\ude00": 1, "\ud83d\ude00": 2})"), "");
  EXPECT_NE(Refusal("{\"\xf0\x9f\x98\x80\": 1, \"\\ud83d\\ude00\": 2}"), "");
  EXPECT_NE(Refusal(R"({"a\"b": 1, "a\u0022b": 2})"), "");
  EXPECT_EQ(Refusal(R"({"a\\": 1, "a": 2})"), "");
}

TEST(CheckJsonText, KeysOfOtherObjectsAndValuesAreNotDuplicates) {
  EXPECT_EQ(Refusal(R"({"a": {"a": {"a": 1}}, "b": [{"a": 1}, {"a": 2}]})"), "");
  EXPECT_EQ(Refusal(R"({"a": "b", "c": "b", "d": ["a", "a"]})"), "");
  EXPECT_EQ(Refusal(R"({"a": {}, "b": [], "c": {"x": 1}, "d": 2})"), "");
  EXPECT_EQ(Refusal(R"([{"k": 1}, {"k": 1}])"), "");
}

TEST(CheckJsonText, FindsTheDuplicateInAnObjectOfManyKeys) {
  // Past the in-line scan, the hash set must still see the keys read before it.
  std::string many = "{";
  for (int i = 0; i < 40; ++i) many += "\"k" + std::to_string(i) + "\": 0, ";
  EXPECT_EQ(Refusal(many + "\"last\": 0}"), "");
  EXPECT_NE(Refusal(many + "\"k3\": 0}").find("key \"k3\""), std::string::npos);
  EXPECT_NE(Refusal(many + "\"k39\": 0}").find("key \"k39\""), std::string::npos);
}

}  // namespace
}  // namespace gpuest::common
