// Building the TCP full mesh. Rank 0 listens at rendezvousAddr; every other rank opens its own
// listener (ephemeral port, at TcpOptions::localAddress when ZEN_IFACE chose one, else on the
// interface that reaches rank 0), dials rank 0 (from localAddress when set), handshakes
// (tcp_handshake.cc, which also carries the listening port) and waits for the address table.
// That connection then stays as the data connection to rank 0. Afterwards rank r dials every
// rank 0 < j < r and accepts every j > r; dialing is ordered by rank, so no two ranks wait on
// each other. Bytes on the wire besides the handshakes: the table, n entries of 68 B (host as
// text, zero-padded to 64 B, then the port as u32), from rank 0 to each rank. A rank's table
// address is the source address rank 0 sees, which is localAddress when set: every dial binds
// it first, so peers reach each other on ZEN_IFACE's interface, never on another route's.
#include "ops/tcp_rendezvous.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <optional>
#include <string>
#include <thread>

#include "ops/tcp_handshake.h"

namespace zen::ops {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;

// A connected client that does not complete its handshake within this is dropped, so a stray
// connection cannot hold up the rendezvous for long.
constexpr double kHandshakeSeconds = 5.0;
constexpr size_t kHostBytes = 64;
constexpr size_t kEntryBytes = kHostBytes + 4;

struct Address {
  std::string host;
  uint16_t port = 0;
};

Clock::time_point handshakeDeadline(Clock::time_point deadline) {
  return std::min(deadline, Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                               std::chrono::duration<double>(kHandshakeSeconds)));
}

std::string missingRanks(const std::vector<SocketPtr>& sockets, int self) {
  std::string out;
  for (size_t r = 0; r < sockets.size(); ++r) {
    if (static_cast<int>(r) != self && !sockets[r]) {
      out += (out.empty() ? "" : ", ") + std::to_string(r);
    }
  }
  return out;
}

// Dials `endpoint` until it answers or the deadline passes: peers start in any order, so a
// refused connection only means "not listening yet".
Result<SocketPtr> dial(asio::io_context& io,
                       const tcp::endpoint& endpoint,
                       const std::optional<asio::ip::address>& from,
                       Clock::time_point deadline,
                       int rank,
                       int peer,
                       double timeoutSeconds) {
  std::string lastError = "no attempt";
  while (Clock::now() < deadline) {
    auto socket = std::make_unique<tcp::socket>(io);
    if (from) {
      boost::system::error_code ec;
      socket->open(endpoint.protocol(), ec);
      if (!ec) socket->bind(tcp::endpoint(*from, 0), ec);
      if (ec) {
        return ZEN_ERROR(StatusCode::kIoError, "rank {}: cannot dial rank {} from {}: {}", rank,
                         peer, from->to_string(), ec.message());
      }
    }
    const IoOutcome outcome = runWithDeadline(
        io, deadline,
        [&](const IoHandler& done) {
          socket->async_connect(endpoint,
                                [done](const boost::system::error_code& ec) { done(ec, 0); });
        },
        [&] {
          boost::system::error_code ignored;
          socket->close(ignored);
        });
    if (!outcome.timedOut && !outcome.error) {
      socket->set_option(tcp::no_delay(true));
      return socket;
    }
    if (!outcome.timedOut) lastError = outcome.error.message();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return ZEN_ERROR(StatusCode::kTimeout,
                   "rank {}: could not reach rank {} at {}:{} within {} s ({})", rank, peer,
                   endpoint.address().to_string(), endpoint.port(), timeoutSeconds, lastError);
}

// Accepts until `count` peers passed the handshake and `admit`; refused ones are logged.
Status acceptPeers(asio::io_context& io,
                   tcp::acceptor& acceptor,
                   const HandshakeIdentity& self,
                   int count,
                   Clock::time_point deadline,
                   double timeoutSeconds,
                   spdlog::logger& log,
                   std::vector<SocketPtr>* sockets,
                   std::vector<Address>* addresses) {
  auto admit = [&](int rank) -> Status {
    // Rank 0 hears from everyone; rank r > 0 only from higher ranks.
    if (rank <= self.rank || rank >= self.size || (*sockets)[rank]) {
      return ZEN_ERROR(StatusCode::kIoError, "rank {} is not expected here (or already joined)",
                       rank);
    }
    return Status::ok();
  };
  for (int joined = 0; joined < count;) {
    auto socket = std::make_unique<tcp::socket>(io);
    const IoOutcome outcome = runWithDeadline(
        io, deadline,
        [&](const IoHandler& done) {
          acceptor.async_accept(*socket,
                                [done](const boost::system::error_code& ec) { done(ec, 0); });
        },
        [&] {
          boost::system::error_code ignored;
          acceptor.close(ignored);
        });
    if (outcome.timedOut) {
      return ZEN_ERROR(
          StatusCode::kTimeout,
          "rank {}: building the TCP mesh timed out after {} s; rank {} did not connect", self.rank,
          timeoutSeconds, missingRanks(*sockets, self.rank));
    }
    if (outcome.error) {
      return ZEN_ERROR(StatusCode::kIoError, "rank {}: accept failed: {}", self.rank,
                       outcome.error.message());
    }
    boost::system::error_code ec;
    const tcp::endpoint remote = socket->remote_endpoint(ec);
    socket->set_option(tcp::no_delay(true), ec);
    Result<PeerHello> hello =
        acceptHandshake(io, *socket, self, admit, handshakeDeadline(deadline));
    if (!hello.isOk()) {
      log.warn("rank {}: refused a connection from {}:{}: {}", self.rank,
               remote.address().to_string(), remote.port(), hello.status().message());
      continue;
    }
    const int peer = hello.value().rank;
    (*addresses)[peer] = Address{remote.address().to_string(), hello.value().listenPort};
    (*sockets)[peer] = std::move(socket);
    ++joined;
  }
  return Status::ok();
}

Status transfer(asio::io_context& io,
                tcp::socket& socket,
                bool write,
                std::vector<uint8_t>& data,
                Clock::time_point deadline,
                const std::string& what,
                double timeoutSeconds) {
  const IoOutcome outcome = runWithDeadline(
      io, deadline,
      [&](const IoHandler& done) {
        if (write) {
          asio::async_write(socket, asio::buffer(data), done);
        } else {
          asio::async_read(socket, asio::buffer(data), done);
        }
      },
      [&] {
        boost::system::error_code ignored;
        socket.close(ignored);
      });
  if (outcome.timedOut) {
    return ZEN_ERROR(StatusCode::kTimeout, "{}: timed out after {} s", what, timeoutSeconds);
  }
  if (outcome.error) {
    return ZEN_ERROR(StatusCode::kIoError, "{}: {}", what, outcome.error.message());
  }
  return Status::ok();
}

std::vector<uint8_t> encodeTable(const std::vector<Address>& addresses) {
  std::vector<uint8_t> table(addresses.size() * kEntryBytes, 0);
  for (size_t r = 0; r < addresses.size(); ++r) {
    uint8_t* entry = table.data() + r * kEntryBytes;
    std::copy_n(addresses[r].host.begin(), std::min(addresses[r].host.size(), kHostBytes - 1),
                entry);
    putU32(entry + kHostBytes, addresses[r].port);
  }
  return table;
}

Address decodeEntry(const std::vector<uint8_t>& table, int rank) {
  const uint8_t* entry = table.data() + static_cast<size_t>(rank) * kEntryBytes;
  const auto* host = reinterpret_cast<const char*>(entry);
  return Address{std::string(host, strnlen(host, kHostBytes)),
                 static_cast<uint16_t>(getU32(entry + kHostBytes))};
}

Status openListener(tcp::acceptor& acceptor, const tcp::endpoint& at, int rank) {
  boost::system::error_code ec;
  acceptor.open(at.protocol(), ec);
  if (!ec) acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor.bind(at, ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return ZEN_ERROR(StatusCode::kIoError, "rank {}: cannot listen on {}:{}: {}", rank,
                     at.address().to_string(), at.port(), ec.message());
  }
  return Status::ok();
}

// The port fd listens on, 0 when it is not a listening TCP socket (or not open at all).
uint16_t listeningPort(int fd, int* family) {
  int value = 0;
  socklen_t size = sizeof(value);
  if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &value, &size) != 0 || value == 0) return 0;
  size = sizeof(value);
  if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &value, &size) != 0 || value != SOCK_STREAM) return 0;
  sockaddr_storage local{};
  socklen_t localSize = sizeof(local);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &localSize) != 0) return 0;
  *family = local.ss_family;
  if (local.ss_family == AF_INET) {
    return ntohs(reinterpret_cast<const sockaddr_in*>(&local)->sin_port);
  }
  if (local.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<const sockaddr_in6*>(&local)->sin6_port);
  }
  return 0;
}

// Takes fd into acceptor when it is a TCP socket listening on port (TcpOptions::rendezvousFd).
bool adoptListener(tcp::acceptor& acceptor, int fd, uint16_t port, spdlog::logger& log) {
  if (fd < 0) return false;
  int family = 0;
  const uint16_t listening = listeningPort(fd, &family);
  if (listening != port) {
    // Closed, or reused for a file that is no socket: a runtime before this one took it (init
    // after shutdown; the variable stays). A socket elsewhere: a misconfiguration.
    struct stat st {};
    const bool stale = fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode);
    log.log(stale ? spdlog::level::debug : spdlog::level::warn,
            "rank 0: ZEN_CONTROLLER_FD={} is not a socket listening on port {}; binding the port",
            fd, port);
    return false;
  }
  (void)fcntl(fd, F_SETFD, FD_CLOEXEC);  // the program's later children need not hold the port
  boost::system::error_code ec;
  acceptor.assign(family == AF_INET ? tcp::v4() : tcp::v6(), fd, ec);
  if (ec) {
    log.warn("rank 0: cannot take ZEN_CONTROLLER_FD={}: {}; binding the port", fd, ec.message());
    return false;
  }
  return true;
}

Result<std::vector<SocketPtr>> rootMesh(asio::io_context& io,
                                        const TcpOptions& options,
                                        const tcp::endpoint& at,
                                        Clock::time_point deadline,
                                        spdlog::logger& log) {
  const int n = options.size;
  tcp::acceptor acceptor(io);
  if (!adoptListener(acceptor, options.rendezvousFd, at.port(), log)) {
    ZEN_RETURN_IF_ERROR(openListener(acceptor, at, 0));
  }
  // Where it really listens: an adopted socket may be bound elsewhere than `at` (0.0.0.0).
  const std::string listening = acceptor.local_endpoint().address().to_string();
  const uint16_t port = acceptor.local_endpoint().port();
  log.debug("rank 0: rendezvous listening on {}:{}", listening, port);
  if (options.onListening) options.onListening(port);

  std::vector<SocketPtr> sockets(n);
  std::vector<Address> addresses(n);
  const HandshakeIdentity self{0, n, port, options.secret};
  ZEN_RETURN_IF_ERROR(acceptPeers(io, acceptor, self, n - 1, deadline, options.timeoutSeconds, log,
                                  &sockets, &addresses));
  if (log.should_log(spdlog::level::debug)) {
    std::string listed;
    for (int r = 1; r < n; ++r) {
      listed +=
          fmt::format("{}{}={}:{}", r == 1 ? "" : " ", r, addresses[r].host, addresses[r].port);
    }
    log.debug("rank 0: address table of the mesh at {}:{}: {}", listening, port, listed);
  }
  std::vector<uint8_t> table = encodeTable(addresses);
  for (int r = 1; r < n; ++r) {
    ZEN_RETURN_IF_ERROR(transfer(io, *sockets[r], true, table, deadline,
                                 fmt::format("rank 0: sending the address table to rank {}", r),
                                 options.timeoutSeconds));
  }
  return sockets;
}

Result<std::vector<SocketPtr>> peerMesh(asio::io_context& io,
                                        const TcpOptions& options,
                                        const tcp::endpoint& root,
                                        Clock::time_point deadline,
                                        spdlog::logger& log) {
  const int n = options.size;
  const int rank = options.rank;
  std::optional<asio::ip::address> from;
  if (!options.localAddress.empty()) {
    boost::system::error_code ec;
    from = asio::ip::make_address(options.localAddress, ec);
    if (ec) {
      return ZEN_ERROR(StatusCode::kInvalidArgument, "rank {}: bad local address '{}'", rank,
                       options.localAddress);
    }
  }
  std::vector<SocketPtr> sockets(n);
  ZEN_ASSIGN_OR_RETURN(sockets[0], dial(io, root, from, deadline, rank, 0, options.timeoutSeconds));

  // Listen where the dial came from (localAddress, else the interface that reaches rank 0):
  // the address rank 0 sees and publishes.
  tcp::acceptor acceptor(io);
  ZEN_RETURN_IF_ERROR(
      openListener(acceptor, tcp::endpoint(sockets[0]->local_endpoint().address(), 0), rank));
  HandshakeIdentity self{rank, n, acceptor.local_endpoint().port(), options.secret};
  Status joined = connectHandshake(io, *sockets[0], self, 0, deadline);
  if (!joined.isOk()) {
    return ZEN_ERROR(joined.code(), "rank {}: joining rank 0: {}", rank, joined.message());
  }
  std::vector<uint8_t> table(static_cast<size_t>(n) * kEntryBytes);
  ZEN_RETURN_IF_ERROR(transfer(io, *sockets[0], false, table, deadline,
                               fmt::format("rank {}: waiting for the address table", rank),
                               options.timeoutSeconds));

  for (int j = 1; j < rank; ++j) {
    const Address to = decodeEntry(table, j);
    boost::system::error_code ec;
    const auto address = asio::ip::make_address(to.host, ec);
    if (ec) {
      return ZEN_ERROR(StatusCode::kIoError, "rank {}: bad address '{}' for rank {}", rank, to.host,
                       j);
    }
    ZEN_ASSIGN_OR_RETURN(sockets[j], dial(io, tcp::endpoint(address, to.port), from, deadline, rank,
                                          j, options.timeoutSeconds));
    Status status = connectHandshake(io, *sockets[j], self, j, deadline);
    if (!status.isOk()) {
      return ZEN_ERROR(status.code(), "rank {}: connecting to rank {}: {}", rank, j,
                       status.message());
    }
  }
  std::vector<Address> unused(n);
  ZEN_RETURN_IF_ERROR(acceptPeers(io, acceptor, self, n - 1 - rank, deadline,
                                  options.timeoutSeconds, log, &sockets, &unused));
  return sockets;
}

}  // namespace

Result<std::vector<SocketPtr>> connectMesh(asio::io_context& io,
                                           const TcpOptions& options,
                                           spdlog::logger& log) {
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(options.timeoutSeconds));
  ZEN_ASSIGN_OR_RETURN(const tcp::endpoint root, resolveEndpoint(io, options.rendezvousAddr));
  if (options.rank == 0) return rootMesh(io, options, root, deadline, log);
  return peerMesh(io, options, root, deadline, log);
}

}  // namespace zen::ops
