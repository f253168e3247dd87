#pragma once

#include <boost/asio.hpp>

#include <functional>
#include <string>
#include <thread>

#include "ops/transport.h"

namespace zen::ops {

// The one thread that runs a TCP transport's socket operations. Asio sockets are not safe for
// concurrent calls, so every operation on them starts on this thread (posted to it).
class IoThread {
 public:
  IoThread();
  ~IoThread();
  IoThread(const IoThread&) = delete;
  IoThread& operator=(const IoThread&) = delete;

  boost::asio::io_context& context() { return io_; }
  // Lets run() return once no operation is pending (close the sockets first), then joins.
  void join();

 private:
  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  std::thread thread_;
};

struct IoOutcome {
  bool timedOut = false;
  boost::system::error_code error;
  size_t bytes = 0;
};
using IoHandler = std::function<void(const boost::system::error_code&, size_t)>;

// Starts an asynchronous operation on the io thread and blocks the caller until it completes
// or the deadline passes. At the deadline `cancel` runs on the io thread (closing the socket
// or acceptor aborts the operation) and the wait continues until the handler has run, so no
// buffer is touched after this returns. Asio's blocking calls take no timeout, hence this.
IoOutcome runWithDeadline(boost::asio::io_context& io,
                          Clock::time_point deadline,
                          const std::function<void(IoHandler)>& start,
                          const std::function<void()>& cancel);

// "host:port" (IPv6 as "[::1]:port") resolved to an endpoint; port 0 is allowed.
Result<boost::asio::ip::tcp::endpoint> resolveEndpoint(boost::asio::io_context& io,
                                                       const std::string& address);

// Little-endian fixed-width fields of the handshake and frame headers.
void putU32(uint8_t* out, uint32_t v);
void putU64(uint8_t* out, uint64_t v);
uint32_t getU32(const uint8_t* in);
uint64_t getU64(const uint8_t* in);

}  // namespace zen::ops
