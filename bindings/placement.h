#pragma once

// Where a rank sits in the job (Horovod's rank, local and cross placement) and whether the
// job's hosts all run as many ranks (is_homogeneous).

#include <string>

#include "core/config.h"
#include "core/runtime.h"
#include "core/status.h"
#include "ops/transport.h"

namespace zen::bindings {

// Where this process sits in the job.
struct Placement {
  int rank = 0;
  int size = 1;
  int localRank = 0;
  int localSize = 1;
  int crossRank = 0;
  int crossSize = 1;
  LaunchFacts launch;   // homogeneous hosts, MPI threads (Runtime::launch())
  std::string backend;  // "tcp", "mpi", "in-process"
};

// Placement from Config and the runtime's rank and size: ZEN_LOCAL_* (zenrun), the MPI
// launcher's local placement, else one host.
Placement placementFor(const Config& config, int rank, int size, std::string backend);

// Whether every rank's local size (placementFor) is the same, i.e. every host runs as many
// ranks: one allreduce of the local sizes over `control` while the ranks connect, before the
// runtime takes the transport over, so every rank gets the same answer once (as Horovod
// computes it at init) and the query needs no collective. Every rank of the transport calls it.
Result<bool> hostsHomogeneous(const Config& config, ops::Transport& control);

}  // namespace zen::bindings
