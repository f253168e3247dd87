#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <vector>

#include "core/status.h"
#include "ops/transport.h"

namespace zen::ops {

// Messages that arrived for one rank, per sending peer, matched by tag in arrival order.
// Producers (the in-process hub, a TCP connection's reader) deliver eagerly, so a sender
// never waits for the receiver to post: rings and all-to-alls cannot deadlock on buffer
// space. The cost is one copy and holding unclaimed messages in memory.
class Mailbox {
 public:
  explicit Mailbox(int size);

  void deliver(int peer, uint32_t tag, ByteVector payload);
  // The channel from `peer` is gone; messages that already arrived stay receivable.
  void failPeer(int peer, const Status& why);
  // This rank gave up: every waiter wakes with `why`.
  void failAll(const Status& why);

  // The oldest message from `peer` with `tag`. kTimeout at the deadline (the caller words
  // it), the peer's failure once its channel is gone and nothing is left.
  Result<ByteVector> take(int peer, uint32_t tag, Clock::time_point deadline);

 private:
  struct Message {
    uint32_t tag;
    ByteVector payload;
  };
  struct Inbox {
    std::deque<Message> messages;
    Status failure;
  };

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Inbox> inboxes_;
  Status failure_;
};

}  // namespace zen::ops
