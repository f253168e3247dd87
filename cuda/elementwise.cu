// Element-wise kernels (see elementwise.h): grid-stride loops, one pass over the data.
#include "cuda/cuda_check.h"
#include "cuda/elementwise.h"
#include "cuda/gpu_plan.h"
#include "ops/reduce.h"

namespace zen::cuda {
namespace {

template <typename T>
__global__ void divideKernel(T* data, size_t count, T divisor) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    data[i] /= divisor;
  }
}

__global__ void findBadIndexKernel(const int64_t* indices,
                                   int64_t count,
                                   int64_t numRows,
                                   unsigned long long* firstBad) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    const int64_t idx = indices[i];
    if (idx < 0 || idx >= numRows) {
      atomicMin(firstBad, static_cast<unsigned long long>(i));
      return;  // later entries of this thread are larger
    }
  }
}

template <typename T>
__global__ void fillKernel(T* data, size_t count, T value) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    data[i] = value;
  }
}

int blocksFor(int64_t work) {
  int device = 0;
  int sms = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
    sms = 0;
  }
  return gridBlocks(work, kBlockThreads, sms);
}

}  // namespace

Status launchDivideIntegers(
    void* data, size_t count, DataType dtype, int divisor, cudaStream_t stream) {
  ZEN_CHECK_ARG(divisor > 0, "divide: divisor {} must be positive", divisor);
  if (count == 0 || divisor == 1) return Status::ok();
  const int blocks = blocksFor(static_cast<int64_t>(count));
  switch (dtype) {
    case DataType::kInt32:
      divideKernel<<<blocks, kBlockThreads, 0, stream>>>(static_cast<int32_t*>(data), count,
                                                         static_cast<int32_t>(divisor));
      break;
    case DataType::kInt64:
      divideKernel<<<blocks, kBlockThreads, 0, stream>>>(static_cast<int64_t*>(data), count,
                                                         static_cast<int64_t>(divisor));
      break;
    default:
      return ZEN_ERROR(StatusCode::kInvalidArgument, "divide: {} is not an integer dtype",
                       dataTypeName(dtype));
  }
  ZEN_CHECK_LAUNCH("divideKernel");
  return Status::ok();
}

Status launchFindBadIndex(const int64_t* indices,
                          int64_t count,
                          int64_t numRows,
                          unsigned long long* firstBad,
                          cudaStream_t stream) {
  if (count <= 0) return Status::ok();
  findBadIndexKernel<<<blocksFor(count), kBlockThreads, 0, stream>>>(indices, count, numRows,
                                                                     firstBad);
  ZEN_CHECK_LAUNCH("findBadIndexKernel");
  return Status::ok();
}

Status launchFillIdentity(
    void* data, size_t count, DataType dtype, ReduceOp op, cudaStream_t stream) {
  if (count == 0) return Status::ok();
  // The host computes one element, so the values are ops::fillIdentity's bit for bit; the
  // kernel only replicates its bytes.
  uint64_t value = 0;
  ops::fillIdentity(&value, 1, dtype, op);
  const int blocks = blocksFor(static_cast<int64_t>(count));
  switch (dataTypeSize(dtype)) {
    case 2:
      fillKernel<<<blocks, kBlockThreads, 0, stream>>>(static_cast<uint16_t*>(data), count,
                                                       static_cast<uint16_t>(value));
      break;
    case 4:
      fillKernel<<<blocks, kBlockThreads, 0, stream>>>(static_cast<uint32_t*>(data), count,
                                                       static_cast<uint32_t>(value));
      break;
    default:
      fillKernel<<<blocks, kBlockThreads, 0, stream>>>(static_cast<uint64_t*>(data), count, value);
      break;
  }
  ZEN_CHECK_LAUNCH("fillKernel");
  return Status::ok();
}

}  // namespace zen::cuda
