#pragma once

#include <boost/asio.hpp>

#include <cstdint>
#include <functional>
#include <string>

#include "ops/tcp_io.h"

namespace zen::ops {

// Who this end of a handshake is.
struct HandshakeIdentity {
  int rank = 0;
  int size = 1;
  uint16_t listenPort = 0;  // told to the acceptor (rank 0 forwards it to the mesh)
  std::string secret;
};

struct PeerHello {
  int rank = 0;
  uint16_t listenPort = 0;
};

// Connector side: proves the job secret to the acceptor and checks the acceptor's proof and
// that it is `expectRank`. kIoError when refused or when the acceptor fails its proof.
Status connectHandshake(boost::asio::io_context& io,
                        boost::asio::ip::tcp::socket& socket,
                        const HandshakeIdentity& self,
                        int expectRank,
                        Clock::time_point deadline);

// Acceptor side: the peer's hello once it has proved the secret and `admit` accepted its rank.
// On any failure the connection is refused (told so when it got that far) and the error says
// why, for the caller to log.
Result<PeerHello> acceptHandshake(boost::asio::io_context& io,
                                  boost::asio::ip::tcp::socket& socket,
                                  const HandshakeIdentity& self,
                                  const std::function<Status(int rank)>& admit,
                                  Clock::time_point deadline);

}  // namespace zen::ops
