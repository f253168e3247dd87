#include "core/logging.h"

#include <spdlog/sinks/stdout_color_sinks.h>

namespace zen {

Result<spdlog::level::level_enum> parseLogLevel(const std::string& level) {
  const auto parsed = spdlog::level::from_str(level);
  if (parsed == spdlog::level::off && level != "off") {
    return ZEN_ERROR(StatusCode::kInvalidArgument, "unknown log level '{}'", level);
  }
  return parsed;
}

std::shared_ptr<spdlog::logger> makeLogger(int rank, const std::string& level, bool withTime) {
  auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
  auto logger = std::make_shared<spdlog::logger>(fmt::format("zen.{}", rank), sink);
  logger->set_pattern(fmt::format("{}[zen {}] [%l] %v", withTime ? "[%H:%M:%S.%e] " : "", rank));
  auto parsed = parseLogLevel(level);
  logger->set_level(parsed.isOk() ? parsed.value() : spdlog::level::warn);
  return logger;
}

}  // namespace zen
