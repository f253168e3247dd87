// zen.tensorflow's CPU kernels (ops in zen_tf_ops.cc). Every kernel is a ZenKernel: the shared
// ComputeAsync reads the operation's name, lets the kernel check its inputs and fill the call
// (prepare: the C API's views, outputs whose shape is known now), posts it (enqueue) and
// returns; Pending (zen_tf_async.h) ends it from the daemon's completion, running the kernel's
// finish (outputs whose size only the collective knows, copied out of the handle). Inputs and
// outputs stay alive until `done`, so the daemon reads and writes TensorFlow's memory directly.
#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "bindings/tensorflow/zen_tf_async.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor_shape.h"

namespace tensorflow {
namespace zen_tf {
namespace {

// What one kernel's enqueue reads; alive until the enqueue call returns.
struct Call {
  std::string name;
  TensorArg in;
  TensorArg out;
  zen_sparse_tensor_t sparse{};  // ZenSparseAllreduce
  std::vector<int64_t> splits;   // ZenAlltoall
};

absl::Status nameInput(OpKernelContext* context, int index, std::string* name) {
  const Tensor& t = context->input(index);
  if (!TensorShapeUtils::IsScalar(t.shape())) {
    return absl::InvalidArgumentError("zen: the operation's name must be a scalar string, not " +
                                      t.shape().DebugString());
  }
  *name = std::string(t.scalar<tstring>()());
  return absl::OkStatus();
}

// Input 0 as call->in, refused below minDims dimensions.
absl::Status viewInput(OpKernelContext* context, const char* what, int minDims, Call* call) {
  const Tensor& input = context->input(0);
  if (input.dims() < minDims) {
    return absl::InvalidArgumentError(std::string(what) + " '" + call->name +
                                      "': a tensor of at least one dimension");
  }
  return call->in.init(input);
}

// Output 0 of `shape`, as call->out.
absl::Status allocateOutput(OpKernelContext* context, const TensorShape& shape, Call* call) {
  Tensor* output = nullptr;
  TF_RETURN_IF_ERROR(context->allocate_output(0, shape, &output));
  return call->out.init(*output);
}

// The process_set_id attribute of a collective (0, every rank, for join, which has none).
int32_t processSetAttr(OpKernelConstruction* c) {
  int32_t id = 0;
  if (c->HasAttr("process_set_id")) {
    const absl::Status status = c->GetAttr("process_set_id", &id);
    if (!status.ok()) c->CtxFailure(__FILE__, __LINE__, status);
  }
  return id;
}

// Shape (first dimension) of this rank's piece of a reducescatter over set processSet:
// zen_reducescatter_rows with the rank and size within the set (Horovod's split).
absl::Status keepPiece(int32_t processSet, TensorShape* shape) {
  int32_t size = 0;
  int code = zen_process_set_ranks(processSet, nullptr, 0, &size);
  if (code != ZEN_OK) return lastError(code);
  std::vector<int32_t> ranks(static_cast<size_t>(size));
  code = zen_process_set_ranks(processSet, ranks.data(), size, &size);
  if (code != ZEN_OK) return lastError(code);
  const int rank = zen_rank();
  if (rank < 0) return lastError(ZEN_NOT_INITIALIZED);  // zen_rank's message
  const auto me = std::find(ranks.begin(), ranks.end(), rank);
  if (me == ranks.end()) {
    return absl::InvalidArgumentError("zen: rank " + std::to_string(rank) +
                                      " is not a member of process set " +
                                      std::to_string(processSet));
  }
  shape->set_dim(0, zen_reducescatter_rows(shape->dim_size(0),
                                           static_cast<int32_t>(me - ranks.begin()), size));
  return absl::OkStatus();
}

// The shape every zen kernel shares: name, prepare, the operation's description, one
// zen_enqueue_group (its zen_op_t carries the process set), and Pending's end.
class ZenKernel : public AsyncOpKernel {
 public:
  // nameIndex: the scalar string input naming the operation (-1: none, join and barrier).
  // finish: reads the outputs whose size only the collective knows (null: none).
  ZenKernel(OpKernelConstruction* c, int nameIndex, Pending::Finish finish = nullptr)
      : AsyncOpKernel(c),
        processSet_(processSetAttr(c)),
        nameIndex_(nameIndex),
        finish_(std::move(finish)) {}

  void ComputeAsync(OpKernelContext* context, DoneCallback done) final {
    Call call;
    if (nameIndex_ >= 0) {
      OP_REQUIRES_OK_ASYNC(context, nameInput(context, nameIndex_, &call.name), done);
    }
    OP_REQUIRES_OK_ASYNC(context, prepare(context, &call), done);
    zen_op_t op{};
    op.name = call.name.c_str();
    op.process_set = processSet_;
    describe(call, &op);
    Pending::start(new Pending(context, std::move(done), finish_), [&](Pending* pending) {
      op.done = pending->completion(0);
      zen_handle_t handle = 0;
      return zen_enqueue_group(&op, 1, &handle);
    });
  }

 protected:
  virtual absl::Status prepare(OpKernelContext* context, Call* call) = 0;
  // The kind and the kind's fields of op (name and process set are set).
  virtual void describe(const Call& call, zen_op_t* op) = 0;

  const int32_t processSet_;  // the process_set_id attribute

 private:
  const int nameIndex_;
  const Pending::Finish finish_;
};

// Kernels with a reduce_op attribute (zen_reduce_op_t).
class ReduceKernel : public ZenKernel {
 public:
  ReduceKernel(OpKernelConstruction* c, int nameIndex, Pending::Finish finish = nullptr)
      : ZenKernel(c, nameIndex, std::move(finish)) {
    OP_REQUIRES_OK(c, c->GetAttr("reduce_op", &reduceOp_));
  }

 protected:
  int reduceOp_ = ZEN_AVERAGE;
};

class AllreduceOp : public ReduceKernel {
 public:
  explicit AllreduceOp(OpKernelConstruction* c) : ReduceKernel(c, 1) {}

 protected:
  absl::Status prepare(OpKernelContext* context, Call* call) override {
    TF_RETURN_IF_ERROR(viewInput(context, "allreduce", 0, call));
    return allocateOutput(context, context->input(0).shape(), call);
  }
  void describe(const Call& call, zen_op_t* op) override {
    op->kind = ZEN_OP_ALLREDUCE;
    op->input = call.in.c;
    op->output = call.out.c;
    op->reduce_op = reduceOp_;
  }
};

void copySparseResult(OpKernelContext* context, int, zen_handle_t handle) {
  zen_sparse_result_t r{};
  int code = zen_sparse_result(handle, &r);
  OP_REQUIRES(context, code == ZEN_OK, lastError(code));
  TensorShape valuesShape = context->input(0).shape();
  valuesShape.set_dim(0, r.nnz);
  Tensor* values = nullptr;
  Tensor* indices = nullptr;
  OP_REQUIRES_OK(context, context->allocate_output(0, valuesShape, &values));
  OP_REQUIRES_OK(context, context->allocate_output(1, TensorShape({r.nnz}), &indices));
  if (r.nnz == 0) return;
  std::memcpy(const_cast<char*>(values->tensor_data().data()), r.values,
              values->tensor_data().size());
  std::memcpy(indices->flat<int64_t>().data(), r.indices, sizeof(int64_t) * r.nnz);
}

class SparseAllreduceOp : public ReduceKernel {
 public:
  explicit SparseAllreduceOp(OpKernelConstruction* c) : ReduceKernel(c, 3, copySparseResult) {}

 protected:
  absl::Status prepare(OpKernelContext* context, Call* call) override {
    const Tensor& values = context->input(0);
    const Tensor& indices = context->input(1);
    const Tensor& denseShape = context->input(2);
    if (values.dims() < 1 || indices.dims() != 1 || indices.dim_size(0) != values.dim_size(0)) {
      return absl::InvalidArgumentError(
          "sparse allreduce '" + call->name + "': values " + values.shape().DebugString() +
          " need one row per index, indices " + indices.shape().DebugString());
    }
    // The rows of values must be the trailing dimensions of dense_shape, flattened.
    int64_t rowSize = 1;
    for (int d = 1; d < values.dims(); ++d) rowSize *= values.dim_size(d);
    int64_t denseRowSize = 1;
    const bool shapeOk = denseShape.dims() == 1 && denseShape.NumElements() >= 1;
    if (shapeOk) {
      auto dims = denseShape.flat<int64_t>();
      for (int64_t d = 1; d < dims.size(); ++d) denseRowSize *= dims(d);
    }
    if (!shapeOk || denseRowSize != rowSize) {
      return absl::InvalidArgumentError(
          "sparse allreduce '" + call->name + "': values " + values.shape().DebugString() +
          " do not hold rows of dense_shape " + denseShape.DebugString(/*num_values=*/8));
    }
    zen_sparse_tensor_t& s = call->sparse;
    s.indices = indices.flat<int64_t>().data();
    s.values = values.tensor_data().data();
    s.nnz = values.dim_size(0);
    s.num_rows = denseShape.flat<int64_t>()(0);
    s.row_size = rowSize;
    return zenDtype(values.dtype(), &s.dtype);
  }
  void describe(const Call& call, zen_op_t* op) override {
    op->kind = ZEN_OP_SPARSE_ALLREDUCE;
    op->sparse = call.sparse;
    op->reduce_op = reduceOp_;
  }
};

// Output `index` as a copy of the handle's gathered rows (allgather, alltoall).
void copyGathered(OpKernelContext* context, int index, const zen_gathered_t& g, const char* what) {
  TensorShape shape;
  for (int32_t d = 0; d < g.ndims; ++d) shape.AddDim(g.shape[d]);
  Tensor* output = nullptr;
  OP_REQUIRES_OK(context, context->allocate_output(index, shape, &output));
  OP_REQUIRES(context, output->tensor_data().size() == g.bytes,
              absl::InternalError(std::string(what) + ": result size does not match its shape"));
  if (g.bytes > 0) std::memcpy(const_cast<char*>(output->tensor_data().data()), g.data, g.bytes);
}

// Output `index` (the group's index-th tensor) from an allgather.
void copyAllgatherResult(OpKernelContext* context, int index, zen_handle_t handle) {
  zen_gathered_t g{};
  int code = zen_allgather_result(handle, &g);
  OP_REQUIRES(context, code == ZEN_OK, lastError(code));
  copyGathered(context, index, g, "allgather");
}

class AllgatherOp : public ZenKernel {
 public:
  explicit AllgatherOp(OpKernelConstruction* c) : ZenKernel(c, 1, copyAllgatherResult) {}

 protected:
  absl::Status prepare(OpKernelContext* context, Call* call) override {
    return viewInput(context, "allgather", 1, call);
  }
  void describe(const Call& call, zen_op_t* op) override {
    op->kind = ZEN_OP_ALLGATHER;
    op->input = call.in.c;
  }
};

class BroadcastOp : public ZenKernel {
 public:
  explicit BroadcastOp(OpKernelConstruction* c) : ZenKernel(c, 1) {
    OP_REQUIRES_OK(c, c->GetAttr("root_rank", &rootRank_));
  }

 protected:
  // In place on the output, a copy of the input.
  absl::Status prepare(OpKernelContext* context, Call* call) override {
    const Tensor& input = context->input(0);
    Tensor* output = nullptr;
    TF_RETURN_IF_ERROR(context->allocate_output(0, input.shape(), &output));
    if (input.NumElements() > 0) {
      std::memcpy(const_cast<char*>(output->tensor_data().data()), input.tensor_data().data(),
                  input.tensor_data().size());
    }
    return call->out.init(*output);
  }
  void describe(const Call& call, zen_op_t* op) override {
    op->kind = ZEN_OP_BROADCAST;
    op->input = call.out.c;
    op->root_rank = rootRank_;
  }

 private:
  int rootRank_ = 0;
};

void copyAlltoallResult(OpKernelContext* context, int, zen_handle_t handle) {
  zen_alltoall_result_t r{};
  int code = zen_alltoall_result(handle, &r);
  OP_REQUIRES(context, code == ZEN_OK, lastError(code));
  copyGathered(context, 0, r.output, "alltoall");
  Tensor* received = nullptr;
  OP_REQUIRES_OK(context, context->allocate_output(1, TensorShape({r.num_ranks}), &received));
  auto splits = received->flat<int32_t>();
  for (int32_t p = 0; p < r.num_ranks; ++p) {
    splits(p) = static_cast<int32_t>(r.received_splits[p]);
  }
}

class AlltoallOp : public ZenKernel {
 public:
  explicit AlltoallOp(OpKernelConstruction* c) : ZenKernel(c, 2, copyAlltoallResult) {}

 protected:
  // splits: rows to each rank (int32, Horovod's), empty for an equal split.
  absl::Status prepare(OpKernelContext* context, Call* call) override {
    TF_RETURN_IF_ERROR(viewInput(context, "alltoall", 1, call));
    const Tensor& splits = context->input(1);
    if (splits.dims() != 1) {
      return absl::InvalidArgumentError("alltoall '" + call->name +
                                        "': splits must be a vector, not " +
                                        splits.shape().DebugString());
    }
    auto flat = splits.flat<int32_t>();
    call->splits.assign(flat.data(), flat.data() + flat.size());
    return absl::OkStatus();
  }
  void describe(const Call& call, zen_op_t* op) override {
    op->kind = ZEN_OP_ALLTOALL;
    op->input = call.in.c;
    op->splits = call.splits.data();
    op->num_splits = static_cast<int32_t>(call.splits.size());
  }
};

class ReducescatterOp : public ReduceKernel {
 public:
  explicit ReducescatterOp(OpKernelConstruction* c) : ReduceKernel(c, 1) {}

 protected:
  absl::Status prepare(OpKernelContext* context, Call* call) override {
    TF_RETURN_IF_ERROR(viewInput(context, "reducescatter", 1, call));
    TensorShape shape = context->input(0).shape();
    TF_RETURN_IF_ERROR(keepPiece(processSet_, &shape));
    return allocateOutput(context, shape, call);
  }
  void describe(const Call& call, zen_op_t* op) override {
    op->kind = ZEN_OP_REDUCESCATTER;
    op->input = call.in.c;
    op->output = call.out.c;
    op->reduce_op = reduceOp_;
  }
};

void copyLastJoined(OpKernelContext* context, int, zen_handle_t handle) {
  int32_t last = -1;
  int code = zen_join_result(handle, &last);
  OP_REQUIRES(context, code == ZEN_OK, lastError(code));
  Tensor* output = nullptr;
  OP_REQUIRES_OK(context, context->allocate_output(0, TensorShape({}), &output));
  output->scalar<int32_t>()() = last;
}

class JoinOp : public ZenKernel {
 public:
  explicit JoinOp(OpKernelConstruction* c) : ZenKernel(c, -1, copyLastJoined) {}

 protected:
  absl::Status prepare(OpKernelContext*, Call*) override { return absl::OkStatus(); }
  void describe(const Call&, zen_op_t* op) override { op->kind = ZEN_OP_JOIN; }
};

class BarrierOp : public ZenKernel {
 public:
  explicit BarrierOp(OpKernelConstruction* c) : ZenKernel(c, -1) {}

 protected:
  absl::Status prepare(OpKernelContext*, Call*) override { return absl::OkStatus(); }
  void describe(const Call&, zen_op_t* op) override { op->kind = ZEN_OP_BARRIER; }
};

// A list of tensors through one kind of dense operation (allreduce, allgather or
// reducescatter), posted as one group (zen_enqueue_group): the daemon negotiates the group in
// one cycle and fuses what fits, as Horovod's grouped ops. Tensor i is named "<name>.<i>".
class GroupOp : public AsyncOpKernel {
 public:
  GroupOp(OpKernelConstruction* c, int32_t kind, const char* what)
      : AsyncOpKernel(c), kind_(kind), what_(what), processSet_(processSetAttr(c)) {
    if (kind != ZEN_OP_ALLGATHER) OP_REQUIRES_OK(c, c->GetAttr("reduce_op", &reduceOp_));
  }

  void ComputeAsync(OpKernelContext* context, DoneCallback done) final {
    const int count = context->num_inputs() - 1;  // the tensors, then the name
    std::string name;
    OP_REQUIRES_OK_ASYNC(context, nameInput(context, count, &name), done);
    std::vector<std::string> names(static_cast<size_t>(count));
    std::vector<TensorArg> in(names.size());
    std::vector<TensorArg> out(names.size());
    std::vector<zen_op_t> ops(names.size());
    for (size_t i = 0; i < names.size(); ++i) {
      const int index = static_cast<int>(i);
      const Tensor& input = context->input(index);
      names[i] = name + "." + std::to_string(i);
      OP_REQUIRES_ASYNC(context, kind_ == ZEN_OP_ALLREDUCE || input.dims() >= 1,
                        absl::InvalidArgumentError(std::string(what_) + " '" + names[i] +
                                                   "': a tensor of at least one dimension"),
                        done);
      OP_REQUIRES_OK_ASYNC(context, in[i].init(input), done);
      ops[i] = zen_op_t{};
      ops[i].kind = kind_;
      ops[i].name = names[i].c_str();
      ops[i].input = in[i].c;
      ops[i].reduce_op = reduceOp_;
      ops[i].process_set = processSet_;
      if (kind_ == ZEN_OP_ALLGATHER) continue;  // rows only the collective knows: in finish
      TensorShape shape = input.shape();
      if (kind_ == ZEN_OP_REDUCESCATTER) {
        OP_REQUIRES_OK_ASYNC(context, keepPiece(processSet_, &shape), done);
      }
      Tensor* output = nullptr;
      OP_REQUIRES_OK_ASYNC(context, context->allocate_output(index, shape, &output), done);
      OP_REQUIRES_OK_ASYNC(context, out[i].init(*output), done);
      ops[i].output = out[i].c;
    }
    Pending::Finish finish = kind_ == ZEN_OP_ALLGATHER ? copyAllgatherResult : nullptr;
    Pending::start(new Pending(context, std::move(done), finish, count), [&](Pending* pending) {
      for (int i = 0; i < count; ++i) ops[static_cast<size_t>(i)].done = pending->completion(i);
      std::vector<zen_handle_t> handles(ops.size());
      return zen_enqueue_group(ops.data(), count, handles.data());
    });
  }

 private:
  const int32_t kind_;
  const char* const what_;
  const int32_t processSet_;
  int reduceOp_ = ZEN_AVERAGE;
};

class GroupedAllreduceOp : public GroupOp {
 public:
  explicit GroupedAllreduceOp(OpKernelConstruction* c)
      : GroupOp(c, ZEN_OP_ALLREDUCE, "grouped allreduce") {}
};

class GroupedAllgatherOp : public GroupOp {
 public:
  explicit GroupedAllgatherOp(OpKernelConstruction* c)
      : GroupOp(c, ZEN_OP_ALLGATHER, "grouped allgather") {}
};

class GroupedReducescatterOp : public GroupOp {
 public:
  explicit GroupedReducescatterOp(OpKernelConstruction* c)
      : GroupOp(c, ZEN_OP_REDUCESCATTER, "grouped reducescatter") {}
};

REGISTER_KERNEL_BUILDER(Name("ZenAllreduce").Device(DEVICE_CPU), AllreduceOp);
REGISTER_KERNEL_BUILDER(Name("ZenSparseAllreduce").Device(DEVICE_CPU), SparseAllreduceOp);
REGISTER_KERNEL_BUILDER(Name("ZenAllgather").Device(DEVICE_CPU), AllgatherOp);
REGISTER_KERNEL_BUILDER(Name("ZenBroadcast").Device(DEVICE_CPU), BroadcastOp);
REGISTER_KERNEL_BUILDER(Name("ZenAlltoall").Device(DEVICE_CPU), AlltoallOp);
REGISTER_KERNEL_BUILDER(Name("ZenReducescatter").Device(DEVICE_CPU), ReducescatterOp);
REGISTER_KERNEL_BUILDER(Name("ZenGroupedAllreduce").Device(DEVICE_CPU), GroupedAllreduceOp);
REGISTER_KERNEL_BUILDER(Name("ZenGroupedAllgather").Device(DEVICE_CPU), GroupedAllgatherOp);
REGISTER_KERNEL_BUILDER(Name("ZenGroupedReducescatter").Device(DEVICE_CPU), GroupedReducescatterOp);
REGISTER_KERNEL_BUILDER(Name("ZenJoin").Device(DEVICE_CPU), JoinOp);
REGISTER_KERNEL_BUILDER(Name("ZenBarrier").Device(DEVICE_CPU), BarrierOp);

}  // namespace
}  // namespace zen_tf
}  // namespace tensorflow
