#pragma once

// Horovod's alltoall on the CPU (CONVENTIONS.md §3: options struct + free function), over
// Transport::alltoallv, the all-to-all-v the sparse schemes use. Rank r sends rows
// [sum(sendRows[0..d)), + sendRows[d]) of its input to rank d and receives, in rank order,
// what every rank sent it. The splits come from the negotiated plan (Response::splits), so
// every rank's recvRows match the senders' sendRows; a size that does not is a kIoError.
//
// Steps: check the options; one alltoallv straight from the input (no staging copy: each
// rank's rows are one range of it; size == 1 copies locally, no wire); check every received
// size against recvRows; concatenate into the output.
// Bytes on the wire per rank: sendRows[d] x rowBytes to each peer d, recvRows[s] x rowBytes
// from each peer s (nothing for its own rows).

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/executor.h"
#include "core/status.h"
#include "ops/transport.h"

namespace zen::ops {

struct AlltoallOptions {
  Transport* transport = nullptr;
  const void* input = nullptr;    // sum(sendRows) rows of rowBytes, rank 0's first
  size_t rowBytes = 0;            // bytes per row: the trailing dimensions times the dtype's size
  std::vector<int64_t> sendRows;  // rows to each rank, size() entries
  std::vector<int64_t> recvRows;  // rows from each rank, size() entries
  std::vector<ExecPhase>* phases = nullptr;  // optional: the wire collective, then UNFUSE
};

// *output becomes sum(recvRows) rows: rank 0's to this rank first.
Status alltoall(const AlltoallOptions& options, std::vector<std::byte>* output);

}  // namespace zen::ops
