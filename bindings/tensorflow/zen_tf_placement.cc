// zen.tensorflow's placement ops, Horovod's rank_op, local_rank_op, size_op, local_size_op and
// process_set_included_op: an int32 scalar read from the library when the op runs, not when
// the graph is built (a graph may be built before zen.init() or saved and run in another job).
// Stateful, so that tf.function neither folds them into constants nor drops them. Definitions
// and CPU kernels in one file: each is a plain synchronous read of the C API.
#include <algorithm>
#include <string>
#include <vector>

#include "bindings/c_api.h"
#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"

namespace tensorflow {
namespace zen_tf {
namespace {

absl::Status lastError() {
  return absl::FailedPreconditionError(std::string("zen: ") + zen_last_error());
}

void setScalar(OpKernelContext* context, int value) {
  Tensor* out = nullptr;
  OP_REQUIRES_OK(context, context->allocate_output(0, TensorShape({}), &out));
  out->scalar<int32>()() = value;
}

// zen_rank(), zen_local_rank() or zen_local_size(): negative before zen_init.
template <int (*Query)()>
class PlacementOp : public OpKernel {
 public:
  explicit PlacementOp(OpKernelConstruction* context) : OpKernel(context) {}
  void Compute(OpKernelContext* context) override {
    const int value = Query();
    OP_REQUIRES(context, value >= 0, lastError());
    setScalar(context, value);
  }
};

// The ranks of the process_set_id attribute's set (0: every rank), or an error for a set this
// rank does not know.
absl::Status setRanks(int32_t id, std::vector<int32_t>* ranks) {
  int32_t count = 0;
  if (zen_process_set_ranks(id, nullptr, 0, &count) != ZEN_OK) return lastError();
  ranks->resize(static_cast<size_t>(count));
  if (zen_process_set_ranks(id, ranks->data(), count, &count) != ZEN_OK) return lastError();
  return absl::OkStatus();
}

// size_op (the set's size) or process_set_included_op (1 when this rank is a member).
template <bool kIncluded>
class ProcessSetOp : public OpKernel {
 public:
  explicit ProcessSetOp(OpKernelConstruction* context) : OpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("process_set_id", &id_));
  }
  void Compute(OpKernelContext* context) override {
    std::vector<int32_t> ranks;
    OP_REQUIRES_OK(context, setRanks(id_, &ranks));
    if (!kIncluded) {
      setScalar(context, static_cast<int>(ranks.size()));
      return;
    }
    const int rank = zen_rank();
    OP_REQUIRES(context, rank >= 0, lastError());
    setScalar(context, std::find(ranks.begin(), ranks.end(), rank) != ranks.end() ? 1 : 0);
  }

 private:
  int32_t id_ = 0;
};

}  // namespace
}  // namespace zen_tf

REGISTER_OP("ZenRank")
    .Output("rank: int32")
    .SetIsStateful()
    .SetShapeFn(shape_inference::ScalarShape)
    .Doc("This rank's number in the job (zen_rank), when the op runs.");
REGISTER_OP("ZenLocalRank")
    .Output("local_rank: int32")
    .SetIsStateful()
    .SetShapeFn(shape_inference::ScalarShape)
    .Doc("This rank's number on its host (zen_local_rank), when the op runs.");
REGISTER_OP("ZenLocalSize")
    .Output("local_size: int32")
    .SetIsStateful()
    .SetShapeFn(shape_inference::ScalarShape)
    .Doc("The number of ranks on this host (zen_local_size), when the op runs.");
REGISTER_OP("ZenSize")
    .Attr("process_set_id: int = 0")
    .Output("size: int32")
    .SetIsStateful()
    .SetShapeFn(shape_inference::ScalarShape)
    .Doc("The number of ranks of the process set (0: the job), when the op runs.");
REGISTER_OP("ZenProcessSetIncluded")
    .Attr("process_set_id: int = 0")
    .Output("included: int32")
    .SetIsStateful()
    .SetShapeFn(shape_inference::ScalarShape)
    .Doc("1 when this rank is a member of the process set, else 0, when the op runs.");

REGISTER_KERNEL_BUILDER(Name("ZenRank").Device(DEVICE_CPU), zen_tf::PlacementOp<zen_rank>);
REGISTER_KERNEL_BUILDER(Name("ZenLocalRank").Device(DEVICE_CPU),
                        zen_tf::PlacementOp<zen_local_rank>);
REGISTER_KERNEL_BUILDER(Name("ZenLocalSize").Device(DEVICE_CPU),
                        zen_tf::PlacementOp<zen_local_size>);
REGISTER_KERNEL_BUILDER(Name("ZenSize").Device(DEVICE_CPU), zen_tf::ProcessSetOp<false>);
REGISTER_KERNEL_BUILDER(Name("ZenProcessSetIncluded").Device(DEVICE_CPU),
                        zen_tf::ProcessSetOp<true>);

}  // namespace tensorflow
