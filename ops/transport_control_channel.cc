// The control channel's three collectives as a star through rank 0
// (ops/transport_control_channel.h).
#include "ops/transport_control_channel.h"

#include <utility>

namespace zen::ops {
namespace {

// Point-to-point tags of the control transport; nothing else uses this transport.
constexpr uint32_t kTagAnd = 1;
constexpr uint32_t kTagGatherLength = 2;
constexpr uint32_t kTagGatherBytes = 3;
// Control messages are request and response lists, kilobytes; a larger announced length is a
// corrupt or hostile peer, refused before allocating.
constexpr uint64_t kMaxControlBytes = uint64_t{1} << 30;

Status checkLength(uint64_t length, int peer) {
  if (length <= kMaxControlBytes) return Status::ok();
  return ZEN_ERROR(StatusCode::kIoError,
                   "rank {} announced a control message of {} bytes (at most {} allowed)", peer,
                   length, kMaxControlBytes);
}

}  // namespace

TransportControlChannel::TransportControlChannel(std::unique_ptr<Transport> transport)
    : transport_(std::move(transport)) {}

Status TransportControlChannel::allreduceAnd(std::vector<uint64_t>* bits) {
  Transport& t = *transport_;
  if (t.size() == 1) return Status::ok();
  const size_t bytes = bits->size() * sizeof(uint64_t);
  if (t.rank() != 0) {
    ZEN_RETURN_IF_ERROR(t.send(0, bits->data(), bytes, kTagAnd));
  } else {
    std::vector<uint64_t> other(bits->size());
    for (int peer = 1; peer < t.size(); ++peer) {
      ZEN_RETURN_IF_ERROR(t.recv(peer, other.data(), bytes, kTagAnd));
      for (size_t i = 0; i < other.size(); ++i) (*bits)[i] &= other[i];
    }
  }
  return t.broadcast(bits->data(), bytes, 0);
}

Status TransportControlChannel::gather(const std::vector<uint8_t>& mine,
                                       std::vector<std::vector<uint8_t>>* gathered) {
  Transport& t = *transport_;
  gathered->clear();
  if (t.rank() != 0) {
    const uint64_t length = mine.size();
    ZEN_RETURN_IF_ERROR(t.send(0, &length, sizeof(length), kTagGatherLength));
    return t.send(0, mine.data(), mine.size(), kTagGatherBytes);
  }
  gathered->resize(static_cast<size_t>(t.size()));
  (*gathered)[0] = mine;
  for (int peer = 1; peer < t.size(); ++peer) {
    uint64_t length = 0;
    ZEN_RETURN_IF_ERROR(t.recv(peer, &length, sizeof(length), kTagGatherLength));
    ZEN_RETURN_IF_ERROR(checkLength(length, peer));
    auto& into = (*gathered)[static_cast<size_t>(peer)];
    into.resize(length);
    ZEN_RETURN_IF_ERROR(t.recv(peer, into.data(), into.size(), kTagGatherBytes));
  }
  return Status::ok();
}

Status TransportControlChannel::broadcast(std::vector<uint8_t>* bytes) {
  Transport& t = *transport_;
  if (t.size() == 1) return Status::ok();
  uint64_t length = bytes->size();
  ZEN_RETURN_IF_ERROR(t.broadcast(&length, sizeof(length), 0));
  ZEN_RETURN_IF_ERROR(checkLength(length, 0));
  bytes->resize(length);
  return t.broadcast(bytes->data(), bytes->size(), 0);
}

}  // namespace zen::ops
