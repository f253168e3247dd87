#pragma once

// The assembly of a Runtime from Config (ARCHITECTURE.md, bindings/): which transports carry
// the control channel and the data plane, and the controller and executor over them. Each
// runtime has TWO transports of the same backend, one per plane, so control messages and
// data never interleave (docs/architecture.md "Control and data planes").
//
// Where rank and size come from (backendFor):
// - ZEN_RANK / ZEN_SIZE (zenrun, or set by hand): TCP. Rank 0 accepts the control mesh at
//   ZEN_CONTROLLER_ADDR (host:port) and the data mesh at host:port+1 (ephemeral when the
//   control port is 0); it tells the other ranks the data port over the control transport.
// - otherwise the MPI launcher's environment (OMPI_COMM_WORLD_RANK/SIZE, PMI_RANK/SIZE): MPI,
//   two duplicates of MPI_COMM_WORLD; MPI is initialized (MPI_THREAD_SERIALIZED: the
//   background thread drives it) and finalized with the runtime unless the program did it.
// - neither: a single rank (size 1, no network).
// Tests run ranks as threads with createInProcessRuntime.

#include <spdlog/logger.h>

#include <cstdint>
#include <functional>
#include <memory>

#include "core/config.h"
#include "core/runtime.h"
#include "ops/inprocess_transport.h"
#include "ops/transport.h"

namespace zen::bindings {

enum class Backend { kInProcess, kTcp, kMpi };
const char* backendName(Backend backend);
Backend backendFor(const Config& config);

// Builds the runtime the environment describes (see above).
Result<std::unique_ptr<Runtime>> createRuntime(const Config& config,
                                               std::shared_ptr<spdlog::logger> logger = nullptr);

// TCP with rank and size from ZEN_RANK / ZEN_SIZE. onControlListening (rank 0): called with
// the control port once it is bound, for a ZEN_CONTROLLER_ADDR with port 0 (tests).
Result<std::unique_ptr<Runtime>> createTcpRuntime(
    const Config& config,
    std::function<void(uint16_t port)> onControlListening = {},
    std::shared_ptr<spdlog::logger> logger = nullptr);

// MPI over MPI_COMM_WORLD (kUnimplemented in a build without MPI).
Result<std::unique_ptr<Runtime>> createMpiRuntime(const Config& config,
                                                  std::shared_ptr<spdlog::logger> logger = nullptr);

// Ranks as threads of one process: one hub per plane, shared by the job's ranks.
struct InProcessJob {
  std::shared_ptr<ops::InProcessHub> control;
  std::shared_ptr<ops::InProcessHub> data;
  int size = 1;

  static InProcessJob make(int size);
};
// Returns without waiting for the other ranks; the first cycle meets them.
Result<std::unique_ptr<Runtime>> createInProcessRuntime(
    const Config& config,
    int rank,
    const InProcessJob& job,
    std::shared_ptr<spdlog::logger> logger = nullptr);

// The common tail: channel, negotiator and executor over the two transports: the CPU
// executor, paired in a CUDA build with the CUDA executor for GPU tensors
// (cuda/dispatch_executor.h; a build without CUDA refuses GPU tensors at enqueue). launch:
// what the factory learned while connecting (TCP and MPI compare the ranks' local sizes,
// bindings/placement.h; in-process ranks, which connect only in the first cycle, are one host).
Result<std::unique_ptr<Runtime>> assembleRuntime(const Config& config,
                                                 std::unique_ptr<ops::Transport> control,
                                                 std::unique_ptr<ops::Transport> data,
                                                 std::shared_ptr<spdlog::logger> logger,
                                                 std::function<void()> finalizer = {},
                                                 LaunchFacts launch = {});

}  // namespace zen::bindings
