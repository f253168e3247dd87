#pragma once

// A TCP job of real processes for the runtime tests: forks n ranks on 127.0.0.1, each building
// its Runtime with bindings::createTcpRuntime (rank 0 on an ephemeral control port, reported
// through a pipe before the others start; the data port travels over the control channel).
// Call before any MPI initialization; every wait is bounded.

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/runtime.h"

namespace zen::testing {

struct RankEnd {
  int exitCode = -1;  // 90: the runtime could not be built
  int signal = 0;
  bool killedByHarness = false;
};

// body(runtime) runs in each child; its return value is the exit code. env holds the ZEN_*
// knobs (rank, size, address and secret are set here). Children still running after
// limitSeconds are killed.
std::vector<RankEnd> forkRuntimeRanks(int n,
                                      const std::map<std::string, std::string>& env,
                                      double limitSeconds,
                                      const std::function<int(Runtime&)>& body);

}  // namespace zen::testing
