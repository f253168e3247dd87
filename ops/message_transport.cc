// The collectives of the message-passing backends, over postSend + Mailbox::take. Each
// message carries its own length (a TCP frame header, an in-process vector), so the
// v-collectives need no separate count round. Payload bytes on the wire per rank, B = buffer:
// - send/recv: B to one peer.
// - alltoallv: sends[p] to each peer p (a message per pair, empty ones too).
// - allgatherv: B to each of the n-1 peers; receives every peer's buffer.
// - allreduce (ring: reduce-scatter, then allgather, n-1 steps each): 2(n-1)/n·B sent to the
//   right neighbour, as much received from the left; 16-bit floats travel as fp32 (2·B).
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

}  // namespace

MessageTransport::MessageTransport(int rank, int size, double timeoutSeconds, Mailbox* mailbox)
    : Transport(rank, size, timeoutSeconds), mailbox_(mailbox) {}

Status MessageTransport::post(int peer, uint32_t tag, const void* data, size_t bytes) {
  ZEN_RETURN_IF_ERROR(postSend(peer, tag, data, bytes));
  countSent(peer, bytes);
  return Status::ok();
}

Result<ByteVector> MessageTransport::receive(int peer,
                                             uint32_t tag,
                                             Clock::time_point deadline,
                                             const char* op) {
  Result<ByteVector> message = mailbox_->take(peer, tag, deadline);
  if (!message.isOk()) {
    const Status& s = message.status();
    if (s.code() == StatusCode::kTimeout) {
      const std::string tagText = tag <= kMaxUserTag ? fmt::format(" (tag {})", tag) : "";
      return ZEN_ERROR(StatusCode::kTimeout,
                       "rank {}: {} timed out after {} s waiting for rank {}{}", rank(), op,
                       timeoutSeconds(), peer, tagText);
    }
    return ZEN_ERROR(s.code(), "rank {}: {} waiting for rank {}: {}", rank(), op, peer,
                     s.message());
  }
  countReceived(peer, message.value().size());
  return message;
}

Status MessageTransport::receiveInto(
    int peer, uint32_t tag, void* data, size_t bytes, Clock::time_point deadline, const char* op) {
  ZEN_ASSIGN_OR_RETURN(ByteVector message, receive(peer, tag, deadline, op));
  if (message.size() != bytes) {
    return ZEN_ERROR(StatusCode::kIoError, "rank {}: {}: rank {} sent {} bytes, expected {}",
                     rank(), op, peer, message.size(), bytes);
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
  const auto until = deadline();
  const DataType wire = wireDataType(dtype);
  if (wire == dtype) return ringAllreduce(data, count, dtype, op, until);
  std::vector<float> wide = widenToFloat(data, count, dtype);
  ZEN_RETURN_IF_ERROR(ringAllreduce(wide.data(), count, wire, op, until));
  narrowFromFloat(wide, data, dtype);
  return Status::ok();
}

// Reduce-scatter: in step s rank r sends chunk r-s right and reduces chunk r-s-1 from the left
// into its own (sum, min, max or product); afterwards rank r holds the full reduction of chunk
// r+1. Allgather: chunk r+1-s goes right, chunk r-s arrives from the left. Each chunk is
// reduced once, so every rank ends with equal bits. Sends are flushed every step, so a posted
// chunk is never written while in flight.
Status MessageTransport::ringAllreduce(
    void* data, size_t count, DataType dtype, ReduceOp op, Clock::time_point until) {
  const int n = size();
  const int r = rank();
  const int right = (r + 1) % n;
  const int left = (r - 1 + n) % n;
  const size_t width = dataTypeSize(dtype);
  auto* base = static_cast<uint8_t*>(data);
  for (int phase = 0; phase < 2; ++phase) {
    for (int s = 0; s + 1 < n; ++s) {
      const ElementRange out = ringChunk(count, n, (r + phase - s + n) % n);
      const ElementRange in = ringChunk(count, n, (r + phase - s - 1 + n) % n);
      ZEN_RETURN_IF_ERROR(post(right, kTagAllreduce, base + out.begin * width, out.size() * width));
      ZEN_ASSIGN_OR_RETURN(ByteVector chunk, receive(left, kTagAllreduce, until, "allreduce"));
      if (chunk.size() != in.size() * width) {
        return ZEN_ERROR(StatusCode::kIoError,
                         "rank {}: allreduce: rank {} sent a chunk of {} bytes, expected {} (do "
                         "all ranks pass the same count and dtype?)",
                         r, left, chunk.size(), in.size() * width);
      }
      if (phase == 0) {
        reduceInto(base + in.begin * width, chunk.data(), in.size(), dtype, op);
      } else if (!chunk.empty()) {
        std::memcpy(base + in.begin * width, chunk.data(), chunk.size());
      }
      ZEN_RETURN_IF_ERROR(flushSends(until));
    }
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
