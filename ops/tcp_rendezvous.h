#pragma once

#include <spdlog/logger.h>
#include <boost/asio.hpp>

#include <memory>
#include <vector>

#include "ops/tcp_transport.h"

namespace zen::ops {

using SocketPtr = std::unique_ptr<boost::asio::ip::tcp::socket>;

// One authenticated socket per peer (null at this rank's index), Nagle off, or why the mesh
// could not be built before options.timeoutSeconds.
Result<std::vector<SocketPtr>> connectMesh(boost::asio::io_context& io,
                                           const TcpOptions& options,
                                           spdlog::logger& log);

}  // namespace zen::ops
