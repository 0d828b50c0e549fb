// server/logging: the one rule every message passes on its way to a line. The last test
// writes through the real logger, as the server sets it up, into a file.
#include "server/logging.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "spdlog/spdlog.h"

namespace gpuest::server {
namespace {

TEST(EscapeForLog, ControlCharactersAndBackslashesBecomeEscapesOnOneLine) {
  EXPECT_EQ(EscapeForLog("node a\n2026-11-28T00:00:00.000 E forged"),
            "node a\\n2026-11-28T00:00:00.000 E forged");
  EXPECT_EQ(EscapeForLog("a\\nb"), "a\\\\nb");  // A written "\n" stays two characters.
  EXPECT_EQ(EscapeForLog("\r\t\x1b[31mred\x7f"), "\\r\\t\\x1b[31mred\\x7f");
  EXPECT_EQ(EscapeForLog(std::string("nul\0here", 8)), "nul\\x00here");
}

TEST(EscapeForLog, PrintableUtf8StaysAndWhatIsNotUtf8IsWrittenAsBytes) {
  EXPECT_EQ(EscapeForLog("Gr\xc3\xbc\xc3\x9f"
                         "e \xe2\x9c\x93 \xf0\x9f\x98\x80"),
            "Gr\xc3\xbc\xc3\x9f"
            "e \xe2\x9c\x93 \xf0\x9f\x98\x80");
  EXPECT_EQ(EscapeForLog("\xff\xfe"), "\\xff\\xfe");
  EXPECT_EQ(EscapeForLog("cut \xe2\x9c"), "cut \\xe2\\x9c");
  EXPECT_EQ(EscapeForLog("\xc0\x8a"), "\\xc0\\x8a");  // An overlong newline.
  EXPECT_EQ(EscapeForLog("csi \xc2\x9b"
                         "2J"),
            "csi \\xc2\\x9b2J");  // C1 control.
}

TEST(CutForLog, ALongMessageIsCutAtACharacterAndCounted) {
  EXPECT_EQ(CutForLog("short", 10), "short");
  EXPECT_EQ(CutForLog("abc\xe2\x9c\x93xyz", 5), "abc... (6 more bytes not logged)");
  EXPECT_EQ(CutForLog(std::string(10000, 'x')).size(),
            kMaxLogMessageBytes + std::string("... (5904 more bytes not logged)").size());
}

// The logger SetUpLogging installs, writing to a file in place of stderr.
std::string LoggedLines(const std::string& format, const std::string& message) {
  const std::string path =
      ::testing::TempDir() + "/logging_" + std::to_string(getpid()) + "_" + format;
  const int saved = dup(STDERR_FILENO);
  const int file = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  dup2(file, STDERR_FILENO);
  EXPECT_TRUE(SetUpLogging("info", format).ok());
  spdlog::warn("extender: pod {}: passed unjudged", message);
  spdlog::default_logger()->flush();
  spdlog::drop("gpuest");
  dup2(saved, STDERR_FILENO);
  close(saved);
  close(file);
  std::stringstream text;
  text << std::ifstream(path).rdbuf();
  std::remove(path.c_str());
  return text.str();
}

TEST(SetUpLogging, APeersTextIsOneLineInEitherFormat) {
  const std::string hostile =
      "ml/a\n2026-11-28T00:00:00.000 E forged\x1b[2J" + std::string(20000, 'y');
  for (const std::string format : {"text", "json"}) {
    const std::string lines = LoggedLines(format, hostile);
    const std::vector<std::string> each = absl::StrSplit(lines, '\n', absl::SkipEmpty());
    ASSERT_EQ(each.size(), 1u) << format << ": " << lines.substr(0, 300);
    EXPECT_LT(each[0].size(), 4500u) << format;
    EXPECT_TRUE(absl::StrContains(each[0], "more bytes not logged")) << format;
    EXPECT_FALSE(absl::StrContains(each[0], "\x1b")) << format;
  }
}

}  // namespace
}  // namespace gpuest::server
