// Server-side scatter-add of Push lists on the GPU (ALGORITHMS.md §5 step 3).
//
// Steps per received list of c entries of R elements:
//   1. validate (a thread per entry): a position >= |I_j| records (call, entry, position)
//      with atomicMin; a call that finds an earlier call's error does nothing.
//   2. add (a thread per element): unless step 1 failed in this or an earlier call,
//      acc[pos][e] += row[e] in the accumulator type with atomicAdd, and the element-0
//      thread sets bit pos with atomicOr on its 32-bit word.
// Memory traffic per entry: 4 bytes of position read twice, rowBytes read, R accumulator
// read-modify-writes (4 or 8 bytes each) and one bitmap word RMW. reset() writes
// |I_j| x R accumulators and |I_j| / 8 bitmap bytes.
#include "cuda/device_util.cuh"
#include "cuda/gpu_aggregator.h"
#include "cuda/stream_wait.h"

namespace zen::cuda {
namespace {

using ull = unsigned long long;
constexpr ull kNone = ~0ULL;
enum ErrorWord : int { kErrorCall = 0, kErrorEntry = 1 };

__global__ void validateKernel(
    const uint32_t* positions, int64_t count, uint64_t size, ull call, ull* errors) {
  if (errors[kErrorCall] < call) return;  // an earlier call failed: this one is skipped
  for (int64_t i = globalThread(); i < count; i += gridThreads()) {
    const uint32_t pos = positions[i];
    if (pos >= size) {
      atomicMin(&errors[kErrorCall], call);
      atomicMin(&errors[kErrorEntry], (static_cast<ull>(i) << 32) | pos);
    }
  }
}

__device__ __forceinline__ void atomicAccumulate(float* p, float v) {
  atomicAdd(p, v);
}
__device__ __forceinline__ void atomicAccumulate(double* p, double v) {
  atomicAdd(p, v);
}
__device__ __forceinline__ void atomicAccumulate(int64_t* p, int64_t v) {
  // Two's complement: unsigned addition is signed addition modulo 2^64.
  atomicAdd(reinterpret_cast<ull*>(p), static_cast<ull>(v));
}

template <typename T>
__global__ void scatterAddKernel(const uint32_t* positions,
                                 const T* values,
                                 int64_t count,
                                 int64_t rowSize,
                                 uint64_t size,
                                 ull call,
                                 const ull* errors,
                                 AccumulatorT<T>* acc,
                                 uint32_t* bits) {
  if (errors[kErrorCall] <= call) return;  // this call or an earlier one is corrupt
  using Acc = AccumulatorT<T>;
  const int64_t total = count * rowSize;
  for (int64_t t = globalThread(); t < total; t += gridThreads()) {
    const int64_t i = t / rowSize;
    const int64_t e = t - i * rowSize;
    const uint64_t pos = positions[i];
    if (pos >= size) continue;  // validated already; never write out of bounds
    atomicAccumulate(acc + pos * rowSize + e, toAccumulator<Acc>(values[t]));
    if (e == 0) atomicOr(bits + (pos >> 5), 1u << (pos & 31));
  }
}

}  // namespace

Status GpuAggregator::reset(
    const IndexMap& map, uint32_t part, DataType dtype, int64_t rowSize, cudaStream_t stream) {
  ZEN_CHECK_ARG(static_cast<int64_t>(part) < map.numParts(),
                "part {} out of range: the index map has {} parts", part, map.numParts());
  ZEN_CHECK_ARG(rowSize >= 1, "row size must be at least 1, got {}", rowSize);
  const uint64_t size = map.partSize(static_cast<int>(part));
  ZEN_CHECK_ARG(size <= uint64_t{0xffffffffULL} + 1,
                "part {} owns {} rows, more than 32-bit local positions can address", part, size);
  const size_t accBytes =
      dispatchDataType(dtype, [](auto tag) { return sizeof(AccumulatorT<decltype(tag)>); });
  const size_t accTotal = static_cast<size_t>(size) * static_cast<size_t>(rowSize) * accBytes;
  const size_t wordBytes = static_cast<size_t>((size + 31) / 32) * sizeof(uint32_t);
  ZEN_RETURN_IF_ERROR(acc_.reserve(accTotal));
  ZEN_RETURN_IF_ERROR(bits_.reserve(wordBytes));
  ZEN_RETURN_IF_ERROR(errors_.reserve(2 * sizeof(ull)));
  ZEN_RETURN_IF_ERROR(hostErrors_.reserve(2 * sizeof(ull)));
  if (accTotal > 0) ZEN_CHECK_CUDA(cudaMemsetAsync(acc_.data(), 0, accTotal, stream));
  if (wordBytes > 0) ZEN_CHECK_CUDA(cudaMemsetAsync(bits_.data(), 0, wordBytes, stream));
  ZEN_CHECK_CUDA(cudaMemsetAsync(errors_.data(), 0xff, 2 * sizeof(ull), stream));
  part_ = part;
  size_ = size;
  dtype_ = dtype;
  rowSize_ = rowSize;
  entriesAdded_ = 0;
  calls_ = 0;
  return Status::ok();
}

Status GpuAggregator::add(const uint32_t* positions,
                          const void* values,
                          int64_t count,
                          cudaStream_t stream) {
  ZEN_CHECK_ARG(count >= 0, "negative entry count {}", count);
  ZEN_CHECK_ARG(errors_.data() != nullptr, "add() before reset()");
  if (count == 0) return Status::ok();
  ZEN_CHECK_ARG(positions != nullptr && values != nullptr,
                "{} push entries for part {} but no position or value buffer", count, part_);
  ZEN_CHECK_ARG(count < (int64_t{1} << 32), "{} entries in one push list exceed 2^32", count);
  const ull call = calls_++;
  auto* errors = errors_.as<ull>();
  if (smCount_ < 0) {
    int device = 0;
    ZEN_CHECK_CUDA(cudaGetDevice(&device));
    ZEN_CHECK_CUDA(cudaDeviceGetAttribute(&smCount_, cudaDevAttrMultiProcessorCount, device));
  }
  const int sm = smCount_;
  validateKernel<<<gridBlocks(count, kBlockThreads, sm), kBlockThreads, 0, stream>>>(
      positions, count, size_, call, errors);
  ZEN_CHECK_LAUNCH("validateKernel");
  ZEN_RETURN_IF_ERROR(dispatchDataType(dtype_, [&](auto tag) -> Status {
    using T = decltype(tag);
    scatterAddKernel<T>
        <<<gridBlocks(count * rowSize_, kBlockThreads, sm), kBlockThreads, 0, stream>>>(
            positions, static_cast<const T*>(values), count, rowSize_, size_, call, errors,
            acc_.as<AccumulatorT<T>>(), bits_.as<uint32_t>());
    ZEN_CHECK_LAUNCH("scatterAddKernel");
    return Status::ok();
  }));
  entriesAdded_ += count;
  return Status::ok();
}

Status GpuAggregator::check(cudaStream_t stream, double timeoutSeconds) {
  ZEN_CHECK_ARG(errors_.data() != nullptr, "check() before reset()");
  auto* host = hostErrors_.as<ull>();
  ZEN_CHECK_CUDA(
      cudaMemcpyAsync(host, errors_.data(), 2 * sizeof(ull), cudaMemcpyDeviceToHost, stream));
  ZEN_RETURN_IF_ERROR(waitStream(stream, timeoutSeconds, "the GPU aggregator's error words"));
  return errorStatus(host);
}

Status GpuAggregator::errorStatus(const unsigned long long* hostErrorWords) const {
  if (hostErrorWords[kErrorCall] == kNone) return Status::ok();
  const ull entry = hostErrorWords[kErrorEntry] >> 32;
  const ull pos = hostErrorWords[kErrorEntry] & 0xffffffffULL;
  return ZEN_ERROR(StatusCode::kInvalidArgument,
                   "corrupt push payload (list {} added to part {}): entry {} has local position "
                   "{} but part {} owns only {} positions; that list and later ones were not added",
                   hostErrorWords[kErrorCall], part_, entry, pos, part_, size_);
}

}  // namespace zen::cuda
