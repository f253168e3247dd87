#pragma once

#include <memory>

#include "ops/transport.h"

namespace zen::ops {

// Shared by the ranks of one in-process group (ranks as threads, for fast multi-rank tests and
// several Runtimes in one process).
class InProcessHub;
std::shared_ptr<InProcessHub> makeInProcessHub(int size);

// Joins `hub` as options.rank (each rank once; options.size must equal the hub's size).
Result<std::unique_ptr<Transport>> createInProcessTransport(std::shared_ptr<InProcessHub> hub,
                                                            const TransportOptions& options);

}  // namespace zen::ops
