// The collectives of the message-passing backends, over postSend + Mailbox::take. Each
// message carries its own length (a TCP frame header, an in-process vector), so the
// v-collectives need no separate count round. Payload bytes on the wire per rank, B = buffer:
// - send/recv: B to one peer; sendRecv: B to one peer, its message from another (or it).
// - alltoallv: sends[p] to each peer p (a message per pair, empty ones too).
// - allgatherv: B to each of the n-1 peers; receives every peer's buffer.
// - allreduce (ring: reduce-scatter, then allgather, n-1 steps each): 2(n-1)/n·B sent to the
//   right neighbour, as much received from the left; 16-bit floats travel as fp32 (2·B).
// - reducescatter (the same ring's first half over the caller's blocks): every block but its
//   own sent to the right neighbour, B - B_rank; 16-bit floats as fp32.
// - broadcast (flat): the root sends B to each peer; the others receive B.
// - barrier (dissemination, ceil(log2 n) rounds): empty messages only.
#include "ops/message_transport.h"

#include <cstring>
#include <string>

#include "ops/reduce.h"

namespace zen::ops {
namespace {

// Tags above the user range, one per collective: collectives are called in the same order
// on every rank and messages between two ranks stay in order, so a tag per kind suffices.
constexpr uint32_t kTagAlltoallv = Transport::kMaxUserTag + 1;
constexpr uint32_t kTagAllgatherv = Transport::kMaxUserTag + 2;
constexpr uint32_t kTagAllreduce = Transport::kMaxUserTag + 3;
constexpr uint32_t kTagBroadcast = Transport::kMaxUserTag + 4;
constexpr uint32_t kTagBarrier = Transport::kMaxUserTag + 5;
static_assert(kTagBarrier < (1u << 16), "message_subset.cc puts set ids in the upper 16 bits");

}  // namespace

MessageTransport::MessageTransport(int rank, int size, double timeoutSeconds, Mailbox* mailbox)
    : Transport(rank, size, timeoutSeconds), mailbox_(mailbox) {}

Status MessageTransport::post(int peer, uint32_t tag, const void* data, size_t bytes) {
  ZEN_RETURN_IF_ERROR(postSend(peer, tag, data, bytes));
  countSent(peer, bytes);
  return Status::ok();
}

Result<ByteVector> MessageTransport::take(int peer, uint32_t tag, Clock::time_point deadline) {
  return mailbox_->take(peer, tag, deadline);
}

// Errors name peers by job rank, as the connections' own errors do.
Result<ByteVector> MessageTransport::receive(int peer,
                                             uint32_t tag,
                                             Clock::time_point deadline,
                                             const char* op) {
  Result<ByteVector> message = take(peer, tag, deadline);
  if (!message.isOk()) {
    const Status& s = message.status();
    if (s.code() == StatusCode::kTimeout) {
      const std::string tagText = tag <= kMaxUserTag ? fmt::format(" (tag {})", tag) : "";
      return ZEN_ERROR(StatusCode::kTimeout, "{}: {} timed out after {} s waiting for rank {}{}",
                       who(), op, timeoutSeconds(), jobRank(peer), tagText);
    }
    return ZEN_ERROR(s.code(), "{}: {} waiting for rank {}: {}", who(), op, jobRank(peer),
                     s.message());
  }
  countReceived(peer, message.value().size());
  return message;
}

Status MessageTransport::receiveInto(
    int peer, uint32_t tag, void* data, size_t bytes, Clock::time_point deadline, const char* op) {
  ZEN_ASSIGN_OR_RETURN(ByteVector message, receive(peer, tag, deadline, op));
  if (message.size() != bytes) {
    return ZEN_ERROR(StatusCode::kIoError, "{}: {}: rank {} sent {} bytes, expected {}", who(), op,
                     jobRank(peer), message.size(), bytes);
  }
  if (bytes > 0) std::memcpy(data, message.data(), bytes);
  return Status::ok();
}

Status MessageTransport::doSend(int peer, const void* data, size_t bytes, uint32_t tag) {
  ZEN_RETURN_IF_ERROR(post(peer, tag, data, bytes));
  return flushSends(deadline());
}

Status MessageTransport::doRecv(int peer, void* data, size_t bytes, uint32_t tag) {
  return receiveInto(peer, tag, data, bytes, deadline(), "recv");
}

// The send is posted before the receive waits and flushed after it: both directions overlap.
Status MessageTransport::doSendRecv(
    int to, const void* data, size_t bytes, int from, ByteVector* received, uint32_t tag) {
  const auto until = deadline();
  if (to >= 0) ZEN_RETURN_IF_ERROR(post(to, tag, data, bytes));
  if (from >= 0) {
    ZEN_ASSIGN_OR_RETURN(*received, receive(from, tag, until, "sendRecv"));
  }
  return flushSends(until);
}

Status MessageTransport::doAlltoallv(const std::vector<ConstBytes>& sends,
                                     std::vector<ByteVector>* received) {
  const auto until = deadline();
  const int n = size();
  received->assign(n, ByteVector());
  const auto* own = static_cast<const uint8_t*>(sends[rank()].data);
  (*received)[rank()].assign(own, own + sends[rank()].size);
  // Staggered order: in step k rank r talks to r+k and r-k, so no peer is everyone's first.
  for (int k = 1; k < n; ++k) {
    const int to = (rank() + k) % n;
    ZEN_RETURN_IF_ERROR(post(to, kTagAlltoallv, sends[to].data, sends[to].size));
  }
  for (int k = 1; k < n; ++k) {
    const int from = (rank() - k + n) % n;
    ZEN_ASSIGN_OR_RETURN((*received)[from], receive(from, kTagAlltoallv, until, "alltoallv"));
  }
  return flushSends(until);
}

Status MessageTransport::doAllgatherv(const void* data,
                                      size_t bytes,
                                      std::vector<ByteVector>* gathered) {
  const auto until = deadline();
  const int n = size();
  gathered->assign(n, ByteVector());
  const auto* own = static_cast<const uint8_t*>(data);
  (*gathered)[rank()].assign(own, own + bytes);
  for (int k = 1; k < n; ++k) {
    ZEN_RETURN_IF_ERROR(post((rank() + k) % n, kTagAllgatherv, data, bytes));
  }
  for (int k = 1; k < n; ++k) {
    const int from = (rank() - k + n) % n;
    ZEN_ASSIGN_OR_RETURN((*gathered)[from], receive(from, kTagAllgatherv, until, "allgatherv"));
  }
  return flushSends(until);
}

Status MessageTransport::doAllreduce(void* data, size_t count, DataType dtype, ReduceOp op) {
  if (size() == 1 || count == 0) return Status::ok();
  std::vector<size_t> begins;
  for (int p = 0; p < size(); ++p) begins.push_back(ringChunk(count, size(), p).begin);
  begins.push_back(count);
  return ring(data, begins, dtype, op, true, "allreduce");
}

Status MessageTransport::doReducescatter(void* data,
                                         const std::vector<size_t>& counts,
                                         DataType dtype,
                                         ReduceOp op) {
  if (size() == 1) return Status::ok();
  std::vector<size_t> begins = {0};
  for (size_t c : counts) begins.push_back(begins.back() + c);
  return ring(data, begins, dtype, op, false, "reducescatter");
}

// 16-bit floats travel and are reduced as fp32, rounded once at the end.
Status MessageTransport::ring(void* data,
                              const std::vector<size_t>& begins,
                              DataType dtype,
                              ReduceOp op,
                              bool allgather,
                              const char* what) {
  const auto until = deadline();
  WireBuffer wire(data, begins.back(), dtype);
  ZEN_RETURN_IF_ERROR(ringSteps(wire.data(), begins, wire.dtype(), op, true, until, what));
  if (allgather) {
    ZEN_RETURN_IF_ERROR(ringSteps(wire.data(), begins, wire.dtype(), op, false, until, what));
  }
  wire.narrow();
  return Status::ok();
}

// The ring over the blocks: in step s rank r sends block r-s-shift right and takes block
// r-s-shift-1 from the left, reducing it into its own (reduce-scatter, shift 1: after n-1 steps
// rank r holds the full reduction of block r) or copying it (allgather, shift 0: every rank
// ends with every block, each a copy of the one rank that reduced it). Each block is reduced
// once, so the bits do not depend on who later copies it. Sends are flushed every step, so a
// posted block is never written while in flight.
Status MessageTransport::ringSteps(uint8_t* data,
                                   const std::vector<size_t>& begins,
                                   DataType dtype,
                                   ReduceOp op,
                                   bool reduce,
                                   Clock::time_point until,
                                   const char* what) {
  const int n = size();
  const int r = rank();
  const int right = (r + 1) % n;
  const int left = (r - 1 + n) % n;
  const int shift = reduce ? 1 : 0;
  const size_t width = dataTypeSize(dtype);
  auto block = [&](int b) { return static_cast<size_t>((b % n + n) % n); };
  for (int s = 0; s + 1 < n; ++s) {
    const size_t out = block(r - s - shift);
    const size_t in = block(r - s - shift - 1);
    const size_t inCount = begins[in + 1] - begins[in];
    ZEN_RETURN_IF_ERROR(post(right, kTagAllreduce, data + begins[out] * width,
                             (begins[out + 1] - begins[out]) * width));
    ZEN_ASSIGN_OR_RETURN(ByteVector chunk, receive(left, kTagAllreduce, until, what));
    if (chunk.size() != inCount * width) {
      return ZEN_ERROR(StatusCode::kIoError,
                       "{}: {}: rank {} sent a block of {} bytes, expected {} (do all "
                       "ranks pass the same counts and dtype?)",
                       who(), what, jobRank(left), chunk.size(), inCount * width);
    }
    if (reduce) {
      reduceInto(data + begins[in] * width, chunk.data(), inCount, dtype, op);
    } else if (!chunk.empty()) {
      std::memcpy(data + begins[in] * width, chunk.data(), chunk.size());
    }
    ZEN_RETURN_IF_ERROR(flushSends(until));
  }
  return Status::ok();
}

Status MessageTransport::doBroadcast(void* data, size_t bytes, int root) {
  const auto until = deadline();
  if (rank() != root) return receiveInto(root, kTagBroadcast, data, bytes, until, "broadcast");
  for (int k = 1; k < size(); ++k) {
    ZEN_RETURN_IF_ERROR(post((root + k) % size(), kTagBroadcast, data, bytes));
  }
  return flushSends(until);
}

// Round k: tell rank r+2^k, hear from rank r-2^k. After ceil(log2 n) rounds every rank has
// heard, transitively, from all others.
Status MessageTransport::doBarrier() {
  const auto until = deadline();
  const int n = size();
  for (int k = 1; k < n; k *= 2) {
    ZEN_RETURN_IF_ERROR(post((rank() + k) % n, kTagBarrier, nullptr, 0));
    ZEN_ASSIGN_OR_RETURN(ByteVector ignored,
                         receive((rank() - k + n) % n, kTagBarrier, until, "barrier"));
    ZEN_RETURN_IF_ERROR(flushSends(until));
  }
  return Status::ok();
}

}  // namespace zen::ops
