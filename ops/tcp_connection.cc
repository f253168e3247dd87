// Framing on one TCP connection of the mesh. Every message is one frame:
//   header 16 B (little-endian): magic "ZNF1" u32, tag u32, payload length u64
//   payload: `length` bytes
// The reader checks the magic and the length against the transport's maxFrameBytes before
// allocating, and hands whole payloads to the Mailbox. Writes are queued so two frames never
// interleave on the socket.
#include "ops/tcp_connection.h"

#include <algorithm>
#include <chrono>
#include <new>
#include <string>
#include <utility>

namespace zen::ops {

namespace asio = boost::asio;

namespace {
constexpr uint32_t kFrameMagic = 0x31464e5a;  // "ZNF1"
}  // namespace

SendTracker::SendTracker(int size) : pending_(size, 0) {}

void SendTracker::started(int peer) {
  std::lock_guard<std::mutex> lock(mu_);
  ++pending_[peer];
  ++total_;
}

void SendTracker::finished(int peer, const Status& status) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    --pending_[peer];
    --total_;
    if (!status.isOk() && failure_.isOk()) failure_ = status;
  }
  cv_.notify_all();
}

Status SendTracker::waitAll(Clock::time_point deadline, int rank, double timeoutSeconds) {
  std::unique_lock<std::mutex> lock(mu_);
  const bool idle = cv_.wait_until(lock, deadline, [&] { return total_ == 0 || !failure_.isOk(); });
  if (!failure_.isOk()) return failure_;
  if (idle) return Status::ok();
  std::string stuck;
  for (size_t p = 0; p < pending_.size(); ++p) {
    if (pending_[p] > 0) stuck += (stuck.empty() ? "" : ", ") + std::to_string(p);
  }
  return ZEN_ERROR(StatusCode::kTimeout,
                   "rank {}: timed out after {} s sending to rank {} (not reading its socket)",
                   rank, timeoutSeconds, stuck);
}

void SendTracker::waitIdle() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return total_ == 0; });
}

Connection::Connection(asio::ip::tcp::socket socket,
                       int rank,
                       int peer,
                       size_t maxFrameBytes,
                       Mailbox* mailbox,
                       SendTracker* tracker)
    : socket_(std::move(socket)),
      rank_(rank),
      peer_(peer),
      maxFrameBytes_(maxFrameBytes),
      mailbox_(mailbox),
      tracker_(tracker),
      abortTimer_(socket_.get_executor()),
      sendFailureTimer_(socket_.get_executor()) {}

void Connection::start() {
  asio::post(socket_.get_executor(), [self = shared_from_this()] { self->readHeader(); });
}

void Connection::readHeader() {
  asio::async_read(
      socket_, asio::buffer(header_),
      [self = shared_from_this()](const boost::system::error_code& ec, size_t) {
        if (ec) return self->readFailed(ec);
        const uint32_t magic = getU32(self->header_.data());
        const uint32_t tag = getU32(self->header_.data() + 4);
        const uint64_t length = getU64(self->header_.data() + 8);
        if (magic != kFrameMagic) {
          self->endRead(
              ZEN_ERROR(StatusCode::kIoError, "rank {} sent a corrupt frame header", self->peer_));
          return self->close();
        }
        if (length > self->maxFrameBytes_ || (tag == kAbortTag && length > kMaxAbortReasonBytes)) {
          self->endRead(ZEN_ERROR(StatusCode::kIoError,
                                  "rank {} announced a frame of {} bytes, above the limit of {}",
                                  self->peer_, length, self->maxFrameBytes_));
          return self->close();
        }
        self->readBody(tag, length);
      });
}

void Connection::readBody(uint32_t tag, uint64_t length) {
  std::shared_ptr<ByteVector> payload;
  try {
    payload = std::make_shared<ByteVector>(length);
  } catch (const std::bad_alloc&) {
    endRead(ZEN_ERROR(StatusCode::kIoError,
                      "rank {}: cannot allocate {} bytes for a frame from rank {}", rank_, length,
                      peer_));
    return close();
  }
  if (length == 0) return received(tag, std::move(*payload));
  asio::async_read(
      socket_, asio::buffer(payload->data(), payload->size()),
      [self = shared_from_this(), payload, tag](const boost::system::error_code& ec, size_t) {
        if (ec) return self->readFailed(ec);
        self->received(tag, std::move(*payload));
      });
}

void Connection::received(uint32_t tag, ByteVector payload) {
  if (tag != kAbortTag) {
    mailbox_->deliver(peer_, tag, std::move(payload));
    return readHeader();
  }
  // The peer's last frame: nothing follows it.
  endRead(ZEN_ERROR(StatusCode::kIoError, "rank {} aborted after an error ({})", peer_,
                    std::string(payload.begin(), payload.end())));
}

void Connection::readFailed(const boost::system::error_code& ec) {
  if (ec == asio::error::eof) {
    endRead(ZEN_ERROR(StatusCode::kIoError, "rank {} closed the connection", peer_));
  } else {
    endRead(
        ZEN_ERROR(StatusCode::kIoError, "connection to rank {} failed: {}", peer_, ec.message()));
  }
}

void Connection::endRead(const Status& why) {
  if (readEnd_) return;
  readEnd_ = why;
  mailbox_->failPeer(peer_, why);
  reportFailedWrites();
}

void Connection::postWrite(uint32_t tag, const void* data, size_t bytes) {
  Write write{{}, data, bytes};
  putU32(write.header.data(), kFrameMagic);
  putU32(write.header.data() + 4, tag);
  putU64(write.header.data() + 8, bytes);
  asio::post(socket_.get_executor(), [self = shared_from_this(), write] {
    if (self->sendFailure_) return self->writeFailed(*self->sendFailure_, 1);
    if (self->closed_ || self->abortReason_) {
      return self->tracker_->finished(
          self->peer_,
          ZEN_ERROR(StatusCode::kIoError, "connection to rank {} is closed", self->peer_));
    }
    self->writes_.push_back(write);
    if (self->writes_.size() == 1) self->writeNext();
  });
}

void Connection::writeNext() {
  const Write& write = writes_.front();
  const std::array<asio::const_buffer, 2> buffers{asio::buffer(write.header),
                                                  asio::buffer(write.data, write.bytes)};
  asio::async_write(
      socket_, buffers, [self = shared_from_this()](const boost::system::error_code& ec, size_t) {
        const size_t bytes = self->writes_.front().bytes;
        self->writes_.pop_front();
        if (!ec) {
          self->tracker_->finished(self->peer_, Status::ok());
          if (self->abortReason_) return self->sendAbortAndClose();
          if (!self->writes_.empty()) self->writeNext();
          return;
        }
        // The stream is broken: the queued frames can never follow.
        const int frames = 1 + static_cast<int>(self->writes_.size());
        self->writes_.clear();
        self->writeFailed(
            ZEN_ERROR(StatusCode::kIoError, "rank {}: sending {} bytes to rank {} failed: {}",
                      self->rank_, bytes, self->peer_, ec.message()),
            frames);
        if (self->abortReason_) self->closeSocket();
      });
}

// A write fails (broken pipe, reset) when the peer closed the connection, often after an
// abort frame that the reader has not yet handed over: the failure waits for the reader's
// end, at most kSendFailureGraceSeconds, so that it carries the peer's reason and a failure
// cascading through the mesh still names its first cause.
void Connection::writeFailed(const Status& failed, int frames) {
  if (!sendFailure_) sendFailure_ = failed;
  unreportedFailures_ += frames;
  if (readEnd_ || abortReason_) return reportFailedWrites();
  if (unreportedFailures_ != frames) return;  // the timer already runs
  sendFailureTimer_.expires_after(std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::duration<double>(kSendFailureGraceSeconds)));
  sendFailureTimer_.async_wait([self = shared_from_this()](const boost::system::error_code&) {
    self->reportFailedWrites();
  });
}

void Connection::reportFailedWrites() {
  if (unreportedFailures_ == 0) return;
  Status failed = *sendFailure_;
  if (readEnd_) {
    failed = ZEN_ERROR(failed.code(), "{} ({})", failed.message(), readEnd_->message());
  }
  for (; unreportedFailures_ > 0; --unreportedFailures_) tracker_->finished(peer_, failed);
  sendFailureTimer_.cancel();
}

void Connection::abort(std::string reason) {
  if (reason.size() > kMaxAbortReasonBytes) reason.resize(kMaxAbortReasonBytes);
  asio::post(socket_.get_executor(), [self = shared_from_this(), reason = std::move(reason)] {
    if (self->closed_ || self->abortReason_) return;
    self->abortReason_ = reason;
    if (self->writes_.empty()) return self->sendAbortAndClose();
    // A frame is half written: the abort frame can only follow it. The queued ones never go.
    const Status dropped =
        ZEN_ERROR(StatusCode::kIoError, "rank {}: the connection to rank {} is aborting",
                  self->rank_, self->peer_);
    while (self->writes_.size() > 1) {
      self->writes_.pop_back();
      self->tracker_->finished(self->peer_, dropped);
    }
    self->abortTimer_.expires_after(std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::chrono::duration<double>(kAbortLingerSeconds)));
    self->abortTimer_.async_wait([self](const boost::system::error_code& ec) {
      if (!ec) self->closeSocket();
    });
  });
}

void Connection::sendAbortAndClose() {
  const std::string& reason = *abortReason_;
  ByteVector frame(kHeaderBytes + reason.size());
  putU32(frame.data(), kFrameMagic);
  putU32(frame.data() + 4, kAbortTag);
  putU64(frame.data() + 8, reason.size());
  std::copy(reason.begin(), reason.end(), frame.begin() + kHeaderBytes);
  // Non-blocking: a peer that does not read gets a truncated frame (read as a closed
  // connection), never a stuck io thread.
  boost::system::error_code ignored;
  socket_.non_blocking(true, ignored);
  asio::write(socket_, asio::buffer(frame), ignored);
  closeSocket();
}

void Connection::closeSocket() {
  if (closed_) return;
  closed_ = true;
  abortTimer_.cancel();
  boost::system::error_code ignored;
  socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
}

void Connection::close() {
  asio::post(socket_.get_executor(), [self = shared_from_this()] { self->closeSocket(); });
}

}  // namespace zen::ops
