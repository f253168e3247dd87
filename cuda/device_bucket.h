#pragma once

// The CUDA executor's decisions about one bucket, in plain C++ (no CUDA headers) so that
// test/cuda_host checks them on any machine: which executor runs a response, where each
// tensor of a dense bucket sits in the device fusion buffer, how the copies into and out of
// it are batched into kernel launches, how a sparse bucket's result reaches its outputs, and
// where an allgather bucket's rows go.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/message.h"
#include "core/status.h"
#include "core/tensor_queue.h"

namespace zen::cuda {

// Whether this rank's part of the response is on a GPU: decided from the plan (the same on
// every rank, joined ranks included), never from the local entries, so that every rank
// enters the same collectives.
bool runsOnDevice(const Response& response, int rank);

// A dense bucket (allreduce) in the fusion buffer: tensor i's elements at offset[i] bytes,
// back to back as on the CPU (no padding: the collective runs over `count` elements).
struct DenseFusionPlan {
  std::vector<size_t> offset;  // per tensor of the response
  std::vector<size_t> bytes;
  size_t totalBytes = 0;
  size_t count = 0;  // elements
  // A single tensor this rank posted runs in place in its output: no fusion buffer.
  bool inPlace = false;
};
DenseFusionPlan planDenseFusion(const Response& response, const std::vector<TensorEntry*>& entries);

// One device-to-device copy of a batched launch.
struct CopyJob {
  const void* src = nullptr;
  void* dst = nullptr;
  size_t bytes = 0;
};
// At most this many copies per launch (their addresses travel as one kernel argument).
inline constexpr size_t kMaxCopiesPerLaunch = 128;
// The non-empty jobs in launches of at most maxPerLaunch, in order.
std::vector<std::vector<CopyJob>> batchCopies(const std::vector<CopyJob>& jobs,
                                              size_t maxPerLaunch = kMaxCopiesPerLaunch);
// Copies into the fusion buffer (present tensors' inputs) and out of it (their outputs);
// `zeros` lists the [offset, bytes) ranges of tensors this rank did not post (joined: zeros).
struct DenseFusionCopies {
  std::vector<CopyJob> in;
  std::vector<CopyJob> out;
  std::vector<CopyJob> zeros;  // src null
};
DenseFusionCopies fusionCopies(const DenseFusionPlan& plan,
                               const std::vector<TensorEntry*>& entries,
                               void* fusion);

// How a sparse bucket's result reaches its entries on the GPU.
enum class SparseOutput {
  kDenseInPlace,  // one tensor with a dense output: the scheme writes it directly
  kDenseFused,    // every present tensor has a dense output: the scheme fills the fusion
                  // buffer [totalRows x rowSize]; tensor i's rows are copied out (contiguous)
  kSparse,        // no dense outputs: the coalesced result is sorted and split per tensor on
                  // the device, each slice owned by its handle (cuda/sparse_result.h)
  kMixed,         // both kinds: the sparse result as for kSparse; the dense outputs are
                  // zero-filled and their rows scattered in on the device
  kNone,          // this rank posted none of the bucket (joined): a dense result, dropped
};
SparseOutput sparseOutputOf(const std::vector<TensorEntry*>& entries);

// Index shifts of a fused sparse input: tensor i's indices move by rowOffsets[i] (as
// ops/cpu_sparse_bucket.h), rows of present tensors back to back; nnz in all.
struct SparseFusionPlan {
  std::vector<int64_t> firstEntry;  // per tensor: where its entries start in the fused input
  int64_t nnz = 0;
};
SparseFusionPlan planSparseFusion(const Response& response,
                                  const std::vector<TensorEntry*>& entries);

// An allgather bucket on the device (response.gatherRows[i * ranks + p]: tensor i's rows on
// rank p, 0 for a joined rank). One receive buffer holds rank p's segment at
// segmentOffset[p]: its rows of every tensor back to back in tensor order (the CPU executor's
// fusion layout, so the bytes on the wire are the same). This rank copies its inputs straight
// into its own segment, which is then what it sends (NcclComm::allgatherv's aliased send).
// Tensor i's result, every rank's rows in rank order, is outputBytes[i] bytes.
struct GatherPlan {
  std::vector<size_t> rowBytes;       // per tensor: bytes of one first-dimension row
  std::vector<size_t> outputBytes;    // per tensor: the gathered tensor
  std::vector<size_t> segmentOffset;  // per rank, plus the end: the buffer's size last
};
// kInvalidArgument when gatherRows does not have tensors x ranks entries, a count is negative,
// or a tensor's gathered shape disagrees with the sum of its rows.
Result<GatherPlan> planGather(const Response& response, int ranks);
// Copies of this rank's inputs into its segment of `recv` (present tensors with rows).
std::vector<CopyJob> gatherInCopies(const GatherPlan& plan,
                                    const Response& response,
                                    const std::vector<TensorEntry*>& entries,
                                    int rank,
                                    void* recv);
// Copies out of `recv` into outputs[i] (tensor i's result; null: not wanted, e.g. joined),
// one per (tensor, rank) with rows, rank order within a tensor.
std::vector<CopyJob> gatherOutCopies(const GatherPlan& plan,
                                     const Response& response,
                                     const void* recv,
                                     const std::vector<void*>& outputs);

}  // namespace zen::cuda
