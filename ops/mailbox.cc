// Per-peer inboxes with tag matching and deadlines; the receive side of the in-process and
// TCP backends. Nothing goes on the wire here.
#include "ops/mailbox.h"

#include <utility>

namespace zen::ops {

Mailbox::Mailbox(int size) : inboxes_(size) {}

void Mailbox::deliver(int peer, uint32_t tag, ByteVector payload) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    inboxes_[peer].messages.push_back(Message{tag, std::move(payload)});
  }
  cv_.notify_all();
}

void Mailbox::failPeer(int peer, const Status& why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (inboxes_[peer].failure.isOk()) inboxes_[peer].failure = why;
  }
  cv_.notify_all();
}

void Mailbox::failAll(const Status& why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (failure_.isOk()) failure_ = why;
  }
  cv_.notify_all();
}

Result<ByteVector> Mailbox::take(int peer, uint32_t tag, Clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  Inbox& inbox = inboxes_[peer];
  while (true) {
    if (!failure_.isOk()) return failure_;
    for (auto it = inbox.messages.begin(); it != inbox.messages.end(); ++it) {
      if (it->tag == tag) {
        ByteVector payload = std::move(it->payload);
        inbox.messages.erase(it);
        return payload;
      }
    }
    if (!inbox.failure.isOk()) return inbox.failure;
    if (Clock::now() >= deadline) return Status(StatusCode::kTimeout, "deadline passed");
    cv_.wait_until(lock, deadline);
  }
}

}  // namespace zen::ops
