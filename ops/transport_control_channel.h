#pragma once

// core's ControlChannel over an ops::Transport of its own: a second transport instance (its
// own TCP mesh, its own MPI communicator, its own in-process hub) dedicated to control, so
// negotiation messages and data-plane collectives never interleave, and one protocol code
// path serves MPI, TCP and in-process jobs (docs/architecture.md "Control and data planes").
//
// Every operation is a star through rank 0, which is where the plan is made anyway:
// - allreduceAnd: each rank sends its words to rank 0 (point to point), rank 0 ANDs them and
//   broadcasts the result. Per cycle, per rank: 8W bytes up and 8W down (W words); rank 0
//   moves 8W(n-1) each way.
// - gather: an 8-byte length, then the bytes, from each rank to rank 0.
// - broadcast: an 8-byte length, then the bytes, from rank 0 to each rank.
// Each transport call is bounded by ZEN_TIMEOUT (the transport's timeout).

#include <memory>

#include "core/control_channel.h"
#include "ops/transport.h"

namespace zen::ops {

class TransportControlChannel final : public ControlChannel {
 public:
  explicit TransportControlChannel(std::unique_ptr<Transport> transport);

  int rank() const override { return transport_->rank(); }
  int size() const override { return transport_->size(); }
  Status allreduceAnd(std::vector<uint64_t>* bits) override;
  Status gather(const std::vector<uint8_t>& mine,
                std::vector<std::vector<uint8_t>>* gathered) override;
  Status broadcast(std::vector<uint8_t>* bytes) override;

  Transport& transport() { return *transport_; }

 private:
  std::unique_ptr<Transport> transport_;
};

}  // namespace zen::ops
