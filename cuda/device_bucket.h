#pragma once

// The CUDA executor's decisions about one bucket, in plain C++ (no CUDA headers) so that
// test/cuda_host checks them on any machine: which executor runs a response, where each
// tensor of a dense bucket sits in the device fusion buffer, how the copies into and out of
// it are batched into kernel launches, and how a sparse bucket's result reaches its outputs.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/message.h"
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
  kSparseToHost,  // no dense outputs: the coalesced device result is copied to the host and
                  // split per tensor (OpResult::sparse is host memory)
  kMixed,         // both kinds in one bucket: refused (kUnimplemented)
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

}  // namespace zen::cuda
