// Forked TCP ranks running a Runtime each (test/runtime/fork_ranks.h).
#include "test/runtime/fork_ranks.h"

#include <cstdio>

#include "bindings/runtime_factory.h"

namespace zen::testing {

std::vector<ProcessEnd> forkRuntimeRanks(int n,
                                         const std::map<std::string, std::string>& env,
                                         double limitSeconds,
                                         const std::function<int(Runtime&)>& body) {
  auto child = [&](int rank, const std::string& address, std::function<void(uint16_t)> report) {
    std::map<std::string, std::string> vars = env;
    vars["ZEN_RANK"] = std::to_string(rank);
    vars["ZEN_SIZE"] = std::to_string(n);
    vars["ZEN_CONTROLLER_ADDR"] = address;
    vars["ZEN_SECRET"] = "fork-runtime-secret";
    Result<Config> config = Config::parse(vars);
    Result<std::unique_ptr<Runtime>> runtime =
        config.isOk() ? bindings::createTcpRuntime(config.value(), std::move(report))
                      : Result<std::unique_ptr<Runtime>>(config.status());
    if (!runtime.isOk()) {
      std::fprintf(stderr, "rank %d: %s\n", rank, runtime.status().toString().c_str());
      return 90;
    }
    return body(*runtime.value());
  };
  return ops::testing::forkRanks(n, limitSeconds, child);
}

}  // namespace zen::testing
