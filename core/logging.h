#pragma once

#include <spdlog/spdlog.h>

#include <memory>
#include <string>

#include "core/status.h"

namespace zen {

// One logger per Runtime (no global registry entry), its pattern carrying the rank so the
// interleaved output of many ranks stays readable.
std::shared_ptr<spdlog::logger> makeLogger(int rank, const std::string& level);

// Parses "trace".."off" into spdlog's level.
Result<spdlog::level::level_enum> parseLogLevel(const std::string& level);

}  // namespace zen
