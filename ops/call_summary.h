#pragma once

// The call summary of a multi-rank sparse allreduce (ops/sparse_allreduce.cc): what every rank
// passed (shape, dtype, op, scheme, seed, nnz) and its local error, and the one verdict every
// rank draws from all of them.
//
// The summaries travel in the call's first collective, which is one alltoallv on every scheme:
// the message to each rank starts with the sender's summary (ops/wire_format.h
// startSummarized). zen, agsparse and blocks put their first payload behind it, so the summary
// costs no round of its own. hc and dense send it alone first: hc's exchanges are sendRecvs
// between partners, so no rank hears every summary before it merges a set, and a failure seen
// by one pair would leave the others waiting in later steps; dense's is a ring allreduce of
// numbers, with no room for bytes of its own and a ring that misbehaves on ranks of another
// size before any check could run. One collective for all schemes also turns ranks
// that asked for different schemes into the verdict's error instead of a wait in two different
// collectives.
//
// The rules the schemes keep: every rank enters the first exchange, a failed rank with its
// summary alone; a rank with no rows sends its summary alone too; nobody reads a payload
// before the verdict, so a rank with another row size or dtype is refused, never misparsed;
// after a failing verdict nobody runs a later round, and every rank returns the same
// kInvalidArgument naming the rank.

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "ops/sparse_allreduce.h"
#include "ops/transport.h"
#include "ops/wire_format.h"

namespace zen::ops {

// The scheme a requested one runs as: kAuto is zen in the dispatcher (the CPU executor
// profiles and passes a concrete scheme, ops/auto_scheme.h).
Scheme resolveScheme(Scheme scheme);

// This rank's summary of the call; local: the outcome of the dispatcher's local checks.
CallInfo describeCall(const SparseAllreduceOptions& o, int rank, const Status& local);
// Marks the summary failed with `why`: a scheme's own step before its first exchange failed,
// and the others must hear of it there rather than wait for a message that never comes.
void failCall(const Status& why, CallInfo* info);

// The verdict on every rank's summary (infos[p] from rank p), the same on every rank that holds
// the same summaries: every failed rank's error, else the first disagreement with rank 0
// (numRows / rowSize, dtype, op, scheme, zen's seed), as kInvalidArgument naming the rank.
// *totalNnz: the rows all ranks pass, on success.
Status checkCallInfos(const std::vector<CallInfo>& infos, int64_t* totalNnz);

// The first exchange and its verdict. sends[p] is the message to rank p (own included), each
// started with startSummarized of this rank's summary, the payload for p, if any, behind it
// (none from a failed rank or one with no rows). After the alltoallv every summary is decoded
// and checked; on success (*payloads)[p] is the payload rank p sent here (pointing into
// *received; empty for a rank with no rows) and *totalNnz the rows all ranks pass.
// Transport failures come back as the transport reported them.
Status exchangeSummaries(Transport& t,
                         const std::vector<ConstBytes>& sends,
                         std::vector<ByteVector>* received,
                         std::vector<ConstBytes>* payloads,
                         int64_t* totalNnz);

// The summary round of the schemes whose first exchange cannot carry it (hc, dense): the
// summary alone to every rank, then the verdict.
Status agreeOnCall(Transport& t, const CallInfo& mine, int64_t* totalNnz);

}  // namespace zen::ops
