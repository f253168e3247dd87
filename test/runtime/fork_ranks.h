#pragma once

// A TCP job of real processes for the runtime tests: forks n ranks on 127.0.0.1
// (test/ops/transport_harness.h's forkRanks), each building its Runtime with
// bindings::createTcpRuntime (rank 0 on an ephemeral control port; the data port travels
// over the control channel). Call before any MPI initialization; every wait is bounded.

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/runtime.h"
#include "test/ops/transport_harness.h"

namespace zen::testing {

using ops::testing::ProcessEnd;

// body(runtime) runs in each child; its return value is the exit code (90: the runtime could
// not be built). env holds the ZEN_* knobs; rank, size, address and secret are set here.
// Children still running after limitSeconds are killed.
std::vector<ProcessEnd> forkRuntimeRanks(int n,
                                         const std::map<std::string, std::string>& env,
                                         double limitSeconds,
                                         const std::function<int(Runtime&)>& body);

}  // namespace zen::testing
