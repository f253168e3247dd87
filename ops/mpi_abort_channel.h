#pragma once

#ifdef ZEN_HAVE_MPI

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

namespace zen::ops {

// Tells an MPI transport's ranks at once that one of them gave up, as closing its connections
// does on the message backends. MPI has no such signal: without it a rank's peers wait out
// their own timeouts in the operation they share with it.
//
// Each rank keeps one receive from any rank posted on a duplicate communicator of its own.
// announce() sends every other rank the reason; a rank polling while it waits sees it.
// Messages carry a token that rank 0 draws at creation. Open MPI reuses a freed
// communicator's context id and hands messages that arrive for a freed communicator to the
// next one with that id, so a late announcement to an earlier transport is told apart and
// dropped.
//
// Wire: 8 B token, then the reason's text (at most kMaxReasonBytes), to each other rank.
class MpiAbortChannel {
 public:
  static constexpr size_t kMaxReasonBytes = 1024;

  // Collective over `comm`'s ranks, unbounded like the MPI_Comm_dup it makes. `graceSeconds`
  // bounds how long the destructor lets announcements already sent finish.
  static Result<std::unique_ptr<MpiAbortChannel>> create(MPI_Comm comm, double graceSeconds);
  ~MpiAbortChannel();
  MpiAbortChannel(const MpiAbortChannel&) = delete;
  MpiAbortChannel& operator=(const MpiAbortChannel&) = delete;

  // Sends `why` to every other rank without waiting, once, and not at all when another rank's
  // announcement already arrived: that one reached every rank.
  void announce(const std::string& why);
  // kIoError "rank N aborted after an error (why)" (N as `comm` numbers it) once another
  // rank's announcement arrived, then the same on every call; ok before. Never blocks.
  Status poll();

 private:
  MpiAbortChannel(MPI_Comm comm, uint64_t token, double graceSeconds);
  void postReceive();

  MPI_Comm comm_;
  const uint64_t token_;
  const double graceSeconds_;
  std::vector<char> incoming_;
  MPI_Request receive_ = MPI_REQUEST_NULL;
  Status heard_;
  // The announcement and its sends; MPI reads the buffer until they complete.
  std::unique_ptr<std::vector<char>> outgoing_;
  std::vector<MPI_Request> sends_;
};

}  // namespace zen::ops

#endif  // ZEN_HAVE_MPI
