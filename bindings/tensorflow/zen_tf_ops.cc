// zen.tensorflow's op definitions (the kernels are in zen_tf_kernels.cc). Every op takes the
// operation's name as a scalar string input rather than an attribute, so that an eager
// program's generated names do not each instantiate a kernel. As in Horovod, the collectives
// are not marked stateful: tf.function orders stateful ops one after the other (automatic
// control dependencies), which would run a step's collectives one at a time instead of all
// in flight for the daemon to fuse. The graph optimizer may then merge two collectives of
// the same input and name, or drop one whose result is unused, the same way on every rank.
// Join and barrier have no data to depend on and are stateful, so they are never dropped.
// process_set_id: the process set an op runs over (zen.common.process_sets; 0: every rank);
// its rank numbers (root_rank, splits, the order of gathered rows) are then within the set.
#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tensorflow {
namespace {

using shape_inference::InferenceContext;
using shape_inference::ShapeHandle;

// The input's shape with an unknown first dimension (how many rows only the collective knows).
absl::Status unknownRows(InferenceContext* c, int input, int output) {
  ShapeHandle in = c->input(input);
  ShapeHandle out;
  TF_RETURN_IF_ERROR(c->WithRankAtLeast(in, 1, &in));
  TF_RETURN_IF_ERROR(c->ReplaceDim(in, 0, c->UnknownDim(), &out));
  c->set_output(output, out);
  return absl::OkStatus();
}

// unknownRows for every tensor of a grouped op (all inputs but the trailing name).
absl::Status unknownRowsOfEach(InferenceContext* c) {
  for (int i = 0; i + 1 < c->num_inputs(); ++i) TF_RETURN_IF_ERROR(unknownRows(c, i, i));
  return absl::OkStatus();
}

}  // namespace

REGISTER_OP("ZenAllreduce")
    .Attr("T: {float16, bfloat16, float32, float64, int32, int64}")
    .Attr("process_set_id: int = 0")
    .Attr("reduce_op: int")
    .Input("tensor: T")
    .Input("tensor_name: string")
    .Output("reduced: T")
    .SetShapeFn(shape_inference::UnchangedShape)
    .Doc(
        "tensor reduced over all ranks (reduce_op, zen_reduce_op_t: 0 Sum, 1 Average, 2 Min, "
        "3 Max, 4 Product, 5 Adasum).");

REGISTER_OP("ZenSparseAllreduce")
    .Attr("T: {float16, bfloat16, float32, float64, int32, int64}")
    .Attr("process_set_id: int = 0")
    .Attr("reduce_op: int")
    .Input("values: T")
    .Input("indices: int64")
    .Input("dense_shape: int64")
    .Input("tensor_name: string")
    .Output("out_values: T")
    .Output("out_indices: int64")
    .SetShapeFn([](InferenceContext* c) {
      TF_RETURN_IF_ERROR(unknownRows(c, 0, 0));
      c->set_output(1, c->Vector(c->UnknownDim()));
      return absl::OkStatus();
    })
    .Doc(
        "Row-sparse allreduce (tf.IndexedSlices): rows values[i] at indices[i] of a tensor of "
        "dense_shape, repeats summed; returns the distinct rows of the result in increasing "
        "order.");

REGISTER_OP("ZenAllgather")
    .Attr("T: {float16, bfloat16, float32, float64, int32, int64}")
    .Attr("process_set_id: int = 0")
    .Input("tensor: T")
    .Input("tensor_name: string")
    .Output("gathered: T")
    .SetShapeFn([](InferenceContext* c) { return unknownRows(c, 0, 0); })
    .Doc("Every rank's tensor concatenated along the first dimension, in rank order.");

REGISTER_OP("ZenBroadcast")
    .Attr("T: {float16, bfloat16, float32, float64, int32, int64}")
    .Attr("process_set_id: int = 0")
    .Attr("root_rank: int")
    .Input("tensor: T")
    .Input("tensor_name: string")
    .Output("broadcast: T")
    .SetShapeFn(shape_inference::UnchangedShape)
    .Doc("root_rank's tensor on every rank.");

REGISTER_OP("ZenAlltoall")
    .Attr("T: {float16, bfloat16, float32, float64, int32, int64}")
    .Attr("process_set_id: int = 0")
    .Input("tensor: T")
    .Input("splits: int32")
    .Input("tensor_name: string")
    .Output("output: T")
    .Output("received_splits: int32")
    .SetShapeFn([](InferenceContext* c) {
      TF_RETURN_IF_ERROR(unknownRows(c, 0, 0));
      c->set_output(1, c->Vector(c->UnknownDim()));
      return absl::OkStatus();
    })
    .Doc(
        "Horovod's alltoall: splits[d] rows of the first dimension go to rank d (an empty "
        "splits: equal pieces); returns what every rank sent here, in rank order, and the rows "
        "received from each rank.");

REGISTER_OP("ZenReducescatter")
    .Attr("T: {float16, bfloat16, float32, float64, int32, int64}")
    .Attr("process_set_id: int = 0")
    .Attr("reduce_op: int")
    .Input("tensor: T")
    .Input("tensor_name: string")
    .Output("reduced: T")
    .SetShapeFn([](InferenceContext* c) { return unknownRows(c, 0, 0); })
    .Doc(
        "Horovod's reducescatter: tensor reduced over all ranks (reduce_op as ZenAllreduce's), "
        "of which this rank keeps its piece of the first dimension (the first rows % size "
        "ranks one row more).");

// Grouped ops: a list of tensors (dtypes may differ) posted as one group, negotiated in one
// cycle and fused where they fit; tensor i is named "<tensor_name>.<i>".
REGISTER_OP("ZenGroupedAllreduce")
    .Attr("T: list({float16, bfloat16, float32, float64, int32, int64}) >= 1")
    .Attr("process_set_id: int = 0")
    .Attr("reduce_op: int")
    .Input("tensors: T")
    .Input("tensor_name: string")
    .Output("reduced: T")
    .SetShapeFn([](InferenceContext* c) {
      for (int i = 0; i + 1 < c->num_inputs(); ++i) c->set_output(i, c->input(i));
      return absl::OkStatus();
    })
    .Doc("ZenAllreduce of each tensor, as one group.");

REGISTER_OP("ZenGroupedAllgather")
    .Attr("T: list({float16, bfloat16, float32, float64, int32, int64}) >= 1")
    .Attr("process_set_id: int = 0")
    .Input("tensors: T")
    .Input("tensor_name: string")
    .Output("gathered: T")
    .SetShapeFn([](InferenceContext* c) { return unknownRowsOfEach(c); })
    .Doc("ZenAllgather of each tensor, as one group.");

REGISTER_OP("ZenGroupedReducescatter")
    .Attr("T: list({float16, bfloat16, float32, float64, int32, int64}) >= 1")
    .Attr("process_set_id: int = 0")
    .Attr("reduce_op: int")
    .Input("tensors: T")
    .Input("tensor_name: string")
    .Output("reduced: T")
    .SetShapeFn([](InferenceContext* c) { return unknownRowsOfEach(c); })
    .Doc("ZenReducescatter of each tensor, as one group.");

REGISTER_OP("ZenJoin")
    .Output("last_joined_rank: int32")
    .SetIsStateful()
    .SetShapeFn(shape_inference::ScalarShape)
    .Doc("This rank has no more data; ends when every rank has joined.");

REGISTER_OP("ZenBarrier")
    .Attr("process_set_id: int = 0")
    .SetIsStateful()
    .SetShapeFn(shape_inference::NoOutputs)
    .Doc("Ends when every rank (of the process set) has reached it.");

}  // namespace tensorflow
