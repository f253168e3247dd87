#pragma once

#include <spdlog/logger.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/dtype.h"
#include "core/message.h"
#include "core/status.h"

namespace zen::ops {

using Clock = std::chrono::steady_clock;
using ByteVector = std::vector<uint8_t>;

// One read-only byte range: a per-peer send buffer of alltoallv.
struct ConstBytes {
  const void* data = nullptr;
  size_t size = 0;
};

// Payload bytes this rank sent to / received from each peer since the last reset: what the
// benchmarks report as wire bytes. Frame headers, handshakes and the count exchange of the
// v-collectives are not included. allreduce counts the ring's bytes (2(n-1)/n of the buffer
// per rank), reducescatter the ring's (every block but one's own), and broadcast a flat
// fan-out from the root on every backend, MPI included, whose internal algorithm is not
// visible to us.
struct TransportCounters {
  std::vector<uint64_t> bytesSent;      // indexed by peer rank
  std::vector<uint64_t> bytesReceived;  // indexed by peer rank
  uint64_t totalSent() const;
  uint64_t totalReceived() const;
};

// What every backend needs besides its own addressing.
struct TransportOptions {
  int rank = 0;
  int size = 1;
  double timeoutSeconds = 30.0;            // bound on every blocking call (Config::timeoutSeconds)
  std::shared_ptr<spdlog::logger> logger;  // null: a warn-level logger for this rank

  static TransportOptions fromConfig(const Config& config);
};

// The data plane's point-to-point and collective primitives (CONVENTIONS.md §4), over
// rank-addressed byte buffers. Contract shared by every backend:
// - Calls block until done or until timeoutSeconds() has passed for the whole call: then
//   kTimeout, naming the peer that did not answer. A peer whose process or connection is
//   gone gives kIoError naming it (the MPI backend: see mpi_transport.h).
// - Collectives are called by every rank in the same order. A Transport is driven by one
//   thread at a time; counters() may be read from any thread.
// - After a kTimeout or kIoError the transport's state is unknown (gloo's rule): every later
//   call returns kAborted with the first error, and peers waiting on this rank are told as
//   soon as the backend can. Rebuild the transport to continue. Argument errors
//   (kInvalidArgument) do not break it.
// - Sizes are size_t end to end; messages of several GB are fine.
// - subset() makes a transport over some of the ranks (a process set); its rules are there.
class Transport {
 public:
  // User tags for send/recv; the message backends tag their collectives above this. Both fit
  // the 15 bits MPI guarantees for MPI_TAG_UB.
  static constexpr uint32_t kMaxUserTag = (1u << 14) - 1;
  // The largest process set id subset() takes: the message backends give each set its own
  // tag space by putting its id in the upper 16 bits of a message's 32-bit tag.
  static constexpr int32_t kMaxProcessSetId = 0xffff;

  virtual ~Transport() = default;
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  double timeoutSeconds() const { return timeoutSeconds_; }
  virtual const char* backendName() const = 0;

  // One message to / from a peer (not this rank). recv must name the exact byte count; a
  // different size from the peer is a kIoError. Zero bytes is a valid message.
  Status send(int peer, const void* data, size_t bytes, uint32_t tag = 0);
  Status recv(int peer, void* data, size_t bytes, uint32_t tag = 0);
  // Sends `bytes` to rank `to` while receiving rank `from`'s message, of whatever size it
  // sent, into *received: both directions overlap (MPI_Sendrecv's role) and only these ranks
  // take part. -1 skips a direction; `to` and `from` may be the same peer. The peer's side
  // is its own sendRecv with the same tag (the MPI backend sends the size first).
  Status sendRecv(
      int to, const void* data, size_t bytes, int from, ByteVector* received, uint32_t tag = 0);

  // sends[p] goes to rank p (sends.size() == size()); (*received)[p] becomes what rank p sent
  // here, (*received)[rank()] a copy of sends[rank()]. Every pair exchanges a message, empty
  // ones included, so both sides agree on the count.
  Status alltoallv(const std::vector<ConstBytes>& sends, std::vector<ByteVector>* received);
  // Every rank contributes `bytes` (0 allowed); (*gathered)[p] becomes rank p's buffer.
  Status allgatherv(const void* data, size_t bytes, std::vector<ByteVector>* gathered);
  // In-place reduction of `count` elements by `op` (kSum, kMin, kMax or kProduct; kAverage is
  // the caller's sum then divide, refused here); every rank gets identical bits. 16-bit floats
  // are reduced in fp32 and rounded once; int32 and int64 sums and products wrap like two's
  // complement.
  Status allreduce(void* data, size_t count, DataType dtype, ReduceOp op = ReduceOp::kSum);
  // In-place reduce-scatter: data holds size() blocks back to back, block p of counts[p]
  // elements (counts.size() == size(), 0 allowed); afterwards block rank() holds the reduction
  // by `op` (as allreduce's: kSum, kMin, kMax or kProduct, 16-bit floats in fp32 rounded once)
  // of every rank's block rank(), and the other blocks are scratch. Every rank passes the same
  // counts and dtype.
  Status reducescatter(void* data,
                       const std::vector<size_t>& counts,
                       DataType dtype,
                       ReduceOp op = ReduceOp::kSum);
  // The root's `bytes` overwrite everyone's buffer; every rank passes the same size.
  Status broadcast(void* data, size_t bytes, int root);
  Status barrier();

  TransportCounters counters() const;
  void resetCounters();

  // A transport over process set `setId`'s ranks (core/message.h "Process sets"): members are
  // ranks of this transport (the job's ranks when called on the job's transport), ascending,
  // this rank among them; in it rank() is this rank's position in members and size() is
  // members.size(); every collective and point-to-point call keeps this class's contract, over
  // the members only, with this transport's timeout. kInvalidArgument, this transport
  // unharmed, for an empty, unordered or out-of-range member list, one without this rank, or
  // a setId outside [1, kMaxProcessSetId]. The rules:
  // - Only the members call it, once per set, and members of several sets create them in the
  //   same order (the daemon registers sets in the plan's global order). In-process and TCP
  //   subsets are local views over this transport's connections; MPI creates a communicator,
  //   collective over the members and bounded by the timeout (kTimeout names a missing one).
  // - This transport must outlive its subsets, and it and its subsets are driven by one
  //   thread at a time (the daemon's background thread drives them all).
  // - Messages of different sets, and of this transport, between the same two ranks are never
  //   matched with each other, in whatever order they interleave: each set id has its own tag
  //   space (MPI: its own communicator), so two sets with the same members but different ids
  //   are separate too. Collectives still run in one order on every member, as always.
  // - A subset's counters are indexed by rank within the set and count its own payload once;
  //   this transport's counters do not include it.
  // - One failure for the family: a kTimeout or kIoError in a subset aborts this transport
  //   too (the message backends share its connections), and once this transport or any of
  //   its subsets failed, every call on all of them returns kAborted with the first error.
  // - A subset of a subset works the same way, its members being ranks of that subset.
  Result<std::unique_ptr<Transport>> subset(const std::vector<int32_t>& members, int32_t setId);
  // 0 for the job's transport, the set's id for a subset.
  int32_t processSet() const { return processSet_; }

  // Gives the family up from outside a call, as a kTimeout or kIoError inside one would: this
  // rank's data plane broke elsewhere (a staged bucket's device copy) while peers may wait on
  // it. Records `why` as the family's failure unless there is one, and aborts: every backend
  // tells the peers at once (MPI: every rank of the job, ops/mpi_abort_channel.h). Later calls
  // return kAborted. The driving thread only.
  void failAll(const Status& why);

 protected:
  Transport(int rank, int size, double timeoutSeconds);

  virtual Status doSend(int peer, const void* data, size_t bytes, uint32_t tag) = 0;
  virtual Status doRecv(int peer, void* data, size_t bytes, uint32_t tag) = 0;
  virtual Status doSendRecv(
      int to, const void* data, size_t bytes, int from, ByteVector* received, uint32_t tag) = 0;
  virtual Status doAlltoallv(const std::vector<ConstBytes>& sends,
                             std::vector<ByteVector>* received) = 0;
  virtual Status doAllgatherv(const void* data,
                              size_t bytes,
                              std::vector<ByteVector>* gathered) = 0;
  virtual Status doAllreduce(void* data, size_t count, DataType dtype, ReduceOp op) = 0;
  virtual Status doReducescatter(void* data,
                                 const std::vector<size_t>& counts,
                                 DataType dtype,
                                 ReduceOp op) = 0;
  virtual Status doBroadcast(void* data, size_t bytes, int root) = 0;
  virtual Status doBarrier() = 0;
  // subset() after its checks: a transport over `members` (ranks of this transport, ascending,
  // this rank among them), with set id `setId`. subset() then links it to this one's family.
  virtual Result<std::unique_ptr<Transport>> doSubset(const std::vector<int32_t>& members,
                                                      int32_t setId) = 0;
  // Called once, on the first kTimeout/kIoError (`why`): tell peers (close connections) so
  // they do not wait out their own timeouts, and stop touching the caller's buffers.
  virtual void abort(const Status& why) { (void)why; }

  Clock::time_point deadline() const;
  void countSent(int peer, size_t bytes);
  void countReceived(int peer, size_t bytes);
  // Rank `rank` of this transport as the job numbers it (itself outside subsets).
  int jobRank(int rank) const;
  // This rank for error messages: "rank 5", in a subset "rank 5 (process set 2)".
  std::string who() const;

 private:
  // Runs one call unless the family already failed; remembers its failure.
  template <typename Fn>
  auto guarded(Fn&& fn) -> decltype(fn());
  // Records the family's first failure and aborts this transport and the job's.
  void fail(const Status& why);

  const int rank_;
  const int size_;
  const double timeoutSeconds_;
  Transport* root_ = this;  // the job's transport, which holds the family's failure
  int32_t processSet_ = 0;
  std::vector<int32_t> jobRanks_;  // a subset's members as job ranks; empty outside subsets
  Status failure_;  // the root's: the family's first error; touched only by the driving thread
  std::unique_ptr<std::atomic<uint64_t>[]> sent_;
  std::unique_ptr<std::atomic<uint64_t>[]> received_;
};

// A wire collective as a timeline phase, named after the backend as Horovod's MPI_ALLREDUCE:
// IN_PROCESS_ALLREDUCE, TCP_ALLGATHER, MPI_REDUCESCATTER.
std::string wirePhaseName(const Transport& transport, const char* op);

}  // namespace zen::ops
