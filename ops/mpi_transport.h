#pragma once

#include <climits>
#include <cstddef>
#include <memory>

#include "ops/transport.h"

namespace zen::ops {

struct MpiOptions : TransportOptions {
  // Bytes per MPI call at most: counts and displacements are ints, so larger messages go in
  // several calls. Tests lower it to reach the chunked paths with small buffers.
  static constexpr size_t kDefaultMaxChunkBytes = size_t{1} << 30;
  size_t maxChunkBytes = kDefaultMaxChunkBytes;

  static MpiOptions fromConfig(const Config& config);
};

// A transport over a duplicate of MPI_COMM_WORLD (rank and size come from it; options.rank and
// options.size are ignored). MPI must already be initialized, with a thread level that allows
// the calling thread to use it (MPI_THREAD_SERIALIZED when that is not the thread that called
// MPI_Init). Collective: every rank calls it. Without ZEN_WITH_MPI: kUnimplemented.
//
// Failures under MPI, and where they differ from the other backends:
// - Timeouts: MPI has none, so every call is a nonblocking MPI operation polled with MPI_Test
//   against the deadline. A late peer gives kTimeout; the operation cannot be withdrawn
//   (only receives can be cancelled), so it stays posted and may still read or write the
//   caller's buffer. After a kTimeout, end the job (MPI_Abort) rather than reuse the buffers.
// - A failed rank: once this transport (or a subset) fails, a timeout, an MPI error or failAll,
//   every other rank of the job hears why through the MpiAbortChannel, and any call it is
//   waiting in returns kIoError "rank N aborted after an error (why)"; receives are then
//   cancelled, other operations stay posted as after a timeout.
// - A dead peer: Open MPI's runtime (mpirun/ORTE) notices the exited process and terminates
//   every other rank of the job (SIGTERM, then SIGKILL); MPI calls do not return an error
//   for it, so survivors never report the death. Only fault-tolerant MPI (ULFM) would.
// - subset: a communicator of the members (MPI_Comm_create_group on this one), freed with
//   the subset. Its creation is collective over the members only; they meet first with
//   point-to-point messages polled against the deadline, so a member that never comes gives
//   kTimeout naming it instead of a hang.
Result<std::unique_ptr<Transport>> createMpiTransport(const MpiOptions& options);

}  // namespace zen::ops
