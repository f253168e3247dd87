#include "cuda/gpu_sparse.h"

#include <cuda_runtime.h>

#include "cuda/cuda_check.h"

namespace zen::cuda {

Status GpuSparse::reserve(int64_t rows) {
  ZEN_RETURN_IF_ERROR(indices.reserve(static_cast<size_t>(rows) * sizeof(int64_t)));
  return values.reserve(static_cast<size_t>(rows) * rowBytes());
}

SparseView GpuSparse::view() const {
  SparseView v;
  v.indices = indices.as<const int64_t>();
  v.values = values.data();
  v.nnz = nnz;
  v.numRows = numRows;
  v.rowSize = rowSize;
  v.dtype = dtype;
  v.device = Device::cuda(deviceIndex);
  return v;
}

Status GpuSparse::toHost(SparseTensor* out) const {
  out->numRows = numRows;
  out->rowSize = rowSize;
  out->dtype = dtype;
  out->indices.resize(static_cast<size_t>(nnz));
  out->values.resize(static_cast<size_t>(nnz) * rowBytes());
  if (nnz == 0) return Status::ok();
  ZEN_CHECK_CUDA(cudaMemcpy(out->indices.data(), indices.data(),
                            out->indices.size() * sizeof(int64_t), cudaMemcpyDeviceToHost));
  ZEN_CHECK_CUDA(
      cudaMemcpy(out->values.data(), values.data(), out->values.size(), cudaMemcpyDeviceToHost));
  return Status::ok();
}

}  // namespace zen::cuda
