// Replays every seed of the fuzz corpora (tests/fuzz/corpus/<target>/) and every input
// a fuzzer ever crashed on (tests/fuzz/regressions/<target>/) through the properties
// the libFuzzer targets assert (tests/fuzz/fuzz_properties.h), in the normal build, so
// that a fixed crash stays fixed without clang or a fuzzing run.
#include <filesystem>
#include <functional>
#include <map>
#include <string>

#include "gtest/gtest.h"
#include "tests/fuzz/fuzz_properties.h"
#include "tests/support/server_process.h"

namespace gpuest {
namespace {

using Property = std::function<absl::Status(absl::string_view)>;

const std::map<std::string, Property>& Targets() {
  static const auto* targets = new std::map<std::string, Property>{
      {"description_json", fuzz::DescriptionTextProperties},
      {"summary_parser", fuzz::SummaryParserProperties},
      {"request_validation", fuzz::RequestValidationProperties},
      {"extender_args", fuzz::ExtenderArgsProperties},
      {"node_gpus", fuzz::NodeGpusProperties},
      {"admission_review", fuzz::AdmissionReviewProperties},
  };
  return *targets;
}

// Replays the files of one directory; the number replayed. A seed corpus must exist:
// a missing one would replay nothing and pass. A target may have no regressions yet.
int Replay(const std::string& dir, const Property& property, bool must_exist) {
  int replayed = 0;
  if (!std::filesystem::is_directory(dir)) {
    if (must_exist) ADD_FAILURE() << dir << " is missing: nothing would be replayed";
    return 0;
  }
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (!entry.is_regular_file()) continue;
    const std::string data = testing::ReadFileOrDie(entry.path().string());
    const absl::Status status = property(data);
    EXPECT_TRUE(status.ok()) << entry.path() << ": " << status;
    ++replayed;
  }
  return replayed;
}

TEST(FuzzCorpus, EverySeedHoldsItsTargetsProperties) {
  for (const auto& [target, property] : Targets()) {
    const int seeds =
        Replay(std::string(GPUEST_FUZZ_DIR) + "/corpus/" + target, property, true);
    EXPECT_GE(seeds, 5) << target << ": a seed corpus of at least five inputs";
  }
}

TEST(FuzzCorpus, EveryCrashFoundStaysFixed) {
  for (const auto& [target, property] : Targets()) {
    Replay(std::string(GPUEST_FUZZ_DIR) + "/regressions/" + target, property, false);
  }
}

}  // namespace
}  // namespace gpuest
