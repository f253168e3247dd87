// A process set's transport on the message backends (in-process, TCP): a view over the job's
// transport that runs MessageTransport's collectives unchanged. Its rank p is the job's rank
// members[p] (Transport::jobRank), and every tag it uses, user and internal, gets the set id
// in its upper 16 bits, so its messages and those of the job or another set between the same
// two ranks land in separate queues of the same Mailbox, however they interleave. Nothing
// new goes on the wire: the TCP frame header carries the 32-bit tag as before, and the
// abort frame's tag (0xffffffff) stays out of reach (ids <= 0xffff, tags < 2^15).
#include <memory>

#include "core/process_sets.h"
#include "ops/message_transport.h"

namespace zen::ops {

class MessageTransport::Subset final : public MessageTransport {
 public:
  // `wire`: the job's transport, whose connections and mailbox this one uses.
  Subset(MessageTransport* wire, int rank, int size, int32_t setId)
      : MessageTransport(rank, size, wire->timeoutSeconds(), nullptr),
        wire_(wire),
        tagSpace_(static_cast<uint32_t>(setId) << 16) {}

  const char* backendName() const override { return wire_->backendName(); }

  static Result<std::unique_ptr<Transport>> make(MessageTransport* wire,
                                                 int rank,
                                                 const std::vector<int32_t>& members,
                                                 int32_t setId) {
    return std::unique_ptr<Transport>(
        new Subset(wire, rankInSet(members, rank), static_cast<int>(members.size()), setId));
  }

 protected:
  Status postSend(int peer, uint32_t tag, const void* data, size_t bytes) override {
    return wire_->postSend(jobRank(peer), tagSpace_ | tag, data, bytes);
  }

  // Waits for the job transport's sends, which are this set's: one thread drives them all.
  Status flushSends(Clock::time_point deadline) override { return wire_->flushSends(deadline); }

  Result<ByteVector> take(int peer, uint32_t tag, Clock::time_point deadline) override {
    return wire_->take(jobRank(peer), tagSpace_ | tag, deadline);
  }

  // A subset of this set: members are ranks of this set, so a view over the same wire (the
  // job's ranks are composed by Transport::subset).
  Result<std::unique_ptr<Transport>> doSubset(const std::vector<int32_t>& members,
                                              int32_t setId) override {
    return make(wire_, rank(), members, setId);
  }

 private:
  MessageTransport* wire_;
  const uint32_t tagSpace_;
};

Result<std::unique_ptr<Transport>> MessageTransport::doSubset(const std::vector<int32_t>& members,
                                                              int32_t setId) {
  return Subset::make(this, rank(), members, setId);
}

}  // namespace zen::ops
