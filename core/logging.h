#pragma once

#include <spdlog/spdlog.h>

#include <memory>
#include <string>

#include "core/status.h"

namespace zen {

// One logger per Runtime (no global registry entry), its pattern carrying the rank so the
// interleaved output of many ranks stays readable; withTime = false leaves out the time of
// day (ZEN_LOG_HIDE_TIME: a launcher that stamps lines itself, or output compared across runs).
std::shared_ptr<spdlog::logger> makeLogger(int rank,
                                           const std::string& level,
                                           bool withTime = true);

// Parses "trace".."off" into spdlog's level.
Result<spdlog::level::level_enum> parseLogLevel(const std::string& level);

}  // namespace zen
