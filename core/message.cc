// Names and equality of the negotiation messages (core/message.h).

#include "core/message.h"

#include <algorithm>

namespace zen {

const char* opTypeName(OpType op) {
  switch (op) {
    case OpType::kSparseAllreduce:
      return "sparse_allreduce";
    case OpType::kAllreduce:
      return "allreduce";
    case OpType::kAllgather:
      return "allgather";
    case OpType::kBroadcast:
      return "broadcast";
    case OpType::kJoin:
      return "join";
    case OpType::kBarrier:
      return "barrier";
    case OpType::kAlltoall:
      return "alltoall";
    case OpType::kReducescatter:
      return "reducescatter";
    case OpType::kAddProcessSet:
      return "add_process_set";
    case OpType::kRemoveProcessSet:
      return "remove_process_set";
  }
  return "unknown";
}

const char* reduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kAverage:
      return "average";
    case ReduceOp::kMin:
      return "min";
    case ReduceOp::kMax:
      return "max";
    case ReduceOp::kProduct:
      return "product";
    case ReduceOp::kAdasum:
      return "adasum";
  }
  return "unknown";
}

const char* responseTypeName(ResponseType type) {
  switch (type) {
    case ResponseType::kSparseAllreduce:
      return "sparse_allreduce";
    case ResponseType::kAllreduce:
      return "allreduce";
    case ResponseType::kAllgather:
      return "allgather";
    case ResponseType::kBroadcast:
      return "broadcast";
    case ResponseType::kJoin:
      return "join";
    case ResponseType::kBarrier:
      return "barrier";
    case ResponseType::kError:
      return "error";
    case ResponseType::kAlltoall:
      return "alltoall";
    case ResponseType::kReducescatter:
      return "reducescatter";
    case ResponseType::kAddProcessSet:
      return "add_process_set";
    case ResponseType::kRemoveProcessSet:
      return "remove_process_set";
  }
  return "unknown";
}

ResponseType responseTypeFor(OpType op) {
  switch (op) {
    case OpType::kSparseAllreduce:
      return ResponseType::kSparseAllreduce;
    case OpType::kAllreduce:
      return ResponseType::kAllreduce;
    case OpType::kAllgather:
      return ResponseType::kAllgather;
    case OpType::kBroadcast:
      return ResponseType::kBroadcast;
    case OpType::kJoin:
      return ResponseType::kJoin;
    case OpType::kBarrier:
      return ResponseType::kBarrier;
    case OpType::kAlltoall:
      return ResponseType::kAlltoall;
    case OpType::kReducescatter:
      return ResponseType::kReducescatter;
    case OpType::kAddProcessSet:
      return ResponseType::kAddProcessSet;
    case OpType::kRemoveProcessSet:
      return ResponseType::kRemoveProcessSet;
  }
  return ResponseType::kError;
}

bool Request::operator==(const Request& o) const {
  return rank == o.rank && name == o.name && op == o.op && dtype == o.dtype && shape == o.shape &&
         device == o.device && reduceOp == o.reduceOp && rootRank == o.rootRank &&
         rowSize == o.rowSize && splits == o.splits && processSet == o.processSet &&
         members == o.members;
}

bool RequestList::operator==(const RequestList& o) const {
  return requests == o.requests && shutdown == o.shutdown;
}

bool Response::operator==(const Response& o) const {
  return type == o.type && tensorNames == o.tensorNames && errorMessage == o.errorMessage &&
         dtype == o.dtype && devices == o.devices && reduceOp == o.reduceOp &&
         rootRank == o.rootRank && rowSize == o.rowSize && shapes == o.shapes &&
         gatherRows == o.gatherRows && splits == o.splits && rowOffsets == o.rowOffsets &&
         totalRows == o.totalRows && lastJoinedRank == o.lastJoinedRank &&
         processSet == o.processSet && members == o.members;
}

bool ResponseList::operator==(const ResponseList& o) const {
  return responses == o.responses && shutdown == o.shutdown && parameters == o.parameters;
}

int64_t denseBytes(const Response& response, size_t i) {
  if (i >= response.shapes.size()) return 0;
  return response.shapes[i].numElements() * static_cast<int64_t>(dataTypeSize(response.dtype));
}

int64_t scatterRows(int64_t rows, int size, int rank) {
  return rows / size + (rank < rows % size ? 1 : 0);
}

int64_t scatterOffset(int64_t rows, int size, int rank) {
  return rows / size * rank + std::min<int64_t>(rank, rows % size);
}

}  // namespace zen
