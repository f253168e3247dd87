// zen.tensorflow's CPU kernels (ops in zen_tf_ops.cc): each checks its inputs, enqueues to
// the daemon through the C API and returns; Pending (zen_tf_async.h) ends it from the
// daemon's completion. Inputs and outputs stay alive until `done`, so the daemon reads and
// writes TensorFlow's memory directly; outputs whose size only the collective knows are
// copied out of the handle.
#include <cstring>
#include <string>

#include "bindings/tensorflow/zen_tf_async.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor_shape.h"

namespace tensorflow {
namespace zen_tf {
namespace {

absl::Status nameInput(OpKernelContext* context, int index, std::string* name) {
  const Tensor& t = context->input(index);
  if (!TensorShapeUtils::IsScalar(t.shape())) {
    return absl::InvalidArgumentError("zen: the operation's name must be a scalar string, not " +
                                      t.shape().DebugString());
  }
  *name = std::string(t.scalar<tstring>()());
  return absl::OkStatus();
}

class AllreduceOp : public AsyncOpKernel {
 public:
  explicit AllreduceOp(OpKernelConstruction* c) : AsyncOpKernel(c) {
    OP_REQUIRES_OK(c, c->GetAttr("reduce_op", &reduceOp_));
  }

  void ComputeAsync(OpKernelContext* context, DoneCallback done) override {
    const Tensor& input = context->input(0);
    std::string name;
    OP_REQUIRES_OK_ASYNC(context, nameInput(context, 1, &name), done);
    Tensor* output = nullptr;
    OP_REQUIRES_OK_ASYNC(context, context->allocate_output(0, input.shape(), &output), done);
    TensorArg in;
    TensorArg out;
    OP_REQUIRES_OK_ASYNC(context, in.init(input), done);
    OP_REQUIRES_OK_ASYNC(context, out.init(*output), done);
    Pending::start(new Pending(context, std::move(done), nullptr), [&](zen_completion_t completion,
                                                                       zen_handle_t* handle) {
      return zen_enqueue_allreduce(name.c_str(), &in.c, &out.c, reduceOp_, completion, handle);
    });
  }

 private:
  int reduceOp_ = ZEN_AVERAGE;
};

void copySparseResult(OpKernelContext* context, zen_handle_t handle) {
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

class SparseAllreduceOp : public AsyncOpKernel {
 public:
  explicit SparseAllreduceOp(OpKernelConstruction* c) : AsyncOpKernel(c) {
    OP_REQUIRES_OK(c, c->GetAttr("reduce_op", &reduceOp_));
  }

  void ComputeAsync(OpKernelContext* context, DoneCallback done) override {
    const Tensor& values = context->input(0);
    const Tensor& indices = context->input(1);
    const Tensor& denseShape = context->input(2);
    std::string name;
    OP_REQUIRES_OK_ASYNC(context, nameInput(context, 3, &name), done);
    OP_REQUIRES_ASYNC(
        context,
        values.dims() >= 1 && indices.dims() == 1 && indices.dim_size(0) == values.dim_size(0),
        absl::InvalidArgumentError(
            "sparse allreduce '" + name + "': values " + values.shape().DebugString() +
            " need one row per index, indices " + indices.shape().DebugString()),
        done);
    // The rows of values must be the trailing dimensions of dense_shape, flattened.
    int64_t rowSize = 1;
    for (int d = 1; d < values.dims(); ++d) rowSize *= values.dim_size(d);
    int64_t denseRowSize = 1;
    const bool shapeOk = denseShape.dims() == 1 && denseShape.NumElements() >= 1;
    if (shapeOk) {
      auto dims = denseShape.flat<int64_t>();
      for (int64_t d = 1; d < dims.size(); ++d) denseRowSize *= dims(d);
    }
    OP_REQUIRES_ASYNC(context, shapeOk && denseRowSize == rowSize,
                      absl::InvalidArgumentError("sparse allreduce '" + name + "': values " +
                                                 values.shape().DebugString() +
                                                 " do not hold rows of dense_shape " +
                                                 denseShape.DebugString(/*num_values=*/8)),
                      done);
    zen_sparse_tensor_t s{};
    s.indices = indices.flat<int64_t>().data();
    s.values = values.tensor_data().data();
    s.nnz = values.dim_size(0);
    s.num_rows = denseShape.flat<int64_t>()(0);
    s.row_size = rowSize;
    OP_REQUIRES_OK_ASYNC(context, zenDtype(values.dtype(), &s.dtype), done);
    Pending::start(new Pending(context, std::move(done), copySparseResult),
                   [&](zen_completion_t completion, zen_handle_t* handle) {
                     return zen_enqueue_sparse_allreduce(name.c_str(), &s, reduceOp_, nullptr,
                                                         completion, handle);
                   });
  }

 private:
  int reduceOp_ = ZEN_AVERAGE;
};

void copyGathered(OpKernelContext* context, zen_handle_t handle) {
  zen_gathered_t g{};
  int code = zen_allgather_result(handle, &g);
  OP_REQUIRES(context, code == ZEN_OK, lastError(code));
  TensorShape shape;
  for (int32_t d = 0; d < g.ndims; ++d) shape.AddDim(g.shape[d]);
  Tensor* output = nullptr;
  OP_REQUIRES_OK(context, context->allocate_output(0, shape, &output));
  OP_REQUIRES(context, output->tensor_data().size() == g.bytes,
              absl::InternalError("allgather: result size does not match its shape"));
  if (g.bytes > 0) std::memcpy(const_cast<char*>(output->tensor_data().data()), g.data, g.bytes);
}

class AllgatherOp : public AsyncOpKernel {
 public:
  using AsyncOpKernel::AsyncOpKernel;

  void ComputeAsync(OpKernelContext* context, DoneCallback done) override {
    const Tensor& input = context->input(0);
    std::string name;
    OP_REQUIRES_OK_ASYNC(context, nameInput(context, 1, &name), done);
    OP_REQUIRES_ASYNC(
        context, input.dims() >= 1,
        absl::InvalidArgumentError("allgather '" + name + "': a tensor of at least one dimension"),
        done);
    TensorArg in;
    OP_REQUIRES_OK_ASYNC(context, in.init(input), done);
    Pending::start(new Pending(context, std::move(done), copyGathered),
                   [&](zen_completion_t completion, zen_handle_t* handle) {
                     return zen_enqueue_allgather(name.c_str(), &in.c, completion, handle);
                   });
  }
};

class BroadcastOp : public AsyncOpKernel {
 public:
  explicit BroadcastOp(OpKernelConstruction* c) : AsyncOpKernel(c) {
    OP_REQUIRES_OK(c, c->GetAttr("root_rank", &rootRank_));
  }

  void ComputeAsync(OpKernelContext* context, DoneCallback done) override {
    const Tensor& input = context->input(0);
    std::string name;
    OP_REQUIRES_OK_ASYNC(context, nameInput(context, 1, &name), done);
    Tensor* output = nullptr;
    OP_REQUIRES_OK_ASYNC(context, context->allocate_output(0, input.shape(), &output), done);
    if (input.NumElements() > 0) {
      std::memcpy(const_cast<char*>(output->tensor_data().data()), input.tensor_data().data(),
                  input.tensor_data().size());
    }
    TensorArg t;
    OP_REQUIRES_OK_ASYNC(context, t.init(*output), done);
    Pending::start(new Pending(context, std::move(done), nullptr), [&](zen_completion_t completion,
                                                                       zen_handle_t* handle) {
      return zen_enqueue_broadcast(name.c_str(), &t.c, rootRank_, completion, handle);
    });
  }

 private:
  int rootRank_ = 0;
};

void copyLastJoined(OpKernelContext* context, zen_handle_t handle) {
  int32_t last = -1;
  int code = zen_join_result(handle, &last);
  OP_REQUIRES(context, code == ZEN_OK, lastError(code));
  Tensor* output = nullptr;
  OP_REQUIRES_OK(context, context->allocate_output(0, TensorShape({}), &output));
  output->scalar<int32_t>()() = last;
}

class JoinOp : public AsyncOpKernel {
 public:
  using AsyncOpKernel::AsyncOpKernel;

  void ComputeAsync(OpKernelContext* context, DoneCallback done) override {
    Pending::start(new Pending(context, std::move(done), copyLastJoined),
                   [](zen_completion_t completion, zen_handle_t* handle) {
                     return zen_enqueue_join(completion, handle);
                   });
  }
};

class BarrierOp : public AsyncOpKernel {
 public:
  using AsyncOpKernel::AsyncOpKernel;

  void ComputeAsync(OpKernelContext* context, DoneCallback done) override {
    Pending::start(new Pending(context, std::move(done), nullptr),
                   [](zen_completion_t completion, zen_handle_t* handle) {
                     return zen_enqueue_barrier(completion, handle);
                   });
  }
};

REGISTER_KERNEL_BUILDER(Name("ZenAllreduce").Device(DEVICE_CPU), AllreduceOp);
REGISTER_KERNEL_BUILDER(Name("ZenSparseAllreduce").Device(DEVICE_CPU), SparseAllreduceOp);
REGISTER_KERNEL_BUILDER(Name("ZenAllgather").Device(DEVICE_CPU), AllgatherOp);
REGISTER_KERNEL_BUILDER(Name("ZenBroadcast").Device(DEVICE_CPU), BroadcastOp);
REGISTER_KERNEL_BUILDER(Name("ZenJoin").Device(DEVICE_CPU), JoinOp);
REGISTER_KERNEL_BUILDER(Name("ZenBarrier").Device(DEVICE_CPU), BarrierOp);

}  // namespace
}  // namespace zen_tf
}  // namespace tensorflow
