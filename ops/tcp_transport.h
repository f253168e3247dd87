#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "ops/transport.h"

namespace zen::ops {

struct TcpOptions : TransportOptions {
  // A bound on any one frame's length, checked before a receive buffer is allocated.
  static constexpr size_t kDefaultMaxFrameBytes = size_t{16} << 30;

  // host:port where rank 0 listens for the rendezvous (ZEN_CONTROLLER_ADDR style). Port 0
  // lets rank 0 pick a free port; it reports it through onListening.
  std::string rendezvousAddr;
  std::string secret;  // per-job secret every connection must prove (ZEN_SECRET)
  size_t maxFrameBytes = kDefaultMaxFrameBytes;
  // Rank 0 only: called once the rendezvous port is bound, before waiting for the others.
  std::function<void(uint16_t port)> onListening;
  // Rank 0 only, when >= 0: a socket already listening on rendezvousAddr's port (zenrun's,
  // ZEN_CONTROLLER_FD), accepted on instead of binding the port, and closed with the mesh's
  // rendezvous. Anything else there (closed since, or another file after a re-init) is left
  // alone and the port bound as usual.
  int rendezvousFd = -1;
  // An IPv4 address of this host (ZEN_IFACE's interface, ops/net_interface.h): every rank but
  // 0 binds its listener there, dials from it and so is published at it in the address table.
  // Empty: the interface that reaches rank 0. Rank 0 listens at rendezvousAddr either way.
  std::string localAddress;

  // rank, size, timeout and secret from Config; rendezvousAddr = Config::controllerAddr.
  static TcpOptions fromConfig(const Config& config);
};

// Joins the job's full TCP mesh: rank 0 accepts every other rank at rendezvousAddr and tells
// each the others' listening addresses; then each pair connects (the higher rank dials).
// Blocks until the mesh is complete or options.timeoutSeconds has passed. Connections whose
// handshake fails (wrong secret, unknown rank) are refused and logged, and not counted.
Result<std::unique_ptr<Transport>> createTcpTransport(const TcpOptions& options);

}  // namespace zen::ops
