#pragma once

// Turns a ready table entry into the Response every rank executes, or into an error response
// that every rank's callback receives (Horovod's ConstructResponse). Messages name the tensor,
// the field and which ranks sent what: "tensor 'emb.weight': rank 2 sent dtype float16, rank 0
// float32". Unlike Horovod, joined ranks may take part in sparse allreduce and allgather (they
// contribute no rows) and reducescatter (the op's identity); a broadcast from a joined root
// and an alltoall while any rank has joined are refused (as Horovod refuses them). Alltoall's
// splits are checked here, for every rank at once: size entries, none negative, summing to
// that rank's first dimension (or, without splits, a first dimension divisible by size).

#include <optional>
#include <string>
#include <vector>

#include "controller/message_table.h"
#include "core/message.h"
#include "core/status.h"

namespace zen::controller {

// Checks one request on its own, before any other rank's is known: op-specific fields make
// sense (sparse row size matches the dense shape, broadcast root in range, join name, process
// set fields). size: the ranks of the request's process set, which its rank numbers are
// within. Used at enqueue, so a bad call fails at once on the calling rank, and again on
// rank 0.
Status checkRequest(const Request& request, int size);

// What every rank is told when a ready entry cannot run: a name posted twice, a request that
// fails checkRequest, or ranks that disagree (op first, then dtype, device kind, shape, reduce
// op, row size, root, add_process_set's members, remove_process_set's set). nullopt: none.
std::optional<std::string> entryProblem(const std::string& name, const TableEntry& entry);
// The requests of the ranks that posted, in rank order.
std::vector<const Request*> postersOf(const TableEntry& entry);

// The response for a ready name. `joined[r]` says rank r joined instead of posting.
Response buildResponse(const std::string& name,
                       const TableEntry& entry,
                       const std::vector<bool>& joined);

Response errorResponse(const std::string& name, std::string message);

// "rank 2", "ranks 0-3, 5": compact for large jobs.
std::string formatRanks(const std::vector<int>& ranks);

}  // namespace zen::controller
