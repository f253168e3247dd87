// The named constructors of TensorOp and the checks an enqueue can make on its own, before
// any other rank is asked (core/runtime.h).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "core/runtime.h"

namespace zen {

TensorOp TensorOp::sparseAllreduce(std::string name,
                                   SparseView input,
                                   ReduceOp op,
                                   DenseView denseOutput) {
  TensorOp t;
  t.request.name = std::move(name);
  t.request.op = OpType::kSparseAllreduce;
  t.request.reduceOp = op;
  t.request.dtype = input.dtype;
  t.request.shape = TensorShape({input.numRows, input.rowSize});
  t.request.rowSize = input.rowSize;
  t.request.device = input.device;
  t.sparseInput = input;
  t.output = denseOutput;
  return t;
}

TensorOp TensorOp::allreduce(std::string name, DenseView input, DenseView output, ReduceOp op) {
  TensorOp t;
  t.request.name = std::move(name);
  t.request.op = OpType::kAllreduce;
  t.request.reduceOp = op;
  t.request.dtype = input.dtype;
  t.request.shape = input.shape;
  t.request.device = input.device;
  t.input = input;
  t.output = output;
  return t;
}

TensorOp TensorOp::allgather(std::string name, DenseView input) {
  TensorOp t;
  t.request.name = std::move(name);
  t.request.op = OpType::kAllgather;
  t.request.dtype = input.dtype;
  t.request.shape = input.shape;
  t.request.device = input.device;
  t.input = input;
  return t;
}

TensorOp TensorOp::broadcast(std::string name, DenseView tensor, int rootRank) {
  TensorOp t;
  t.request.name = std::move(name);
  t.request.op = OpType::kBroadcast;
  t.request.rootRank = rootRank;
  t.request.dtype = tensor.dtype;
  t.request.shape = tensor.shape;
  t.request.device = tensor.device;
  t.input = tensor;
  t.output = tensor;
  return t;
}

// An allgather's request and views (ranks may differ in the first dimension), with splits.
TensorOp TensorOp::alltoall(std::string name, DenseView input, std::vector<int64_t> splits) {
  TensorOp t = allgather(std::move(name), input);
  t.request.op = OpType::kAlltoall;
  t.request.splits = std::move(splits);
  return t;
}

// An allreduce's request and views; the output is this rank's piece.
TensorOp TensorOp::reducescatter(std::string name, DenseView input, DenseView output, ReduceOp op) {
  TensorOp t = allreduce(std::move(name), input, output, op);
  t.request.op = OpType::kReducescatter;
  return t;
}

TensorOp TensorOp::join() {
  TensorOp t;
  t.request.name = kJoinTensorName;
  t.request.op = OpType::kJoin;
  return t;
}

TensorOp TensorOp::barrier() {
  TensorOp t;
  t.request.name = kBarrierTensorName;
  t.request.op = OpType::kBarrier;
  return t;
}

TensorOp TensorOp::addProcessSet(std::vector<int32_t> ranks) {
  TensorOp t;
  t.request.op = OpType::kAddProcessSet;
  t.request.members = std::move(ranks);
  return t;
}

TensorOp TensorOp::removeProcessSet(int32_t id) {
  TensorOp t;
  t.request.op = OpType::kRemoveProcessSet;
  t.request.processSet = id;
  t.request.name = fmt::format("process_set.remove.{}", id);
  return t;
}

namespace {

Status checkDense(const std::string& name, const char* what, const DenseView& v) {
  ZEN_CHECK_ARG(v.dtype <= DataType::kInt64, "tensor '{}': unknown {} dtype code {}", name, what,
                static_cast<int>(v.dtype));
  for (int64_t d : v.shape.dims()) {
    ZEN_CHECK_ARG(d >= 0, "tensor '{}': {} shape {} has a negative dimension", name, what,
                  v.shape.toString());
  }
  ZEN_CHECK_ARG(v.data != nullptr || v.shape.numElements() == 0,
                "tensor '{}': {} of shape {} has no data", name, what, v.shape.toString());
  return Status::ok();
}

Status checkSparse(const std::string& name, const SparseView& s, const DenseView& out) {
  ZEN_CHECK_ARG(s.dtype <= DataType::kInt64, "tensor '{}': unknown dtype code {}", name,
                static_cast<int>(s.dtype));
  ZEN_CHECK_ARG(s.numRows >= 0 && s.rowSize >= 1 && s.nnz >= 0,
                "tensor '{}': sparse tensor of {} rows x {} with {} entries", name, s.numRows,
                s.rowSize, s.nnz);
  ZEN_CHECK_ARG(s.nnz == 0 || (s.indices != nullptr && s.values != nullptr),
                "tensor '{}': {} entries but no indices or values", name, s.nnz);
  if (out.data == nullptr) return Status::ok();
  ZEN_RETURN_IF_ERROR(checkDense(name, "dense output", out));
  ZEN_CHECK_ARG(out.dtype == s.dtype && out.shape.numElements() == s.numRows * s.rowSize,
                "tensor '{}': the dense output is {} {}, the sparse tensor needs {} x {} of {}",
                name, dataTypeName(out.dtype), out.shape.toString(), s.numRows, s.rowSize,
                dataTypeName(s.dtype));
  return Status::ok();
}

// Every view of one operation on one device (the request's); a ready signal only with a
// device tensor.
Status checkDevices(const std::string& name, const TensorOp& op) {
  const Device device = op.request.device;
  ZEN_CHECK_ARG(device.index >= 0, "tensor '{}': device {}", name, device.toString());
  auto same = [&](const Device& d) { return d == device; };
  switch (op.request.op) {
    case OpType::kSparseAllreduce:
      ZEN_CHECK_ARG(op.output.data == nullptr || same(op.output.device),
                    "tensor '{}': the sparse tensor is on {}, its dense output on {}", name,
                    device.toString(), op.output.device.toString());
      break;
    case OpType::kAllreduce:
    case OpType::kReducescatter:
      ZEN_CHECK_ARG(same(op.output.device), "tensor '{}': input on {}, output on {}", name,
                    device.toString(), op.output.device.toString());
      break;
    default:
      break;
  }
  ZEN_CHECK_ARG(device.kind != Device::Kind::kCpu ||
                    (op.ready.event == nullptr && op.ready.stream == nullptr),
                "tensor '{}': a ready event or stream for a host tensor", name);
  return Status::ok();
}

// An add's ranks in canonical form (ascending), or why they cannot be a set of this job.
Status canonicalMembers(std::vector<int32_t>* members, int size) {
  std::sort(members->begin(), members->end());
  ZEN_CHECK_ARG(!members->empty(), "add_process_set: no ranks");
  ZEN_CHECK_ARG(members->front() >= 0 && members->back() < size,
                "add_process_set: rank {} is outside the job's ranks [0, {})",
                members->front() < 0 ? members->front() : members->back(), size);
  const auto twice = std::adjacent_find(members->begin(), members->end());
  ZEN_CHECK_ARG(twice == members->end(), "add_process_set: rank {} is named twice", *twice);
  return Status::ok();
}

}  // namespace

Result<SetPlace> Runtime::placeRequest(Request& q) const {
  const SetPlace job{options_.rank, options_.size};
  switch (q.op) {
    case OpType::kAddProcessSet:
      ZEN_CHECK_ARG(q.processSet == kGlobalProcessSet,
                    "add_process_set is a collective of the whole job, not of process set {}",
                    q.processSet);
      ZEN_RETURN_IF_ERROR(canonicalMembers(&q.members, options_.size));
      return job;
    case OpType::kRemoveProcessSet:
      ZEN_CHECK_ARG(q.processSet != kGlobalProcessSet, "the global process set cannot be removed");
      ZEN_CHECK_ARG(processSets_.contains(q.processSet),
                    "remove_process_set: process set {} does not exist (never added, or removed)",
                    q.processSet);
      return job;
    case OpType::kJoin:
      ZEN_CHECK_ARG(q.processSet == kGlobalProcessSet,
                    "join is for the whole job only, not for process set {}", q.processSet);
      return job;
    default:
      break;
  }
  ZEN_CHECK_ARG(q.members.empty(), "tensor '{}': members are for add_process_set only", q.name);
  const std::optional<SetPlace> place = processSets_.place(q.processSet);
  if (place) return *place;
  ZEN_CHECK_ARG(processSets_.contains(q.processSet),
                "tensor '{}': process set {} does not exist (never added, or removed)", q.name,
                q.processSet);
  return ZEN_ERROR(StatusCode::kInvalidArgument,
                   "tensor '{}': rank {} is not in process set {} (ranks {})", q.name,
                   options_.rank, q.processSet, fmt::join(processSets_.ranks(q.processSet), ", "));
}

Result<std::unique_ptr<TensorEntry>> Runtime::makeEntry(TensorOp op) const {
  Request& q = op.request;
  ZEN_ASSIGN_OR_RETURN(const SetPlace place, placeRequest(q));
  q.rank = place.rank;
  switch (q.op) {
    case OpType::kSparseAllreduce:
      ZEN_RETURN_IF_ERROR(checkSparse(q.name, op.sparseInput, op.output));
      break;
    case OpType::kAllreduce:
      ZEN_RETURN_IF_ERROR(checkDense(q.name, "input", op.input));
      ZEN_RETURN_IF_ERROR(checkDense(q.name, "output", op.output));
      ZEN_CHECK_ARG(op.output.dtype == op.input.dtype &&
                        op.output.shape.numElements() == op.input.shape.numElements(),
                    "tensor '{}': output {} {} does not match input {} {}", q.name,
                    dataTypeName(op.output.dtype), op.output.shape.toString(),
                    dataTypeName(op.input.dtype), op.input.shape.toString());
      break;
    case OpType::kReducescatter: {
      ZEN_RETURN_IF_ERROR(checkDense(q.name, "input", op.input));
      ZEN_RETURN_IF_ERROR(checkDense(q.name, "output", op.output));
      ZEN_CHECK_ARG(op.input.shape.rank() >= 1,
                    "tensor '{}': reducescatter needs at least one dimension", q.name);
      // This rank's piece of the first dimension (Horovod's split).
      std::vector<int64_t> piece = op.input.shape.dims();
      piece[0] = scatterRows(piece[0], place.size, place.rank);
      ZEN_CHECK_ARG(op.output.dtype == op.input.dtype &&
                        op.output.shape.numElements() == TensorShape(piece).numElements(),
                    "tensor '{}': output {} {} does not match rank {}'s piece {} {} of input {}",
                    q.name, dataTypeName(op.output.dtype), op.output.shape.toString(), place.rank,
                    dataTypeName(op.input.dtype), TensorShape(piece).toString(),
                    op.input.shape.toString());
      break;
    }
    case OpType::kAllgather:
    case OpType::kAlltoall:
    case OpType::kBroadcast:
      ZEN_RETURN_IF_ERROR(checkDense(q.name, "input", op.input));
      break;
    case OpType::kJoin:
    case OpType::kBarrier:
    case OpType::kAddProcessSet:
    case OpType::kRemoveProcessSet:
      break;
  }
  ZEN_RETURN_IF_ERROR(checkDevices(q.name, op));
  ZEN_RETURN_IF_ERROR(negotiator_->check(q, place.size));
  auto entry = std::make_unique<TensorEntry>();
  entry->request = std::move(op.request);
  entry->sparseInput = op.sparseInput;
  entry->input = op.input;
  entry->output = op.output;
  entry->ready = op.ready;
  if (carriesTensors(entry->request.op)) {
    ZEN_RETURN_IF_ERROR(executor_->accept(*entry));
  }
  entry->handle = std::make_shared<HandleState>(std::move(op.callback));
  entry->enqueued = std::chrono::steady_clock::now();
  return entry;
}

}  // namespace zen
