// The TCP backend: a full mesh of authenticated connections (tcp_rendezvous.cc), one frame
// per message (tcp_connection.cc: 16-byte header + payload), collectives from
// MessageTransport. One io thread per transport runs all socket work; the driving thread
// posts writes and waits on the Mailbox and the SendTracker with the call's deadline. On the
// first error every connection is closed after an abort frame carrying the error, so peers
// waiting on this rank see kIoError at once, naming the first cause.
#include "ops/tcp_transport.h"

#include <utility>

#include "core/logging.h"
#include "ops/message_transport.h"
#include "ops/tcp_connection.h"
#include "ops/tcp_io.h"
#include "ops/tcp_rendezvous.h"

namespace zen::ops {
namespace {

class TcpTransport final : public MessageTransport {
 public:
  TcpTransport(const TcpOptions& options, std::shared_ptr<spdlog::logger> log)
      : MessageTransport(options.rank, options.size, options.timeoutSeconds, &mailbox_),
        log_(std::move(log)),
        mailbox_(options.size),
        tracker_(options.size) {}

  ~TcpTransport() override {
    closeAll();
    io_.join();
  }

  const char* backendName() const override { return "tcp"; }

  Status connect(const TcpOptions& options) {
    ZEN_ASSIGN_OR_RETURN(std::vector<SocketPtr> sockets,
                         connectMesh(io_.context(), options, *log_));
    connections_.resize(size());
    for (int peer = 0; peer < size(); ++peer) {
      if (peer == rank()) continue;
      connections_[peer] = std::make_shared<Connection>(
          std::move(*sockets[peer]), rank(), peer, options.maxFrameBytes, &mailbox_, &tracker_);
      connections_[peer]->start();
    }
    return Status::ok();
  }

 protected:
  Status postSend(int peer, uint32_t tag, const void* data, size_t bytes) override {
    tracker_.started(peer);
    connections_[peer]->postWrite(tag, data, bytes);
    return Status::ok();
  }

  Status flushSends(Clock::time_point deadline) override {
    return tracker_.waitAll(deadline, rank(), timeoutSeconds());
  }

  void abort(const Status& why) override {
    log_->warn("rank {}: closing every TCP connection after: {}", rank(), why.toString());
    mailbox_.failAll(ZEN_ERROR(StatusCode::kAborted, "rank {} aborted its transport", rank()));
    for (auto& connection : connections_) {
      if (connection) connection->abort(why.message());
    }
    // Writes still in flight end with an error once their socket is closed; wait for them so
    // no caller buffer is read after the failed call returns.
    tracker_.waitIdle();
  }

 private:
  void closeAll() {
    for (auto& connection : connections_) {
      if (connection) connection->close();
    }
  }

  std::shared_ptr<spdlog::logger> log_;
  // Declared before io_: the io thread's handlers use them until io_ is joined.
  Mailbox mailbox_;
  SendTracker tracker_;
  IoThread io_;
  std::vector<std::shared_ptr<Connection>> connections_;
};

}  // namespace

TcpOptions TcpOptions::fromConfig(const Config& config) {
  TcpOptions options;
  static_cast<TransportOptions&>(options) = TransportOptions::fromConfig(config);
  options.rendezvousAddr = config.controllerAddr;
  options.secret = config.secret;
  return options;
}

Result<std::unique_ptr<Transport>> createTcpTransport(const TcpOptions& options) {
  ZEN_CHECK_ARG(options.size >= 1 && options.rank >= 0 && options.rank < options.size,
                "tcp transport: rank {} of size {}", options.rank, options.size);
  ZEN_CHECK_ARG(options.timeoutSeconds > 0, "tcp transport: timeout {} s", options.timeoutSeconds);
  ZEN_CHECK_ARG(options.size == 1 || !options.rendezvousAddr.empty(),
                "tcp transport: no rendezvous address (host:port of rank 0)");
  ZEN_CHECK_ARG(options.rank == 0 ||
                    options.rendezvousAddr.substr(options.rendezvousAddr.rfind(':') + 1) != "0",
                "tcp transport: rank {} needs rank 0's actual port, not {}", options.rank,
                options.rendezvousAddr);
  auto log = options.logger ? options.logger : makeLogger(options.rank, "warn");
  auto transport = std::make_unique<TcpTransport>(options, log);
  if (options.size > 1) ZEN_RETURN_IF_ERROR(transport->connect(options));
  return std::unique_ptr<Transport>(std::move(transport));
}

}  // namespace zen::ops
