#pragma once

// The negotiation messages (ARCHITECTURE.md "The shape in one paragraph"): every cycle each
// rank sends rank 0 a RequestList of the tensors it has posted, and rank 0 answers every rank
// with one ResponseList, the plan all ranks execute in the same order. The wire codec lives in
// core/message_codec.h.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/tensor.h"

namespace zen {

enum class OpType : uint8_t {
  kSparseAllreduce,  // row-sparse COO gradients (Zen's Push/Pull or another scheme)
  kAllreduce,
  kAllgather,
  kBroadcast,
  kJoin,  // "this rank has no more data"; see kJoinTensorName
  kBarrier,
  kAlltoall,          // rows of dim 0 to each rank (Request::splits), the received ones back
  kReducescatter,     // reduced over the ranks, rank i keeps the i-th piece of dim 0
  kAddProcessSet,     // every rank of the job registers Request::members as a new process set
  kRemoveProcessSet,  // every rank of the job removes Request::processSet
};
inline constexpr int kNumOpTypes = 10;
const char* opTypeName(OpType op);
// Whether the op moves tensor data (not a join, barrier or process-set registration).
inline bool carriesTensors(OpType op) {
  return op != OpType::kJoin && op != OpType::kBarrier && op != OpType::kAddProcessSet &&
         op != OpType::kRemoveProcessSet;
}

// How a dense allreduce combines the ranks' elements (Horovod's Sum, Average, Min, Max,
// Product, Adasum). Sparse allreduce takes kSum and kAverage only; kAdasum is for dense
// allreduce of floating-point tensors on a power-of-two number of ranks, on the CPU
// (ops/adasum.h). The values are wire codes (core/message_codec): append, never renumber.
enum class ReduceOp : uint8_t { kSum, kAverage, kMin, kMax, kProduct, kAdasum };
inline constexpr int kNumReduceOps = 6;
const char* reduceOpName(ReduceOp op);

// The name every join request carries, as Horovod's "join.noname": a rank joins once at a time,
// so the name identifies its callback.
inline constexpr const char* kJoinTensorName = "join.noname";

// Process sets (Horovod's): a collective may run over a subset of the job's ranks, a process
// set registered by every rank with kAddProcessSet (in the same order everywhere) and known by
// the id rank 0 assigned it. Set 0 is the whole job. In a request or response of a set, every
// rank number (Request::rank, rootRank, splits, devices, gatherRows, lastJoinedRank) is the
// rank *within the set*: position in its ascending member list, as Horovod's
// process_set.rank(). The same name may be in flight in different sets at once (it pairs up
// within a set only), but only once per rank.
inline constexpr int32_t kGlobalProcessSet = 0;

// One tensor a rank has posted. What every rank must agree on, and nothing that changes from
// step to step: a sparse tensor's nnz travels in the data plane, so the response cache keeps
// hitting while nnz varies.
struct Request {
  int32_t rank = 0;
  std::string name;
  OpType op = OpType::kAllreduce;
  DataType dtype = DataType::kFloat32;
  TensorShape shape;  // the dense shape; for kSparseAllreduce [numRows, ...row dims]
  Device device;
  ReduceOp reduceOp = ReduceOp::kSum;  // kAllreduce, kSparseAllreduce, kReducescatter
  int32_t rootRank = 0;                // kBroadcast
  int64_t rowSize = 1;                 // elements per row; kSparseAllreduce
  // kAlltoall: rows of the first dimension this rank sends to each rank, in rank order (size
  // entries summing to shape[0]); empty: an equal split (shape[0] divisible by size). Checked
  // by rank 0 against the job's size (controller/validation.h), so a bad split fails on every
  // rank.
  std::vector<int64_t> splits;
  int32_t processSet = kGlobalProcessSet;  // the set this collective runs over
  std::vector<int32_t> members;            // kAddProcessSet: the set's ranks in the job, ascending

  bool operator==(const Request& o) const;
  bool operator!=(const Request& o) const { return !(*this == o); }
};

struct RequestList {
  std::vector<Request> requests;
  bool shutdown = false;  // this rank wants the daemon to stop

  bool operator==(const RequestList& o) const;
};

enum class ResponseType : uint8_t {
  kSparseAllreduce,
  kAllreduce,
  kAllgather,
  kBroadcast,
  kJoin,
  kBarrier,
  kError,  // every named tensor fails on every rank with errorMessage
  kAlltoall,
  kReducescatter,
  kAddProcessSet,     // every rank registers set processSet = members
  kRemoveProcessSet,  // every rank forgets set processSet
};
inline constexpr int kNumResponseTypes = 11;
const char* responseTypeName(ResponseType type);
ResponseType responseTypeFor(OpType op);
// Whether the response moves tensor data (not a join, barrier, error or process-set
// registration): what stats, timelines and the autotuner count.
inline bool carriesTensors(ResponseType type) {
  return type != ResponseType::kJoin && type != ResponseType::kBarrier &&
         type != ResponseType::kError && type != ResponseType::kAddProcessSet &&
         type != ResponseType::kRemoveProcessSet;
}

// What every rank executes next: one collective over one tensor or a fused bucket of them.
struct Response {
  ResponseType type = ResponseType::kAllreduce;
  std::vector<std::string> tensorNames;  // > 1 for a fused bucket
  std::string errorMessage;              // kError only

  DataType dtype = DataType::kFloat32;
  // devices[r] is rank r's device (Horovod's devices()): indices may differ between ranks,
  // the kind may not. Ranks that did not post (joined) get the first poster's device.
  std::vector<Device> devices;
  ReduceOp reduceOp = ReduceOp::kSum;
  int32_t rootRank = 0;
  int64_t rowSize = 1;

  // Per tensor, parallel to tensorNames: the dense shape. For kAllgather, the output shape
  // (first dimension = rows gathered from all ranks); for kAlltoall, the rows every rank
  // sends, summed, then the trailing dimensions; for kReducescatter, the input's (rank i's
  // output is its piece of the first dimension, scatterRows).
  std::vector<TensorShape> shapes;
  // kAllgather: rows each rank contributes, [tensor * size + rank]; joined ranks give 0.
  std::vector<int64_t> gatherRows;
  // kAlltoall (one tensor, never fused): rows rank s sends rank d, [s * size + d]; the
  // received splits of rank d are column d.
  std::vector<int64_t> splits;
  // kSparseAllreduce: the bucket is one virtual tensor whose index space concatenates the
  // tensors' rows; tensor i's indices are offset by rowOffsets[i], totalRows in all.
  std::vector<int64_t> rowOffsets;
  int64_t totalRows = 0;

  int32_t lastJoinedRank = -1;  // kJoin: what join() returns

  // The set it runs over; only the set's members execute it (the others skip it), and rank
  // numbers above are within the set. kAddProcessSet: the new set's id (assigned by rank 0).
  int32_t processSet = kGlobalProcessSet;
  std::vector<int32_t> members;  // kAddProcessSet: the new set's ranks in the job, ascending

  bool operator==(const Response& o) const;
  bool operator!=(const Response& o) const { return !(*this == o); }
};

// The knobs the autotuner (controller/parameter_manager.h) sets on every rank at once: rank 0
// sends them in a plan, and every rank switches when it finishes that plan.
struct TunedParameters {
  int64_t fusionThresholdBytes = int64_t{128} << 20;  // ZEN_FUSION_THRESHOLD
  double cycleTimeMs = 1.0;                           // ZEN_CYCLE_TIME

  bool operator==(const TunedParameters& o) const {
    return fusionThresholdBytes == o.fusionThresholdBytes && cycleTimeMs == o.cycleTimeMs;
  }
  bool operator!=(const TunedParameters& o) const { return !(*this == o); }
};

struct ResponseList {
  std::vector<Response> responses;
  bool shutdown = false;  // all ranks leave the loop after this plan
  // Set by rank 0's autotuner: every rank applies them once it has finished this plan.
  std::optional<TunedParameters> parameters;

  bool operator==(const ResponseList& o) const;
  bool operator!=(const ResponseList& o) const { return !(*this == o); }
};

// Dense bytes of tensor i of a response: what the fusion threshold counts.
int64_t denseBytes(const Response& response, size_t i);

// Reducescatter's split of a first dimension of `rows` over `size` ranks (Horovod's rule, also
// the ring's chunks, ops/reduce.h): rank i gets rows / size rows, one more when i < rows %
// size, starting at scatterOffset; the pieces follow each other in rank order.
int64_t scatterRows(int64_t rows, int size, int rank);
int64_t scatterOffset(int64_t rows, int size, int rank);

}  // namespace zen
