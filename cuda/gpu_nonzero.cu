// Nonzero extraction on the GPU: per-tile count, scan, scatter.
//
// Steps for R rows of B bytes:
//   1. flag (one pass over the dense tensor): a row is tested by one lane (rows of at most
//      32 bytes; a warp covers 32 consecutive rows, coalesced) or by a whole warp (longer
//      rows); __ballot_sync packs 32 row flags into a word, and each tile of 8192 rows writes
//      its count.
//   2. scan the R / 8192 tile counts: tile offsets and nnz. The host reads nnz (the one
//      synchronization) and sizes the output.
//   3. compact: each warp walks its 32 flag words, lane l taking bit l, so the k-th non-zero
//      row writes indices[k] (and, for one-element rows, values[k]) with consecutive lanes.
//   4. gather (rows of more than one element): values[k] = dense[indices[k]] in the widest
//      aligned unit.
// Memory traffic per row: B bytes read + 1/8 byte of flags written and read; per non-zero
// row: 8 bytes of index written, plus B read and B written (and 8 more read by the gather).
#include "cuda/device_util.cuh"
#include "cuda/gpu_nonzero.h"
#include "cuda/scan.h"
#include "cuda/stream_wait.h"

namespace zen::cuda {
namespace {

enum Slot : int { kWordsSlot = 1, kTileCountsSlot, kTileOffsetsSlot };
enum PinnedSlot : int { kTotalPinned = 0 };

template <typename T>
__device__ __forceinline__ bool isNonzero(T v) {
  using Acc = AccumulatorT<T>;
  return !(toAccumulator<Acc>(v) == Acc(0));
}

template <typename T>
__device__ __forceinline__ bool rowNonzero(const T* row, int64_t rowSize) {
  bool nz = false;
  for (int64_t e = 0; e < rowSize; ++e) nz |= isNonzero(row[e]);
  return nz;
}

// Step 1. Warp w of block b produces flag words firstWord .. firstWord + 31 (firstWord =
// b * kTileWords + 32 w); lane j keeps word firstWord + j, matching tileCompact's layout.
template <typename T, int kLanesPerRow>
__global__ void __launch_bounds__(kBlockThreads) flagRowsKernel(const T* dense,
                                                                int64_t numRows,
                                                                int64_t rowSize,
                                                                int64_t numWords,
                                                                uint32_t* words,
                                                                int64_t* tileCounts) {
  constexpr int kUnroll = 8;  // independent row loads in flight per lane
  __shared__ int warpCounts[kBlockThreads / 32];
  const int lane = laneId();
  const int warp = static_cast<int>(threadIdx.x / 32);
  const int64_t firstWord = static_cast<int64_t>(blockIdx.x) * kTileWords + warp * 32;
  uint32_t myWord = 0;
  int count = 0;
  if constexpr (kLanesPerRow == 1) {
    for (int j0 = 0; j0 < 32; j0 += kUnroll) {
      if (firstWord + j0 >= numWords) break;  // uniform across the warp
      bool nz[kUnroll];
      if (rowSize == 1) {  // straight-line loads, all kUnroll in flight
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          const int64_t row = (firstWord + j0 + u) * 32 + lane;
          nz[u] = row < numRows && isNonzero(dense[row]);
        }
      } else {
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          const int64_t row = (firstWord + j0 + u) * 32 + lane;
          nz[u] = row < numRows && rowNonzero(dense + row * rowSize, rowSize);
        }
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const uint32_t mask = __ballot_sync(0xffffffffu, nz[u]);
        if (lane == j0 + u) myWord = mask;
        count += __popc(mask);  // rows past numRows are 0 bits
      }
    }
  } else {
    // A warp per row: lanes stride over the elements, __any_sync decides the row's bit.
    for (int j = 0; j < 32; ++j) {
      if (firstWord + j >= numWords) break;  // uniform
      uint32_t mask = 0;
      for (int b = 0; b < 32; ++b) {
        const int64_t row = (firstWord + j) * 32 + b;
        if (row >= numRows) break;  // uniform
        const T* p = dense + row * rowSize;
        bool nz = false;
        for (int64_t e = lane; e < rowSize; e += 32) nz |= isNonzero(p[e]);
        if (__any_sync(0xffffffffu, nz)) mask |= 1u << b;
      }
      if (lane == j) myWord = mask;
      count += __popc(mask);
    }
  }
  if (firstWord + lane < numWords) words[firstWord + lane] = myWord;
  if (lane == 0) warpCounts[warp] = count;
  __syncthreads();
  if (threadIdx.x == 0) {
    int64_t total = 0;
    for (int i = 0; i < kBlockThreads / 32; ++i) total += warpCounts[i];
    tileCounts[blockIdx.x] = total;
  }
}

// Step 3. For one-element rows (fused) the k-th non-zero row's element goes with its index.
template <typename Unit>
__global__ void __launch_bounds__(kBlockThreads) compactRowsKernel(const uint32_t* words,
                                                                   int64_t numWords,
                                                                   const int64_t* tileOffsets,
                                                                   int64_t* indices,
                                                                   const Unit* dense,
                                                                   Unit* values,
                                                                   bool fused) {
  tileCompact([words](int64_t w) { return words[w]; }, numWords, tileOffsets,
              [&](int64_t k, int64_t row) {
                indices[k] = row;
                if (fused) values[k] = dense[row];
              });
}

}  // namespace

Status GpuNonzeroExtractor::extract(const DenseView& dense, GpuSparse* out, cudaStream_t stream) {
  ZEN_CHECK_ARG(out != nullptr, "nonzero extraction needs an output");
  ZEN_CHECK_ARG(dense.device.kind == Device::Kind::kCuda,
                "GPU nonzero extraction got a tensor on {}", dense.device.toString());
  ZEN_CHECK_ARG(dense.shape.rank() >= 1, "a dense gradient needs at least one dimension");
  const int64_t rows = dense.numRows();
  const int64_t rowSize = dense.rowSize();
  ZEN_CHECK_ARG(rows >= 0 && rowSize >= 0, "negative shape {}", dense.shape.toString());
  ZEN_CHECK_ARG(rows == 0 || rowSize == 0 || dense.data != nullptr, "dense tensor has no data");
  out->numRows = rows;
  out->rowSize = rowSize;
  out->dtype = dense.dtype;
  out->deviceIndex = dense.device.index;
  out->nnz = 0;
  if (rows == 0 || rowSize == 0) return Status::ok();

  const int64_t numWords = wordsForBits(rows);
  const int64_t tiles = tilesForBits(rows);
  uint32_t* words = nullptr;
  int64_t* tileCounts = nullptr;
  int64_t* tileOffsets = nullptr;
  int64_t* total = nullptr;
  ZEN_RETURN_IF_ERROR(workspace_.device(kWordsSlot, numWords, &words));
  ZEN_RETURN_IF_ERROR(workspace_.device(kTileCountsSlot, tiles + 1, &tileCounts));
  ZEN_RETURN_IF_ERROR(workspace_.device(kTileOffsetsSlot, tiles + 1, &tileOffsets));
  ZEN_RETURN_IF_ERROR(workspace_.pinned(kTotalPinned, 1, &total));

  // Step 1: the count past the last tile stays 0, so the scan's last item is nnz.
  ZEN_CHECK_CUDA(cudaMemsetAsync(tileCounts + tiles, 0, sizeof(int64_t), stream));
  const size_t elementBytes = dataTypeSize(dense.dtype);
  const bool warpPerRow = nonzeroLanesPerRow(rowSize, elementBytes) == 32;
  ZEN_RETURN_IF_ERROR(dispatchDataType(dense.dtype, [&](auto tag) -> Status {
    using T = decltype(tag);
    const T* data = static_cast<const T*>(dense.data);
    if (warpPerRow) {
      flagRowsKernel<T, 32>
          <<<tiles, kBlockThreads, 0, stream>>>(data, rows, rowSize, numWords, words, tileCounts);
    } else {
      flagRowsKernel<T, 1>
          <<<tiles, kBlockThreads, 0, stream>>>(data, rows, rowSize, numWords, words, tileCounts);
    }
    ZEN_CHECK_LAUNCH("flagRowsKernel");
    return Status::ok();
  }));

  // Step 2.
  ZEN_RETURN_IF_ERROR(exclusiveSum(tileCounts, tileOffsets, tiles + 1, &workspace_, stream));
  ZEN_CHECK_CUDA(
      cudaMemcpyAsync(total, tileOffsets + tiles, sizeof(int64_t), cudaMemcpyDeviceToHost, stream));
  ZEN_RETURN_IF_ERROR(
      waitStream(stream, workspace_.waitTimeoutSeconds(), "the GPU nonzero extraction's count"));
  const int64_t nnz = *total;
  ZEN_RETURN_IF_ERROR(out->reserve(nnz));
  out->nnz = nnz;
  if (nnz == 0) return Status::ok();

  // Steps 3 and 4.
  const bool fused = rowSize == 1;
  auto* indices = out->indices.as<int64_t>();
  ZEN_RETURN_IF_ERROR(dispatchUnit(static_cast<int>(elementBytes), [&](auto tag) -> Status {
    using Unit = decltype(tag);
    compactRowsKernel<Unit><<<tiles, kBlockThreads, 0, stream>>>(
        words, numWords, tileOffsets, indices, static_cast<const Unit*>(dense.data),
        out->values.as<Unit>(), fused);
    ZEN_CHECK_LAUNCH("compactRowsKernel");
    return Status::ok();
  }));
  if (!fused) {
    ZEN_RETURN_IF_ERROR(copyRows(dense.data, out->values.data(), nnz, out->rowBytes(),
                                 ListRow<int64_t>{indices}, IdentityRow{}, nullptr,
                                 workspace_.smCount(), stream));
  }
  return Status::ok();
}

}  // namespace zen::cuda
