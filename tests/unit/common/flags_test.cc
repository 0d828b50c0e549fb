// common/flags: --help lists the defining file's flags from their definitions, with
// dashes; a flag is read with dashes or underscores, with its value after = or apart,
// a boolean without one; a flag the program does not define ends it with status 2.
#include "common/flags.h"

#include <unistd.h>

#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "gtest/gtest.h"

ABSL_FLAG(std::string, flags_test_listen, "127.0.0.1:1", "Where to listen.");
ABSL_FLAG(int, flags_test_workers, 4, "How many workers.");
ABSL_FLAG(bool, flags_test_verbose, false, "Say more.");

namespace gpuest::common {
namespace {

ProgramUsage Usage() {
  return {"flags_test [flags] FILE", "Reads FILE.", "Exit codes: 0 fine.", __FILE__};
}

// ParseFlags on args after a program name, with the test's flags at their defaults.
std::vector<std::string> Parse(std::vector<std::string> args) {
  absl::SetFlag(&FLAGS_flags_test_listen, "127.0.0.1:1");
  absl::SetFlag(&FLAGS_flags_test_workers, 4);
  absl::SetFlag(&FLAGS_flags_test_verbose, false);
  args.insert(args.begin(), "flags_test");
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  return ParseFlags(static_cast<int>(argv.size()), argv.data(), Usage());
}

TEST(Flags, UsageListsTheFilesOwnFlagsDashedWithTheirDefaults) {
  EXPECT_EQ(UsageText(Usage()),
            "Usage: flags_test [flags] FILE\n\nReads FILE.\n\nFlags:\n"
            "  --flags-test-listen\n      Where to listen. (default: \"127.0.0.1:1\")\n"
            "  --flags-test-verbose\n      Say more. (default: false)\n"
            "  --flags-test-workers\n      How many workers. (default: 4)\n"
            "  --help\n      Print this help and exit.\n"
            "\nExit codes: 0 fine.\n");
  ProgramUsage elsewhere = Usage();
  elsewhere.flags_file = "another/file.cc";
  elsewhere.epilogue.clear();
  EXPECT_FALSE(absl::StrContains(UsageText(elsewhere), "flags-test"));
  EXPECT_TRUE(absl::EndsWith(UsageText(elsewhere), "Print this help and exit.\n"));
}

TEST(Flags, ReadsDashedOrUnderscoredNamesAndKeepsPositionals) {
  EXPECT_EQ(Parse({"a", "--flags-test-listen=0.0.0.0:2", "--flags_test_workers", "9",
                   "--flags-test-verbose", "-", "b"}),
            (std::vector<std::string>{"a", "-", "b"}));
  EXPECT_EQ(absl::GetFlag(FLAGS_flags_test_listen), "0.0.0.0:2");
  EXPECT_EQ(absl::GetFlag(FLAGS_flags_test_workers), 9);
  EXPECT_TRUE(absl::GetFlag(FLAGS_flags_test_verbose));
  // "no" before a boolean's name sets it false; after "--" everything is positional.
  EXPECT_EQ(Parse({"--flags-test-verbose", "--noflags-test-verbose", "--",
                   "--flags-test-workers=1"}),
            (std::vector<std::string>{"--flags-test-workers=1"}));
  EXPECT_FALSE(absl::GetFlag(FLAGS_flags_test_verbose));
  EXPECT_EQ(absl::GetFlag(FLAGS_flags_test_workers), 4);
}

TEST(FlagsDeathTest, AFlagItCannotReadEndsTheProgramWithStatus2) {
  EXPECT_EXIT(Parse({"--flags-test-colour=red"}), ::testing::ExitedWithCode(2),
              "unknown flag --flags-test-colour\nSee --help");
  EXPECT_EXIT(Parse({"--flags-test-workers=many"}), ::testing::ExitedWithCode(2),
              "bad value for --flags-test-workers: ");
  EXPECT_EXIT(Parse({"--flags-test-workers"}), ::testing::ExitedWithCode(2),
              "flag --flags-test-workers needs a value");
}

// --help prints to stdout, which the child sends to stderr for the death test to read.
TEST(FlagsDeathTest, HelpPrintsTheUsageAndExitsZero) {
  for (const char* help : {"--help", "-h"}) {
    EXPECT_EXIT(
        {
          dup2(STDERR_FILENO, STDOUT_FILENO);
          Parse({"a", help, "--flags-test-colour"});
        },
        ::testing::ExitedWithCode(0), "Usage: flags_test \\[flags\\] FILE\n")
        << help;
  }
}

}  // namespace
}  // namespace gpuest::common
