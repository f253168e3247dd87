// The runtime's assembly from Config: how many CPU threads the schemes get.
#include "bindings/runtime_factory.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>

#include <map>
#include <sstream>
#include <string>

#include "core/cpu_share.h"

namespace zen {
namespace {

// The debug line the assembly logs for a one-rank in-process runtime under `env`.
std::string assemblyLog(std::map<std::string, std::string> env) {
  auto config = Config::parse(env);
  EXPECT_TRUE(config.isOk()) << config.status().toString();
  std::ostringstream text;
  auto logger = std::make_shared<spdlog::logger>(
      "factory", std::make_shared<spdlog::sinks::ostream_sink_mt>(text));
  logger->set_level(spdlog::level::debug);
  auto runtime =
      bindings::createInProcessRuntime(config.value(), 0, bindings::InProcessJob::make(1), logger);
  EXPECT_TRUE(runtime.isOk()) << runtime.status().toString();
  if (runtime.isOk()) EXPECT_TRUE(runtime.value()->shutdown().isOk());
  return text.str();
}

// Unset, a rank's pool is its share of the host: the host's cores over ZEN_LOCAL_SIZE ranks
// (or what its affinity mask allows), not every core for every rank.
TEST(RuntimeFactory, CpuThreadsDefaultToTheRanksShareOfTheHost) {
  for (int local : {1, 2, 64}) {
    const std::string log = assemblyLog({{"ZEN_LOCAL_SIZE", std::to_string(local)}});
    EXPECT_NE(log.find(fmt::format("rank 0: {} CPU threads for the schemes (ZEN_THREADS 0)",
                                   cpuShareOfThisProcess(local))),
              std::string::npos)
        << log;
  }
  EXPECT_NE(assemblyLog({{"ZEN_LOCAL_SIZE", "64"}}).find("rank 0: 1 CPU threads"),
            std::string::npos);
}

TEST(RuntimeFactory, ZenThreadsIsTakenAsItIs) {
  const std::string log = assemblyLog({{"ZEN_THREADS", "3"}, {"ZEN_LOCAL_SIZE", "8"}});
  EXPECT_NE(log.find("rank 0: 3 CPU threads for the schemes (ZEN_THREADS 3)"), std::string::npos)
      << log;
}

}  // namespace
}  // namespace zen
