// The MPI backend over a duplicate of MPI_COMM_WORLD. Every call is a nonblocking MPI
// operation polled against the deadline (mpi_transport.h says what that can and cannot do).
// Bytes on the wire per rank (payload; MPI picks its own algorithms):
// - send/recv: B, in pieces of at most maxChunkBytes (same tag, so they stay in order).
// - sendRecv: an 8 B size, then B as send does, while the peer's size and message are
//   received; the size is not counted (as the v-collectives' counts).
// - alltoallv: to each peer p an 8 B size, then sends[p] as send does, all peers at once (one
//   round, no staging copies); the sizes are not counted.
// - allgatherv: the same with B to every peer.
// - allreduce: MPI_Iallreduce(SUM, MIN, MAX or PROD) in place, in chunks; 16-bit floats as
//   fp32, rounded once.
// - reducescatter: MPI_Ireduce_scatter with the blocks' counts, in rounds of at most C
//   elements of each block (staged when a block needs more than one round); 16-bit floats as
//   fp32.
// - broadcast: MPI_Ibcast in chunks; barrier: MPI_Ibarrier.
// - subset (a process set's communicator): 4 B from each member to the first and back, then
//   MPI_Comm_create_group; not counted.
// - a failure (the family's first): 8 B and the reason (at most 1 KiB) to every other rank of
//   the job, once, on the abort channel's communicator; not counted.
// Counters record the payload as the other backends would move it (ring allreduce, flat
// broadcast), so benchmarks compare like with like.
#include "ops/mpi_transport.h"

#ifdef ZEN_HAVE_MPI

#include <mpi.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "ops/mpi_abort_channel.h"
#include "ops/reduce.h"

namespace zen::ops {
namespace {

Status mpiError(int rc, const char* call, const std::string& who, const char* file, int line) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(rc, text, &length);
  return Status(StatusCode::kIoError,
                fmt::format("{}: {} failed: {}", who, call, std::string(text, length)), file, line);
}

#define ZEN_CHECK_MPI(call)                                           \
  do {                                                                \
    const int zen_mpi_rc_ = (call);                                   \
    if (zen_mpi_rc_ != MPI_SUCCESS) {                                 \
      return mpiError(zen_mpi_rc_, #call, who(), __FILE__, __LINE__); \
    }                                                                 \
  } while (0)

MPI_Datatype mpiType(DataType wire) {
  switch (wire) {
    case DataType::kFloat64:
      return MPI_DOUBLE;
    case DataType::kInt32:
      return MPI_INT32_T;
    case DataType::kInt64:
      return MPI_INT64_T;
    default:
      return MPI_FLOAT;
  }
}

// Products of int32/int64 go as MPI's unsigned types: the same bits as a two's-complement
// product that wraps, without relying on what the library does on signed overflow.
MPI_Datatype mpiReduceType(DataType wire, ReduceOp op) {
  if (op == ReduceOp::kProduct && wire == DataType::kInt32) return MPI_UINT32_T;
  if (op == ReduceOp::kProduct && wire == DataType::kInt64) return MPI_UINT64_T;
  return mpiType(wire);
}

MPI_Op mpiOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::kMin:
      return MPI_MIN;
    case ReduceOp::kMax:
      return MPI_MAX;
    case ReduceOp::kProduct:
      return MPI_PROD;
    case ReduceOp::kSum:
    case ReduceOp::kAverage:  // Transport::allreduce refuses it; averages are divided sums
    case ReduceOp::kAdasum:   // refused too: ops/adasum.h runs over send/recv
      break;
  }
  return MPI_SUM;
}

size_t ceilDiv(size_t a, size_t b) {
  return (a + b - 1) / b;
}

// The part of a `total`-byte buffer that round k of `chunk`-byte rounds carries.
int roundBytes(uint64_t total, size_t round, size_t chunk) {
  const uint64_t begin = static_cast<uint64_t>(round) * chunk;
  return begin >= total ? 0 : static_cast<int>(std::min<uint64_t>(chunk, total - begin));
}

class MpiTransport final : public Transport {
  // Above send/recv's tags, and the subset meeting's (kMaxUserTag + 1).
  static constexpr int kAlltoallvTag = kMaxUserTag + 2;
  static constexpr int kAllgathervTag = kMaxUserTag + 3;

 public:
  // `channel`: the job transport's, shared by its subsets (announcements name job ranks).
  MpiTransport(MPI_Comm comm,
               int rank,
               int size,
               const MpiOptions& options,
               std::shared_ptr<MpiAbortChannel> channel)
      : Transport(rank, size, options.timeoutSeconds),
        comm_(comm),
        maxChunkBytes_(std::max<size_t>(1, std::min<size_t>(options.maxChunkBytes, INT_MAX))),
        channel_(std::move(channel)) {}

  ~MpiTransport() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&comm_);
  }

  const char* backendName() const override { return "mpi"; }

 protected:
  Status doSend(int peer, const void* data, size_t bytes, uint32_t tag) override {
    std::vector<MPI_Request> requests;
    ZEN_RETURN_IF_ERROR(postSendPieces(data, bytes, peer, static_cast<int>(tag), &requests));
    ZEN_RETURN_IF_ERROR(wait(requests, "send", peer));
    countSent(peer, bytes);
    return Status::ok();
  }

  Status doRecv(int peer, void* data, size_t bytes, uint32_t tag) override {
    std::vector<MPI_Request> requests;
    ZEN_RETURN_IF_ERROR(postRecvPieces(data, bytes, peer, static_cast<int>(tag), &requests));
    ZEN_RETURN_IF_ERROR(waitPieces(requests, "recv", peer, bytes));
    countReceived(peer, bytes);
    return Status::ok();
  }

  // Both directions are posted before either is waited for; the received size comes first,
  // so the pieces can be posted into a buffer of that size.
  Status doSendRecv(int to,
                    const void* data,
                    size_t bytes,
                    int from,
                    ByteVector* received,
                    uint32_t tag) override {
    const int mpiTag = static_cast<int>(tag);
    std::vector<MPI_Request> sends;
    if (to >= 0) {
      sendSize_ = bytes;  // a member: MPI may read it after a timeout returned
      ZEN_RETURN_IF_ERROR(postSendPieces(&sendSize_, sizeof(uint64_t), to, mpiTag, &sends));
      ZEN_RETURN_IF_ERROR(postSendPieces(data, bytes, to, mpiTag, &sends));
    }
    if (from >= 0) {
      std::vector<MPI_Request> size;
      ZEN_RETURN_IF_ERROR(postRecvPieces(&recvSize_, sizeof(uint64_t), from, mpiTag, &size));
      ZEN_RETURN_IF_ERROR(waitPieces(size, "sendRecv (size)", from, sizeof(uint64_t)));
      const uint64_t incoming = recvSize_;
      received->resize(incoming);
      std::vector<MPI_Request> requests;
      ZEN_RETURN_IF_ERROR(postRecvPieces(received->data(), incoming, from, mpiTag, &requests));
      ZEN_RETURN_IF_ERROR(waitPieces(requests, "sendRecv", from, incoming));
      countReceived(from, incoming);
    }
    if (to >= 0) {
      ZEN_RETURN_IF_ERROR(wait(sends, "sendRecv", to));
      countSent(to, bytes);
    }
    return Status::ok();
  }

  Status doAlltoallv(const std::vector<ConstBytes>& sends,
                     std::vector<ByteVector>* received) override {
    return exchange(sends, received, kAlltoallvTag, "alltoallv");
  }

  Status doAllgatherv(const void* data, size_t bytes, std::vector<ByteVector>* gathered) override {
    const std::vector<ConstBytes> sends(size(), ConstBytes{data, bytes});
    return exchange(sends, gathered, kAllgathervTag, "allgatherv");
  }

  Status doAllreduce(void* data, size_t count, DataType dtype, ReduceOp op) override {
    if (size() == 1 || count == 0) return Status::ok();
    WireBuffer buffer(data, count, dtype);
    const DataType wire = buffer.dtype();
    const size_t width = dataTypeSize(wire);
    const size_t step = std::max<size_t>(1, maxChunkBytes_ / width);
    for (size_t begin = 0; begin < count; begin += step) {
      const int elements = static_cast<int>(std::min(step, count - begin));
      MPI_Request request;
      ZEN_CHECK_MPI(MPI_Iallreduce(MPI_IN_PLACE, buffer.data() + begin * width, elements,
                                   mpiReduceType(wire, op), mpiOp(op), comm_, &request));
      ZEN_RETURN_IF_ERROR(waitOne(request, "allreduce"));
    }
    buffer.narrow();
    const int n = size();
    const int left = (rank() - 1 + n) % n;
    countSent((rank() + 1) % n, ringAllreduceBytesSent(count, width, n, rank()));
    countReceived(left, ringAllreduceBytesSent(count, width, n, left));
    return Status::ok();
  }

  Status doReducescatter(void* data,
                         const std::vector<size_t>& counts,
                         DataType dtype,
                         ReduceOp op) override {
    const int n = size();
    const int me = rank();
    if (n == 1) return Status::ok();
    std::vector<size_t> begins = {0};
    for (size_t c : counts) begins.push_back(begins.back() + c);
    WireBuffer wireBuffer(data, begins.back(), dtype);
    const DataType wire = wireBuffer.dtype();
    uint8_t* buffer = wireBuffer.data();
    const size_t width = dataTypeSize(wire);
    // Round k carries elements [k·step, (k+1)·step) of every block: one round (no staging)
    // when every block fits, which is the usual case.
    const size_t step = std::max<size_t>(1, perRankChunk() / width);
    const size_t largest = *std::max_element(counts.begin(), counts.end());
    const size_t rounds = std::max<size_t>(1, ceilDiv(largest, step));
    std::vector<int> rc(n);
    for (size_t k = 0; k < rounds; ++k) {
      size_t total = 0;
      for (int p = 0; p < n; ++p) {
        const size_t begin = std::min(counts[p], k * step);
        rc[p] = static_cast<int>(std::min(step, counts[p] - begin));
        total += rc[p];
      }
      ByteVector staged;
      const uint8_t* send = buffer;
      if (rounds > 1) {
        staged.resize(total * width);
        size_t at = 0;
        for (int p = 0; p < n; ++p) {
          if (rc[p] > 0) {
            std::memcpy(staged.data() + at, buffer + (begins[p] + k * step) * width, rc[p] * width);
          }
          at += rc[p] * width;
        }
        send = staged.data();
      }
      ByteVector in(std::max<size_t>(1, rc[me] * width));
      MPI_Request request;
      ZEN_CHECK_MPI(MPI_Ireduce_scatter(send, in.data(), rc.data(), mpiReduceType(wire, op),
                                        mpiOp(op), comm_, &request));
      ZEN_RETURN_IF_ERROR(waitOne(request, "reducescatter", &staged, &in));
      if (rc[me] > 0) {
        std::memcpy(buffer + (begins[me] + k * step) * width, in.data(), rc[me] * width);
      }
    }
    wireBuffer.narrow();
    const int left = (me - 1 + n) % n;
    countSent((me + 1) % n, ringReducescatterBytesSent(counts, width, me));
    countReceived(left, ringReducescatterBytesSent(counts, width, left));
    return Status::ok();
  }

  Status doBroadcast(void* data, size_t bytes, int root) override {
    auto* base = static_cast<uint8_t*>(data);
    for (size_t begin = 0; begin < bytes; begin += maxChunkBytes_) {
      MPI_Request request;
      ZEN_CHECK_MPI(MPI_Ibcast(base + begin,
                               static_cast<int>(std::min(maxChunkBytes_, bytes - begin)), MPI_BYTE,
                               root, comm_, &request));
      ZEN_RETURN_IF_ERROR(waitOne(request, "broadcast"));
    }
    for (int p = 0; p < size(); ++p) {
      if (rank() == root && p != root) countSent(p, bytes);
    }
    if (rank() != root) countReceived(root, bytes);
    return Status::ok();
  }

  Status doBarrier() override {
    MPI_Request request;
    ZEN_CHECK_MPI(MPI_Ibarrier(comm_, &request));
    return waitOne(request, "barrier");
  }

  // MPI_Comm_create_group over the members (its tag only tells apart creations running at
  // once, which one driving thread never has); it has no timeout, so the members meet first.
  Result<std::unique_ptr<Transport>> doSubset(const std::vector<int32_t>& members,
                                              int32_t setId) override {
    ZEN_RETURN_IF_ERROR(meet(members, setId));
    MPI_Group all;
    MPI_Group group;
    ZEN_CHECK_MPI(MPI_Comm_group(comm_, &all));
    const std::vector<int> ranks(members.begin(), members.end());
    const int included = MPI_Group_incl(all, static_cast<int>(ranks.size()), ranks.data(), &group);
    MPI_Group_free(&all);
    ZEN_CHECK_MPI(included);
    MPI_Comm comm;
    const int created = MPI_Comm_create_group(comm_, group, setId & kMaxUserTag, &comm);
    MPI_Group_free(&group);
    ZEN_CHECK_MPI(created);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    int rank = 0;
    int size = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    MpiOptions options;
    options.timeoutSeconds = timeoutSeconds();
    options.maxChunkBytes = maxChunkBytes_;
    return std::unique_ptr<Transport>(new MpiTransport(comm, rank, size, options, channel_));
  }

  // The family failed: every rank of the job hears why at once, as the message backends' peers
  // do when their connections close (a rank that heard another's announcement stays quiet).
  void abort(const Status& why) override { channel_->announce(why.message()); }

 private:
  size_t pieces(size_t bytes) const { return std::max<size_t>(1, ceilDiv(bytes, maxChunkBytes_)); }
  // Per-pair bytes per round of the v-collectives: the round's total must fit an int.
  size_t perRankChunk() const {
    return std::max<size_t>(1, std::min<size_t>(maxChunkBytes_, INT_MAX / size()));
  }

  // The v-collectives, pairwise in one round (sendRecv's scheme with every peer at once): to
  // each peer its size (8 B) and then its bytes in pieces, from each peer its size and then,
  // into a buffer of that size, its pieces. MPI keeps one sender's messages of one tag in
  // order, so sizes and pieces match up, also across calls. The own part is copied. A failed
  // wait withdraws the receives; the sends stay posted (as any MPI send after a timeout).
  Status exchange(const std::vector<ConstBytes>& sends,
                  std::vector<ByteVector>* received,
                  int tag,
                  const char* op) {
    const int n = size();
    const int me = rank();
    // Members: MPI may still touch them after a failed call (the transport is dead by then).
    sizesOut_.assign(n, 0);
    sizesIn_.assign(n, 0);
    std::vector<MPI_Request> out;
    std::vector<MPI_Request> sizes;
    for (int p = 0; p < n; ++p) {
      if (p == me) continue;
      sizesOut_[p] = sends[p].size;
      ZEN_RETURN_IF_ERROR(postSendPieces(&sizesOut_[p], sizeof(uint64_t), p, tag, &out));
      ZEN_RETURN_IF_ERROR(postSendPieces(sends[p].data, sends[p].size, p, tag, &out));
      ZEN_RETURN_IF_ERROR(postRecvPieces(&sizesIn_[p], sizeof(uint64_t), p, tag, &sizes));
    }
    received->resize(n);
    const auto* own = static_cast<const uint8_t*>(sends[me].data);
    (*received)[me].assign(own, own + sends[me].size);
    ZEN_RETURN_IF_ERROR(withdrawOnFailure(sizes, wait(sizes, op, -1)));
    std::vector<MPI_Request> in;
    for (int p = 0; p < n; ++p) {
      if (p == me) continue;
      (*received)[p].resize(sizesIn_[p]);
      ZEN_RETURN_IF_ERROR(postRecvPieces((*received)[p].data(), sizesIn_[p], p, tag, &in));
    }
    std::vector<MPI_Status> statuses(in.size());
    ZEN_RETURN_IF_ERROR(withdrawOnFailure(in, wait(in, op, -1, &statuses)));
    const MPI_Status* status = statuses.data();  // peer p's pieces follow the peers before it
    for (int p = 0; p < n; ++p) {
      if (p == me) continue;
      ZEN_RETURN_IF_ERROR(checkPieces(status, op, p, sizesIn_[p]));
      status += pieces(sizesIn_[p]);
    }
    ZEN_RETURN_IF_ERROR(wait(out, op, -1));
    for (int p = 0; p < n; ++p) {
      if (p == me) continue;
      countSent(p, sends[p].size);
      countReceived(p, sizesIn_[p]);
    }
    return Status::ok();
  }

  // Polls until every request completed, the call's deadline passed, or another rank announced
  // that it gave up (kIoError naming it). Spins briefly, then sleeps between polls (up to 1 ms)
  // so oversubscribed ranks leave the cores to the others.
  Status wait(std::vector<MPI_Request>& requests,
              const char* op,
              int peer,
              std::vector<MPI_Status>* statuses = nullptr) {
    const auto until = deadline();
    auto pause = std::chrono::microseconds(20);
    for (int polls = 0;; ++polls) {
      ZEN_RETURN_IF_ERROR(channel_->poll());
      int done = 0;
      const int rc = MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done,
                                 statuses ? statuses->data() : MPI_STATUSES_IGNORE);
      if (rc != MPI_SUCCESS) return mpiError(rc, op, who(), __FILE__, __LINE__);
      if (done) return Status::ok();
      if (Clock::now() >= until) {
        const std::string late = peer >= 0 ? fmt::format("rank {} did not answer", jobRank(peer))
                                           : std::string("not every rank joined");
        return ZEN_ERROR(StatusCode::kTimeout, "{}: {} timed out after {} s: {}", who(), op,
                         timeoutSeconds(), late);
      }
      if (polls < 1000) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(pause);
        pause = std::min(pause * 2, std::chrono::microseconds(1000));
      }
    }
  }

  // Returns `status`; when it failed, first withdraws the receives still posted, so their
  // buffers are the caller's again.
  static Status withdrawOnFailure(std::vector<MPI_Request>& receives, Status status) {
    if (!status.isOk()) {
      for (MPI_Request& r : receives) {
        if (r != MPI_REQUEST_NULL) {
          MPI_Cancel(&r);
          MPI_Wait(&r, MPI_STATUS_IGNORE);
        }
      }
    }
    return status;
  }

  // Receives of `bytes` in maxChunkBytes_ pieces (one request each): when the wait fails they
  // are withdrawn, so the buffer is the caller's again; a piece of another size is a kIoError.
  Status waitPieces(std::vector<MPI_Request>& requests, const char* op, int peer, size_t bytes) {
    std::vector<MPI_Status> statuses(requests.size());
    ZEN_RETURN_IF_ERROR(withdrawOnFailure(requests, wait(requests, op, peer, &statuses)));
    return checkPieces(statuses.data(), op, peer, bytes);
  }

  // kIoError unless statuses[0, pieces(bytes)) received exactly the pieces of `bytes`.
  Status checkPieces(const MPI_Status* statuses, const char* op, int peer, size_t bytes) {
    for (size_t i = 0; i < pieces(bytes); ++i) {
      int got = 0;
      MPI_Get_count(&statuses[i], MPI_BYTE, &got);
      if (got != roundBytes(bytes, i, maxChunkBytes_)) {
        return ZEN_ERROR(StatusCode::kIoError,
                         "{}: {}: rank {} sent a different size than the {} bytes expected", who(),
                         op, jobRank(peer), bytes);
      }
    }
    return Status::ok();
  }

  // Appends one MPI_Isend (MPI_Irecv) per maxChunkBytes_ piece of `bytes` at `data` to
  // *requests; an empty message is one empty piece.
  Status postSendPieces(
      const void* data, size_t bytes, int peer, int tag, std::vector<MPI_Request>* requests) {
    const auto* base = static_cast<const uint8_t*>(data);
    for (size_t i = 0; i < pieces(bytes); ++i) {
      requests->emplace_back();
      ZEN_CHECK_MPI(MPI_Isend(base + i * maxChunkBytes_, roundBytes(bytes, i, maxChunkBytes_),
                              MPI_BYTE, peer, tag, comm_, &requests->back()));
    }
    return Status::ok();
  }
  Status postRecvPieces(
      void* data, size_t bytes, int peer, int tag, std::vector<MPI_Request>* requests) {
    auto* base = static_cast<uint8_t*>(data);
    for (size_t i = 0; i < pieces(bytes); ++i) {
      requests->emplace_back();
      ZEN_CHECK_MPI(MPI_Irecv(base + i * maxChunkBytes_, roundBytes(bytes, i, maxChunkBytes_),
                              MPI_BYTE, peer, tag, comm_, &requests->back()));
    }
    return Status::ok();
  }

  // The members' meeting before a subset's communicator is created, bounded by the timeout:
  // each sends the set id to the first member, which checks them all (in member order, so a
  // kTimeout names the first one missing) and answers each with the id, or -1 when they
  // disagree. Buffers are members: a send that timed out may still be read.
  Status meet(const std::vector<int32_t>& members, int32_t setId) {
    constexpr int kMeetTag = kMaxUserTag + 1;  // above send/recv's tags on this communicator
    const int leader = members.front();
    const std::string what = fmt::format("creating process set {}", setId);
    if (members.size() == 1) return Status::ok();
    if (rank() != leader) {
      meetSent_ = setId;
      std::vector<MPI_Request> send(1);
      std::vector<MPI_Request> reply(1);
      ZEN_CHECK_MPI(
          MPI_Isend(&meetSent_, sizeof(int32_t), MPI_BYTE, leader, kMeetTag, comm_, &send[0]));
      ZEN_CHECK_MPI(
          MPI_Irecv(&meetReceived_, sizeof(int32_t), MPI_BYTE, leader, kMeetTag, comm_, &reply[0]));
      ZEN_RETURN_IF_ERROR(waitPieces(reply, what.c_str(), leader, sizeof(int32_t)));
      ZEN_RETURN_IF_ERROR(wait(send, what.c_str(), leader));
      if (meetReceived_ != setId) {
        return ZEN_ERROR(StatusCode::kFailedPrecondition,
                         "{}: the members disagree on the process set they create (this rank: "
                         "{}; rank {}, the first member, saw the mismatch)",
                         who(), setId, jobRank(leader));
      }
      return Status::ok();
    }
    Status agreed;
    for (size_t i = 1; i < members.size(); ++i) {
      std::vector<MPI_Request> request(1);
      ZEN_CHECK_MPI(MPI_Irecv(&meetReceived_, sizeof(int32_t), MPI_BYTE, members[i], kMeetTag,
                              comm_, &request[0]));
      ZEN_RETURN_IF_ERROR(waitPieces(request, what.c_str(), members[i], sizeof(int32_t)));
      if (meetReceived_ != setId && agreed.isOk()) {
        agreed = ZEN_ERROR(StatusCode::kFailedPrecondition,
                           "{}: rank {} creates process set {} while this rank creates {}", who(),
                           jobRank(members[i]), meetReceived_, setId);
      }
    }
    meetSent_ = agreed.isOk() ? setId : -1;
    std::vector<MPI_Request> replies(members.size() - 1);
    for (size_t i = 1; i < members.size(); ++i) {
      ZEN_CHECK_MPI(MPI_Isend(&meetSent_, sizeof(int32_t), MPI_BYTE, members[i], kMeetTag, comm_,
                              &replies[i - 1]));
    }
    ZEN_RETURN_IF_ERROR(wait(replies, what.c_str(), -1));
    return agreed;
  }

  // One collective request; when the wait fails its staging buffers are kept, since MPI may
  // still write them.
  Status waitOne(MPI_Request& request,
                 const char* op,
                 ByteVector* out = nullptr,
                 ByteVector* in = nullptr) {
    std::vector<MPI_Request> requests{request};
    Status status = wait(requests, op, -1);
    if (!status.isOk()) {
      if (out) abandoned_.push_back(std::move(*out));
      if (in) abandoned_.push_back(std::move(*in));
    }
    return status;
  }

  MPI_Comm comm_;
  const size_t maxChunkBytes_;
  std::shared_ptr<MpiAbortChannel> channel_;
  std::vector<ByteVector> abandoned_;
  uint64_t sendSize_ = 0;  // sendRecv's size messages
  uint64_t recvSize_ = 0;
  std::vector<uint64_t> sizesOut_;  // exchange's size messages
  std::vector<uint64_t> sizesIn_;
  int32_t meetSent_ = 0;  // doSubset's meeting
  int32_t meetReceived_ = 0;
};

}  // namespace

Result<std::unique_ptr<Transport>> createMpiTransport(const MpiOptions& options) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    return ZEN_ERROR(StatusCode::kFailedPrecondition, "mpi transport: MPI is not initialized");
  }
  ZEN_CHECK_ARG(options.timeoutSeconds > 0, "mpi transport: timeout {} s", options.timeoutSeconds);
  MPI_Comm comm;
  if (MPI_Comm_dup(MPI_COMM_WORLD, &comm) != MPI_SUCCESS) {
    return ZEN_ERROR(StatusCode::kIoError, "mpi transport: MPI_Comm_dup failed");
  }
  // Errors come back as codes (turned into Status) instead of aborting the job.
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  int rank = 0;
  int size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  Result<std::unique_ptr<MpiAbortChannel>> channel =
      MpiAbortChannel::create(comm, options.timeoutSeconds);
  if (!channel.isOk()) {
    MPI_Comm_free(&comm);
    return channel.status();
  }
  return std::unique_ptr<Transport>(
      new MpiTransport(comm, rank, size, options, std::move(channel.value())));
}

MpiOptions MpiOptions::fromConfig(const Config& config) {
  MpiOptions options;
  static_cast<TransportOptions&>(options) = TransportOptions::fromConfig(config);
  return options;
}

}  // namespace zen::ops

#else  // !ZEN_HAVE_MPI

namespace zen::ops {

Result<std::unique_ptr<Transport>> createMpiTransport(const MpiOptions&) {
  return ZEN_ERROR(StatusCode::kUnimplemented, "Zen was built without MPI (ZEN_WITH_MPI=OFF)");
}

MpiOptions MpiOptions::fromConfig(const Config& config) {
  MpiOptions options;
  static_cast<TransportOptions&>(options) = TransportOptions::fromConfig(config);
  return options;
}

}  // namespace zen::ops

#endif  // ZEN_HAVE_MPI
