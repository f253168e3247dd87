#pragma once

// Host-side logic of the NCCL backend (cuda/nccl_comm.cc) in plain C++ without CUDA or NCCL
// headers, so test/cuda_host checks it on every machine: the bounded poll loop, the checks of
// v-collective segment sizes, the byte accounting (ops::TransportCounters' rules), and the
// check of the loaded NCCL's version against the headers', the requests that end a
// communicator.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "core/status.h"
#include "cuda/bounded_wait.h"
#include "ops/transport.h"

namespace zen::cuda {

// bounded_wait.h's pollUntil with "rank R: <what>" as the operation's name: kTimeout "rank R:
// <what> did not complete within T s". `poll` fills *failure when it returns kFailed.
Status pollWithDeadline(const std::function<PollState(Status* failure)>& poll,
                        double timeoutSeconds,
                        int rank,
                        const char* what);

// alltoallv: both size vectors must have `size` entries and the own segments must match.
Status checkAlltoallvSizes(int size,
                           int rank,
                           const std::vector<size_t>& sendSizes,
                           const std::vector<size_t>& recvSizes);
// allgatherv: `size` receive segments, the own one exactly sendBytes.
Status checkAllgathervSizes(int size,
                            int rank,
                            size_t sendBytes,
                            const std::vector<size_t>& recvSizes);

// Payload bytes per peer of one call on rank `rank` of `size` (added to the counters).
struct PeerBytes {
  std::vector<uint64_t> sent;
  std::vector<uint64_t> received;
};
// Every peer's segment except the own one.
PeerBytes alltoallvBytes(int size,
                         int rank,
                         const std::vector<size_t>& sendSizes,
                         const std::vector<size_t>& recvSizes);
PeerBytes allgathervBytes(int size,
                          int rank,
                          size_t sendBytes,
                          const std::vector<size_t>& recvSizes);
// A ring: 2 (n - 1) / n of the buffer sent to rank + 1 and received from rank - 1 (the
// remainder of the division spread over the first chunks, so sizes add up exactly).
PeerBytes allreduceBytes(int size, int rank, size_t bytes);
// A ring reduce-scatter of size() equal blocks of `bytesPerRank`: every block but the own one,
// (n - 1) / n of the buffer, sent to rank + 1 and received from rank - 1 (half an allreduce).
PeerBytes reducescatterBytes(int size, int rank, size_t bytesPerRank);
// A flat fan-out: the root sends `bytes` to every peer, the others receive them from it.
PeerBytes broadcastBytes(int size, int rank, size_t bytes, int root);

// An NCCL version code (NCCL_VERSION_CODE, ncclGetVersion) split up. nccl.h's NCCL_VERSION
// encodes major * 1000 + minor * 100 + patch before 2.9 and major * 10000 + minor * 100 +
// patch since, so a code under 10000 is the old encoding.
struct NcclVersion {
  int major = 0;
  int minor = 0;
  int patch = 0;
  std::string toString() const;  // "2.28.9"
};
NcclVersion decodeNcclVersion(int code);

// The oldest NCCL Zen's calls need: 2.14 brought ncclCommInitRankConfig with a non-blocking
// ncclConfig_t and ncclCommFinalize. A library older than the headers but not than this is
// fine: NCCL reads only the prefix of a newer ncclConfig_t that it knows (its size field).
inline constexpr int kLeastNcclVersion = 21400;

// The NCCL library loaded at run time (`loadedCode`, ncclGetVersion) against the headers Zen
// was built with (`builtCode`, NCCL_VERSION_CODE): kFailedPrecondition naming both when the
// loaded one is older than kLeastNcclVersion or of another major version. An older one than
// the headers is not refused: a GPU machine's framework (torch's NCCL wheel) decides which
// libnccl a process loads.
Status checkNcclVersion(int loadedCode, int builtCode);

// Every rank's loaded libnccl (index = rank; 0: that rank could not read it) against the
// headers: the lowest rank that checkNcclVersion refuses (or that has no version), named with
// its version; else, when two ranks load different versions, those two. NCCL refuses them too,
// but only inside ncclCommInitRank (ncclInvalidUsage, "Mismatched NCCL version", any
// difference, patch included), after every rank has joined it: here every rank reaches the same
// verdict before any NCCL call. kFailedPrecondition.
Status checkNcclVersions(const std::vector<int>& loadedByRank, int builtCode);

// Collective over the control channel, before the unique id: each rank's loaded version and
// whether its own setup (`local`: pinned buffers) failed go to every rank (an allgatherv of 8
// bytes plus the error's message), then the lowest rank whose setup failed is named, else
// checkNcclVersions. A rank failing alone would leave its peers in the id's broadcast or in
// ncclCommInitRank until their timeout; this way they all fail at once, naming it. A transport
// failure is returned as is.
Status agreeOnNcclSetup(ops::Transport& bootstrap,
                        const Status& local,
                        int loadedCode,
                        int builtCode);

// Collective: rank 0's NCCL unique id (`id`, `idBytes`: ncclUniqueId), or, when `made` (its
// ncclGetUniqueId's result, rank 0's only) failed, that failure, to every rank (one broadcast of
// a flag and the id, which carries the message's start instead): a peer would otherwise join
// ncclCommInitRank with an empty id and wait there until its timeout. Rank 0 returns `made`.
Status shareNcclUniqueId(ops::Transport& bootstrap, const Status& made, void* id, size_t idBytes);

// Requests to end a communicator, made from any thread (NcclComm::requestAbort, requestFail),
// acted on by its driving thread. The first reason wins, with one exception: a request to
// fail only (an input that never became ready, so the stream waits behind the framework's
// kernel) turns a pending abort into a fail, keeping the abort's reason: ncclCommAbort frees
// memory, which waits for every kernel on the device, that one too, and would block the
// driving thread for good (NVIDIA/nccl#829). A fail is never turned into an abort.
class EndRequest {
 public:
  enum class Kind { kNone, kAbort, kFail };

  void request(const Status& why, Kind kind);
  // Cheap, for the polling loops.
  bool pending() const { return pending_.load(std::memory_order_acquire); }
  // The request now (kNone when none), its reason in *why.
  Kind current(Status* why) const;

 private:
  std::atomic<bool> pending_{false};
  mutable std::mutex mu_;
  Status why_;               // guarded by mu_
  Kind kind_ = Kind::kNone;  // guarded by mu_
};

}  // namespace zen::cuda
