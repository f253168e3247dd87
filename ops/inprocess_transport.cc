// The in-process backend: ranks are threads sharing an InProcessHub, which holds one Mailbox
// per rank. A send copies the payload into the receiver's mailbox (no wire; the counters
// record the payload bytes as if there were one). A rank that leaves or aborts marks itself
// failed in every other mailbox, so peers waiting on it get kIoError instead of a timeout, and
// a send to it fails with the same reason.
#include "ops/inprocess_transport.h"

#include <mutex>
#include <utility>
#include <vector>

#include "ops/mailbox.h"
#include "ops/message_transport.h"

namespace zen::ops {

class InProcessHub {
 public:
  explicit InProcessHub(int size) : joined_(size, false), left_(size) {
    for (int r = 0; r < size; ++r) mailboxes_.push_back(std::make_unique<Mailbox>(size));
  }

  int size() const { return static_cast<int>(mailboxes_.size()); }
  Mailbox* mailbox(int rank) { return mailboxes_[rank].get(); }

  Status join(int rank) {
    std::lock_guard<std::mutex> lock(mu_);
    if (joined_[rank]) {
      return ZEN_ERROR(StatusCode::kFailedPrecondition, "rank {} already joined this hub", rank);
    }
    joined_[rank] = true;
    return Status::ok();
  }

  // Why `rank` left (closed or aborted), ok while it has not.
  Status left(int rank) {
    std::lock_guard<std::mutex> lock(mu_);
    return left_[rank];
  }

  void leave(int rank, const Status& why) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!left_[rank].isOk()) return;
      left_[rank] = why;
    }
    for (int r = 0; r < size(); ++r) {
      if (r != rank) mailboxes_[r]->failPeer(rank, why);
    }
  }

 private:
  std::mutex mu_;
  std::vector<std::unique_ptr<Mailbox>> mailboxes_;
  std::vector<bool> joined_;
  std::vector<Status> left_;
};

namespace {

class InProcessTransport final : public MessageTransport {
 public:
  InProcessTransport(std::shared_ptr<InProcessHub> hub, const TransportOptions& options)
      : MessageTransport(
            options.rank, options.size, options.timeoutSeconds, hub->mailbox(options.rank)),
        hub_(std::move(hub)) {}

  ~InProcessTransport() override {
    hub_->leave(rank(), ZEN_ERROR(StatusCode::kIoError, "rank {} closed its transport", rank()));
  }

  const char* backendName() const override { return "in-process"; }

 protected:
  Status postSend(int peer, uint32_t tag, const void* data, size_t bytes) override {
    // The peer's reason, as a receive from it would give: whether a peer's abort reaches a
    // rank as a failed send or a failed receive is a race.
    const Status left = hub_->left(peer);
    if (!left.isOk()) {
      return ZEN_ERROR(StatusCode::kIoError, "rank {}: cannot send to rank {}: {}", rank(), peer,
                       left.message());
    }
    const auto* begin = static_cast<const uint8_t*>(data);
    hub_->mailbox(peer)->deliver(rank(), tag, ByteVector(begin, begin + bytes));
    return Status::ok();
  }

  Status flushSends(Clock::time_point) override { return Status::ok(); }

  void abort(const Status& why) override {
    hub_->leave(rank(), ZEN_ERROR(StatusCode::kIoError, "rank {} aborted after an error ({})",
                                  rank(), why.message()));
  }

 private:
  std::shared_ptr<InProcessHub> hub_;
};

}  // namespace

std::shared_ptr<InProcessHub> makeInProcessHub(int size) {
  return std::make_shared<InProcessHub>(size);
}

Result<std::unique_ptr<Transport>> createInProcessTransport(std::shared_ptr<InProcessHub> hub,
                                                            const TransportOptions& options) {
  ZEN_CHECK_ARG(hub != nullptr, "in-process transport: null hub");
  ZEN_CHECK_ARG(options.size == hub->size(), "in-process transport: size {} but the hub has {}",
                options.size, hub->size());
  ZEN_CHECK_ARG(options.rank >= 0 && options.rank < options.size,
                "in-process transport: rank {} outside [0, {})", options.rank, options.size);
  ZEN_CHECK_ARG(options.timeoutSeconds > 0, "in-process transport: timeout {} s",
                options.timeoutSeconds);
  ZEN_RETURN_IF_ERROR(hub->join(options.rank));
  return std::unique_ptr<Transport>(new InProcessTransport(std::move(hub), options));
}

}  // namespace zen::ops
