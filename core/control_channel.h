#pragma once

// The control plane as the background loop sees it (ARCHITECTURE.md "The shape in one
// paragraph"): the three collectives one negotiation cycle needs. Implemented in ops/ over a
// Transport of its own (ops/transport_control_channel.h), so control messages never
// interleave with the data plane's. Every call is collective (all ranks, same order) and
// bounded by ZEN_TIMEOUT; after a failure the channel is broken and every later call fails.

#include <cstdint>
#include <vector>

#include "core/status.h"

namespace zen {

class ControlChannel {
 public:
  virtual ~ControlChannel() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Bitwise AND of every rank's vector, in place; all ranks pass the same length.
  virtual Status allreduceAnd(std::vector<uint64_t>* bits) = 0;
  // Rank 0 gets every rank's bytes, (*gathered)[r] from rank r (its own included); the other
  // ranks' `gathered` is left empty. Lengths may differ between ranks.
  virtual Status gather(const std::vector<uint8_t>& mine,
                        std::vector<std::vector<uint8_t>>* gathered) = 0;
  // Rank 0's bytes replace every other rank's; only rank 0's length matters.
  virtual Status broadcast(std::vector<uint8_t>* bytes) = 0;
};

}  // namespace zen
