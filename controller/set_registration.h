#pragma once

// Rank 0's answers to the registration entries of the job's table (core/message.h "Process
// sets"). Every rank of the job posts kAddProcessSet with the same members (ascending, within
// the job) and kRemoveProcessSet with the same id; anything else fails on every rank with a
// message that says which ranks sent what. As in Horovod, a set with the same members as an
// existing one (the job included) is refused: ids name distinct rank lists. Ids are assigned
// 1, 2, ... and never reused (Horovod reuses them; a stale id then cannot reach a new set).

#include <cstdint>
#include <string>
#include <vector>

#include "controller/message_table.h"
#include "core/message.h"
#include "core/process_sets.h"

namespace zen::controller {

// The kAddProcessSet response registering the entry's members as set newId, or an error.
Response addSetResponse(const std::string& name,
                        const TableEntry& entry,
                        const ProcessSets& sets,
                        int32_t newId);

// The kRemoveProcessSet response for the entry's set, or an error (set 0, an unknown id).
Response removeSetResponse(const std::string& name,
                           const TableEntry& entry,
                           const ProcessSets& sets);

// The error a name of set `id` still pending when the set goes gets: `members` are the set's
// job ranks, the entry's rank numbers are positions in them.
Response removedWhilePending(const std::string& name,
                             const TableEntry& entry,
                             int32_t id,
                             const std::vector<int32_t>& members);

}  // namespace zen::controller
