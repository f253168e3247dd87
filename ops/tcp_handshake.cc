// The TCP backend's connection handshake: mutual proof of the per-job secret by
// challenge-response, so the secret itself never crosses the network. Every message has a
// fixed size, so nothing read here is length-prefixed. Bytes on the wire (little-endian):
//   connector -> acceptor  hello      36 B  magic, version, job size, rank, listen port, nonceC
//   acceptor -> connector  challenge  44 B  magic, rank, nonceA, HMAC(secret,
//   "accept"|nonceC|nonceA|rank) connector -> acceptor  proof      20 B  HMAC(secret,
//   "connect"|nonceA|nonceC|rank) acceptor -> connector  verdict     4 B  1 = admitted, 0 = refused
// HMAC-SHA1 (Boost's SHA-1): a MAC over fresh nonces, where SHA-1's collision weakness does
// not apply. It keeps stray processes and other jobs out; it does not encrypt the data.
#include "ops/tcp_handshake.h"

#include <boost/uuid/detail/sha1.hpp>

#include <array>
#include <random>

namespace zen::ops {
namespace {

namespace asio = boost::asio;

constexpr uint32_t kMagic = 0x31484e5a;  // "ZNH1"
constexpr uint32_t kVersion = 1;
constexpr size_t kNonceBytes = 16;
constexpr size_t kMacBytes = 20;
constexpr size_t kHelloBytes = 20 + kNonceBytes;
constexpr size_t kChallengeBytes = 8 + kNonceBytes + kMacBytes;

using Nonce = std::array<uint8_t, kNonceBytes>;
using Mac = std::array<uint8_t, kMacBytes>;

Mac sha1(const std::vector<uint8_t>& data) {
  boost::uuids::detail::sha1 h;
  h.process_bytes(data.data(), data.size());
  boost::uuids::detail::sha1::digest_type digest;
  h.get_digest(digest);
  Mac out;
  for (size_t i = 0; i < 5; ++i) {
    for (size_t b = 0; b < 4; ++b) out[4 * i + b] = static_cast<uint8_t>(digest[i] >> (24 - 8 * b));
  }
  return out;
}

// RFC 2104 with a 64-byte block.
Mac hmac(const std::string& secret,
         const char* label,
         const Nonce& first,
         const Nonce& second,
         uint32_t rank) {
  std::vector<uint8_t> key(secret.begin(), secret.end());
  if (key.size() > 64) {
    const Mac hashed = sha1(key);
    key.assign(hashed.begin(), hashed.end());
  }
  key.resize(64, 0);
  std::vector<uint8_t> inner(64);
  std::vector<uint8_t> outer(64);
  for (size_t i = 0; i < 64; ++i) {
    inner[i] = key[i] ^ 0x36;
    outer[i] = key[i] ^ 0x5c;
  }
  inner.insert(inner.end(), label, label + std::char_traits<char>::length(label));
  inner.insert(inner.end(), first.begin(), first.end());
  inner.insert(inner.end(), second.begin(), second.end());
  uint8_t number[4];
  putU32(number, rank);
  inner.insert(inner.end(), number, number + 4);
  const Mac innerHash = sha1(inner);
  outer.insert(outer.end(), innerHash.begin(), innerHash.end());
  return sha1(outer);
}

bool equalConstantTime(const uint8_t* a, const uint8_t* b, size_t n) {
  uint8_t diff = 0;
  for (size_t i = 0; i < n; ++i) diff |= a[i] ^ b[i];
  return diff == 0;
}

Nonce freshNonce() {
  std::random_device device;
  Nonce nonce;
  for (size_t i = 0; i < kNonceBytes; i += 4) putU32(nonce.data() + i, device());
  return nonce;
}

Status exchange(asio::io_context& io,
                asio::ip::tcp::socket& socket,
                bool write,
                uint8_t* data,
                size_t bytes,
                Clock::time_point deadline,
                const char* what) {
  const IoOutcome outcome = runWithDeadline(
      io, deadline,
      [&](const IoHandler& done) {
        if (write) {
          asio::async_write(socket, asio::buffer(data, bytes), done);
        } else {
          asio::async_read(socket, asio::buffer(data, bytes), done);
        }
      },
      [&] {
        boost::system::error_code ignored;
        socket.close(ignored);
      });
  if (outcome.timedOut) return ZEN_ERROR(StatusCode::kTimeout, "handshake: timed out {}", what);
  if (outcome.error) {
    return ZEN_ERROR(StatusCode::kIoError, "handshake: {}: {}", what, outcome.error.message());
  }
  return Status::ok();
}

}  // namespace

Status connectHandshake(asio::io_context& io,
                        asio::ip::tcp::socket& socket,
                        const HandshakeIdentity& self,
                        int expectRank,
                        Clock::time_point deadline) {
  const Nonce mine = freshNonce();
  uint8_t hello[kHelloBytes];
  putU32(hello, kMagic);
  putU32(hello + 4, kVersion);
  putU32(hello + 8, static_cast<uint32_t>(self.size));
  putU32(hello + 12, static_cast<uint32_t>(self.rank));
  putU32(hello + 16, self.listenPort);
  std::copy(mine.begin(), mine.end(), hello + 20);
  ZEN_RETURN_IF_ERROR(exchange(io, socket, true, hello, sizeof(hello), deadline, "sending hello"));

  uint8_t challenge[kChallengeBytes];
  ZEN_RETURN_IF_ERROR(exchange(io, socket, false, challenge, sizeof(challenge), deadline,
                               "waiting for the challenge"));
  const uint32_t peerRank = getU32(challenge + 4);
  Nonce theirs;
  std::copy(challenge + 8, challenge + 8 + kNonceBytes, theirs.begin());
  // The proof goes first so that a listener with another secret can log the refusal; it is
  // bound to the listener's fresh nonce, so it is of no use for any other connection.
  Mac proof = hmac(self.secret, "connect", theirs, mine, self.rank);
  ZEN_RETURN_IF_ERROR(
      exchange(io, socket, true, proof.data(), proof.size(), deadline, "sending the proof"));
  const Mac expected = hmac(self.secret, "accept", mine, theirs, peerRank);
  if (getU32(challenge) != kMagic ||
      !equalConstantTime(expected.data(), challenge + 8 + kNonceBytes, kMacBytes)) {
    return ZEN_ERROR(StatusCode::kIoError,
                     "handshake: the listener did not prove the job secret (is it another job, "
                     "or is the secret different on this rank?)");
  }
  if (static_cast<int>(peerRank) != expectRank) {
    return ZEN_ERROR(StatusCode::kIoError, "handshake: expected rank {}, the listener is rank {}",
                     expectRank, peerRank);
  }
  uint8_t verdict[4];
  ZEN_RETURN_IF_ERROR(
      exchange(io, socket, false, verdict, sizeof(verdict), deadline, "waiting for the verdict"));
  if (getU32(verdict) != 1) {
    return ZEN_ERROR(StatusCode::kIoError,
                     "handshake: rank {} refused this connection (see its log)", expectRank);
  }
  return Status::ok();
}

Result<PeerHello> acceptHandshake(asio::io_context& io,
                                  asio::ip::tcp::socket& socket,
                                  const HandshakeIdentity& self,
                                  const std::function<Status(int rank)>& admit,
                                  Clock::time_point deadline) {
  uint8_t hello[kHelloBytes];
  ZEN_RETURN_IF_ERROR(
      exchange(io, socket, false, hello, sizeof(hello), deadline, "waiting for the hello"));
  if (getU32(hello) != kMagic || getU32(hello + 4) != kVersion) {
    return ZEN_ERROR(StatusCode::kIoError, "handshake: not a Zen peer (bad magic or version)");
  }
  const uint32_t peerSize = getU32(hello + 8);
  PeerHello peer;
  peer.rank = static_cast<int>(getU32(hello + 12));
  peer.listenPort = static_cast<uint16_t>(getU32(hello + 16));
  Nonce theirs;
  std::copy(hello + 20, hello + 20 + kNonceBytes, theirs.begin());

  const Nonce mine = freshNonce();
  const Mac mac = hmac(self.secret, "accept", theirs, mine, self.rank);
  uint8_t challenge[kChallengeBytes];
  putU32(challenge, kMagic);
  putU32(challenge + 4, static_cast<uint32_t>(self.rank));
  std::copy(mine.begin(), mine.end(), challenge + 8);
  std::copy(mac.begin(), mac.end(), challenge + 8 + kNonceBytes);
  ZEN_RETURN_IF_ERROR(
      exchange(io, socket, true, challenge, sizeof(challenge), deadline, "sending the challenge"));

  Mac proof;
  ZEN_RETURN_IF_ERROR(
      exchange(io, socket, false, proof.data(), proof.size(), deadline, "waiting for the proof"));
  const Mac expected = hmac(self.secret, "connect", mine, theirs, peer.rank);
  Status verdict = Status::ok();
  if (!equalConstantTime(expected.data(), proof.data(), kMacBytes)) {
    verdict =
        ZEN_ERROR(StatusCode::kIoError, "handshake: wrong job secret (claimed rank {})", peer.rank);
  } else if (peerSize != static_cast<uint32_t>(self.size)) {
    verdict =
        ZEN_ERROR(StatusCode::kIoError, "handshake: rank {} thinks the job has {} ranks, not {}",
                  peer.rank, peerSize, self.size);
  } else {
    verdict = admit(peer.rank);
  }
  uint8_t answer[4];
  putU32(answer, verdict.isOk() ? 1 : 0);
  const Status told =
      exchange(io, socket, true, answer, sizeof(answer), deadline, "sending the verdict");
  if (!verdict.isOk()) return verdict;  // refused, whether or not the peer heard it
  ZEN_RETURN_IF_ERROR(told);
  return peer;
}

}  // namespace zen::ops
