// Blocking-with-deadline wrappers over Asio's asynchronous operations for the TCP backend's
// setup (connect, accept, handshake), the io thread, address parsing and the little-endian
// field codec. Writes nothing to the wire itself.
#include "ops/tcp_io.h"

#include <condition_variable>
#include <memory>
#include <mutex>

namespace zen::ops {

namespace asio = boost::asio;

IoThread::IoThread() : work_(asio::make_work_guard(io_)), thread_([this] { io_.run(); }) {}

IoThread::~IoThread() {
  join();
}

void IoThread::join() {
  work_.reset();
  if (thread_.joinable()) thread_.join();
}

IoOutcome runWithDeadline(asio::io_context& io,
                          Clock::time_point deadline,
                          const std::function<void(IoHandler)>& start,
                          const std::function<void()>& cancel) {
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    IoOutcome outcome;
  };
  auto state = std::make_shared<State>();
  asio::post(io, [state, start] {
    start([state](const boost::system::error_code& ec, size_t bytes) {
      std::lock_guard<std::mutex> lock(state->mu);
      state->outcome.error = ec;
      state->outcome.bytes = bytes;
      state->done = true;
      state->cv.notify_all();
    });
  });
  std::unique_lock<std::mutex> lock(state->mu);
  if (!state->cv.wait_until(lock, deadline, [&] { return state->done; })) {
    asio::post(io, cancel);
    state->cv.wait(lock, [&] { return state->done; });
    state->outcome.timedOut = true;
  }
  return state->outcome;
}

Result<asio::ip::tcp::endpoint> resolveEndpoint(asio::io_context& io, const std::string& address) {
  const size_t colon = address.rfind(':');
  ZEN_CHECK_ARG(colon != std::string::npos && colon + 1 < address.size(),
                "address '{}': expected host:port", address);
  std::string host = address.substr(0, colon);
  const std::string port = address.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  ZEN_CHECK_ARG(!host.empty() && port.find_first_not_of("0123456789") == std::string::npos &&
                    port.size() <= 5 && std::stoi(port) <= 65535,
                "address '{}': expected host:port with a port in [0, 65535]", address);
  boost::system::error_code ec;
  asio::ip::tcp::resolver resolver(io);
  auto results = resolver.resolve(host, port, asio::ip::resolver_base::numeric_service, ec);
  if (ec || results.empty()) {
    return ZEN_ERROR(StatusCode::kInvalidArgument, "cannot resolve '{}': {}", address,
                     ec ? ec.message() : "no address");
  }
  return results.begin()->endpoint();
}

void putU32(uint8_t* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<uint8_t>(v >> (8 * i));
}

void putU64(uint8_t* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(v >> (8 * i));
}

uint32_t getU32(const uint8_t* in) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(in[i]) << (8 * i);
  return v;
}

uint64_t getU64(const uint8_t* in) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(in[i]) << (8 * i);
  return v;
}

}  // namespace zen::ops
