#pragma once

#include <cstdint>

#include "ops/mailbox.h"
#include "ops/transport.h"

namespace zen::ops {

// The collectives written once over two primitives, for the backends that move whole
// messages (in-process, TCP): post a message to a peer, and take one from this rank's
// Mailbox. Algorithms: direct exchange for alltoallv / allgatherv, flat fan-out for
// broadcast, ring for allreduce and reducescatter, dissemination for barrier. A subset
// (message_subset.cc) runs the same algorithms over the three wire calls below, forwarded to
// the job's transport with its members' job ranks and its own tags.
class MessageTransport : public Transport {
 protected:
  MessageTransport(int rank, int size, double timeoutSeconds, Mailbox* mailbox);

  // Starts sending one message; `data` must stay valid until flushSends returns.
  virtual Status postSend(int peer, uint32_t tag, const void* data, size_t bytes) = 0;
  // Waits until every posted message has left this rank (kTimeout names the stuck peer).
  virtual Status flushSends(Clock::time_point deadline) = 0;
  // The oldest message from `peer` with `tag` in this rank's Mailbox (Mailbox::take).
  virtual Result<ByteVector> take(int peer, uint32_t tag, Clock::time_point deadline);

  Status doSend(int peer, const void* data, size_t bytes, uint32_t tag) override;
  Status doRecv(int peer, void* data, size_t bytes, uint32_t tag) override;
  Status doSendRecv(int to,
                    const void* data,
                    size_t bytes,
                    int from,
                    ByteVector* received,
                    uint32_t tag) override;
  Status doAlltoallv(const std::vector<ConstBytes>& sends,
                     std::vector<ByteVector>* received) override;
  Status doAllgatherv(const void* data, size_t bytes, std::vector<ByteVector>* gathered) override;
  Status doAllreduce(void* data, size_t count, DataType dtype, ReduceOp op) override;
  Status doReducescatter(void* data,
                         const std::vector<size_t>& counts,
                         DataType dtype,
                         ReduceOp op) override;
  Status doBroadcast(void* data, size_t bytes, int root) override;
  Status doBarrier() override;
  Result<std::unique_ptr<Transport>> doSubset(const std::vector<int32_t>& members,
                                              int32_t setId) override;

 private:
  class Subset;

  Status post(int peer, uint32_t tag, const void* data, size_t bytes);
  Result<ByteVector> receive(int peer, uint32_t tag, Clock::time_point deadline, const char* op);
  Status receiveInto(
      int peer, uint32_t tag, void* data, size_t bytes, Clock::time_point deadline, const char* op);
  // The ring over blocks [begins[p], begins[p+1]) of `dtype` elements, in place: the
  // reduce-scatter, then (allgather) the allgather of the reduced blocks.
  Status ring(void* data,
              const std::vector<size_t>& begins,
              DataType dtype,
              ReduceOp op,
              bool allgather,
              const char* what);
  // One half of it over elements of a wire dtype, in place:
  // reduce-scatter (reduce: rank p ends with block p reduced by op) or allgather (every rank
  // ends with every block).
  Status ringSteps(uint8_t* data,
                   const std::vector<size_t>& begins,
                   DataType dtype,
                   ReduceOp op,
                   bool reduce,
                   Clock::time_point deadline,
                   const char* what);

  Mailbox* mailbox_;
};

}  // namespace zen::ops
