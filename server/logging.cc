#include "server/logging.h"

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "spdlog/pattern_formatter.h"
#include "spdlog/sinks/stdout_sinks.h"
#include "spdlog/spdlog.h"

namespace gpuest {
namespace {

// %* in a pattern: the message as a JSON string literal, escaped.
class JsonMessageFlag final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    const std::string quoted =
        nlohmann::json(std::string(msg.payload.data(), msg.payload.size()))
            .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    dest.append(quoted.data(), quoted.data() + quoted.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<JsonMessageFlag>();
  }
};

}  // namespace

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
    logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%L%$ %v");
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

}  // namespace gpuest
