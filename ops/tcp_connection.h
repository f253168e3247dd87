#pragma once

#include <spdlog/logger.h>
#include <boost/asio.hpp>

#include <array>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "ops/mailbox.h"
#include "ops/tcp_io.h"

namespace zen::ops {

// Completion of the messages a TCP transport has posted, per peer, waited for by the
// driving thread.
class SendTracker {
 public:
  explicit SendTracker(int size);

  void started(int peer);
  void finished(int peer, const Status& status);
  // Waits until nothing is in flight. kTimeout lists the peers still not accepting bytes.
  Status waitAll(Clock::time_point deadline, int rank, double timeoutSeconds);
  // Waits without a bound, for after the sockets were closed (handlers then run promptly).
  void waitIdle();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<int> pending_;
  int total_ = 0;
  Status failure_;
};

// One authenticated socket to a peer. Reads frames eagerly into the Mailbox (bounds-checking
// each length before allocating) and writes posted frames one after another. All socket
// work runs on the io thread; the public methods only post to it.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  static constexpr size_t kHeaderBytes = 16;

  Connection(boost::asio::ip::tcp::socket socket,
             int rank,
             int peer,
             size_t maxFrameBytes,
             Mailbox* mailbox,
             SendTracker* tracker);

  // The frame a rank sends on each connection as it gives up after an error; its payload is
  // the error, which the peer reports as "rank N aborted after an error (why)" instead of a
  // bare "rank N closed the connection", so a failure that cascades through the mesh still
  // names its first cause (the in-process backend words it the same).
  static constexpr uint32_t kAbortTag = 0xffffffffu;
  static constexpr size_t kMaxAbortReasonBytes = 4096;

  void start();
  // `data` must stay valid until the tracker reports the message finished.
  void postWrite(uint32_t tag, const void* data, size_t bytes);
  void close();
  // Best effort, never blocking the caller: drops the frames not yet started, lets a half
  // written one finish (peers read eagerly) for at most kAbortLingerSeconds, sends the abort
  // frame if the socket takes it at once, then closes.
  void abort(std::string reason);
  static constexpr double kAbortLingerSeconds = 1.0;
  // How long a failed write waits for the reader's end (see writeFailed).
  static constexpr double kSendFailureGraceSeconds = 0.25;

 private:
  struct Write {
    std::array<uint8_t, kHeaderBytes> header;
    const void* data;
    size_t bytes;
  };

  void readHeader();
  void readBody(uint32_t tag, uint64_t length);
  void readFailed(const boost::system::error_code& ec);
  void received(uint32_t tag, ByteVector payload);
  void endRead(const Status& why);
  void writeNext();
  void writeFailed(const Status& failed, int frames);
  void reportFailedWrites();
  void sendAbortAndClose();
  void closeSocket();

  boost::asio::ip::tcp::socket socket_;
  const int rank_;
  const int peer_;
  const size_t maxFrameBytes_;
  Mailbox* mailbox_;
  SendTracker* tracker_;
  std::array<uint8_t, kHeaderBytes> header_{};
  std::deque<Write> writes_;                // io thread only; the front one is in flight
  bool closed_ = false;                     // io thread only
  std::optional<std::string> abortReason_;  // io thread only: aborting, with this error
  boost::asio::steady_timer abortTimer_;
  // io thread only: the reader's last word on the peer, once it stopped reading.
  std::optional<Status> readEnd_;
  // io thread only: the first failed write, and the frames whose failure is not yet reported.
  std::optional<Status> sendFailure_;
  int unreportedFailures_ = 0;
  boost::asio::steady_timer sendFailureTimer_;
};

}  // namespace zen::ops
