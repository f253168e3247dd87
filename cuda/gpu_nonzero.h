#pragma once

// Nonzero extraction on the GPU: the rows of a dense device tensor that hold any non-zero
// element, as a device COO tensor (the GPU twin of core/nonzero.h).
#include <cuda_runtime.h>

#include "core/status.h"
#include "core/tensor.h"
#include "cuda/gpu_sparse.h"
#include "cuda/workspace.h"

namespace zen::cuda {

class GpuNonzeroExtractor {
 public:
  // Writes the rows of `dense` ([numRows x rowSize], device memory) with any element that
  // compares unequal to zero (-0.0 is zero, NaN is kept), ascending, with their rows, into
  // `out` — the same result as extractNonzeroRows on the CPU. Waits for `stream` once (the
  // count sizes the output; at most setWaitTimeout's bound, then kTimeout); the rows are
  // ready in stream order when it returns.
  Status extract(const DenseView& dense, GpuSparse* out, cudaStream_t stream);

  // The bound on its wait for the stream (Workspace::setWaitTimeout; 30 s unless set).
  void setWaitTimeout(double seconds) { workspace_.setWaitTimeout(seconds); }

  size_t scratchBytes() const { return workspace_.heldBytes(); }

 private:
  Workspace workspace_;
};

}  // namespace zen::cuda
