#include "server/logging.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/json_guard.h"
#include "nlohmann/json.hpp"
#include "spdlog/pattern_formatter.h"
#include "spdlog/sinks/stdout_sinks.h"
#include "spdlog/spdlog.h"

namespace gpuest::server {
namespace {

// The length of the UTF-8 character that starts text, 0 when it does not start one
// (a stray continuation byte, a lead byte out of range, a cut sequence).
size_t Utf8Length(absl::string_view text) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(0);
  size_t length = 0;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
  }
  if (length == 0 || text.size() < length) return 0;
  for (size_t i = 1; i < length; ++i) {
    if ((byte(i) & 0xC0) != 0x80) return 0;
  }
  return length;
}

absl::string_view Payload(const spdlog::details::log_msg& msg) {
  return absl::string_view(msg.payload.data(), msg.payload.size());
}

// %* in a pattern: the message, cut, as a JSON string literal (nlohmann escapes the
// control characters and replaces what is not UTF-8).
class JsonMessageFlag final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    const std::string quoted =
        nlohmann::json(CutForLog(Payload(msg)))
            .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    dest.append(quoted.data(), quoted.data() + quoted.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<JsonMessageFlag>();
  }
};

// %& in a pattern: the message, cut and escaped to one line of printable text.
class TextMessageFlag final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    const std::string line = EscapeForLog(CutForLog(Payload(msg)));
    dest.append(line.data(), line.data() + line.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<TextMessageFlag>();
  }
};

}  // namespace

std::string CutForLog(absl::string_view message, size_t max_bytes) {
  if (message.size() <= max_bytes) return std::string(message);
  std::string cut = common::Utf8Prefix(message, max_bytes);
  absl::StrAppend(&cut, "... (", message.size() - cut.size(), " more bytes not logged)");
  return cut;
}

std::string EscapeForLog(absl::string_view message) {
  std::string out;
  out.reserve(message.size());
  for (size_t i = 0; i < message.size();) {
    const unsigned char c = static_cast<unsigned char>(message[i]);
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7F) {
      out += absl::StrFormat("\\x%02x", c);
    } else if (c < 0x80) {
      out += static_cast<char>(c);
    } else if (const size_t length = Utf8Length(message.substr(i));
               length == 0 ||
               (c == 0xC2 && static_cast<unsigned char>(message[i + 1]) < 0xA0)) {
      // Not UTF-8, or a C1 control (U+0080..U+009F: 0x9B is a terminal's CSI).
      const size_t bytes = length == 0 ? 1 : length;
      for (size_t j = 0; j < bytes; ++j) {
        out += absl::StrFormat("\\x%02x", static_cast<unsigned char>(message[i + j]));
      }
      i += bytes;
      continue;
    } else {
      out.append(message.data() + i, length);
      i += length;
      continue;
    }
    ++i;
  }
  return out;
}

absl::Status SetUpLogging(const std::string& level, const std::string& format) {
  const spdlog::level::level_enum lvl = spdlog::level::from_str(level);
  if (lvl == spdlog::level::off && level != "off") {
    return absl::InvalidArgumentError(
        absl::StrCat("log level '", level, "': want trace|debug|info|warn|error|off"));
  }
  auto logger = spdlog::stderr_logger_mt("gpuest");
  if (format == "json") {
    auto formatter = std::make_unique<spdlog::pattern_formatter>(
        spdlog::pattern_time_type::utc, spdlog::details::os::default_eol);
    formatter->add_flag<JsonMessageFlag>('*').set_pattern(
        R"({"time":"%Y-%m-%dT%H:%M:%S.%fZ","level":"%l","logger":"%n","msg":%*})");
    logger->set_formatter(std::move(formatter));
  } else if (format == "text") {
    auto formatter = std::make_unique<spdlog::pattern_formatter>();
    formatter->add_flag<TextMessageFlag>('&').set_pattern(
        "%Y-%m-%dT%H:%M:%S.%e %^%L%$ %&");
    logger->set_formatter(std::move(formatter));
  } else {
    spdlog::drop("gpuest");
    return absl::InvalidArgumentError(
        absl::StrCat("log format '", format, "': want text|json"));
  }
  logger->set_level(lvl);
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(std::move(logger));
  return absl::OkStatus();
}

}  // namespace gpuest::server
