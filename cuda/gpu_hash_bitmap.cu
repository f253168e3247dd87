// Algorithm 2, the hash bitmap, on the GPU (ALGORITHMS.md §4 and §5 steps 4-5).
//
// Steps, all over bit tiles of 8192 positions (one 32-bit word per thread):
//   encode (server j, from the aggregator's occupancy words and accumulators):
//     1. popcount per tile, exclusive scan: each tile's first value row and the count; the
//        host reads the count (and the aggregator's error words) — one synchronization.
//     2. the bitmap is the first ceil(|I_j| / 8) bytes of the occupancy words (one copy).
//     3. compact: each warp walks its words, lane l taking bit l, so the k-th set bit writes
//        value row k (one-element rows directly, else its position, then a thread per
//        element gathers acc[pos] x scale, rounded once to the dtype).
//   decode (every rank, every part):
//     1. popcount per tile and scan as above; one thread checks the padding bits and the
//        count against valueBytes and writes the verdict to device memory.
//     2. unless the verdict is bad: the k-th set bit p maps to index map.indexOf(j, p)
//        (Feistel inverse, no table), and row k is copied there (dense) or written with it
//        (sparse). The host reads the verdict (one synchronization).
// Memory traffic: encode reads |I_j| / 8 bitmap bytes twice and, per set bit, R accumulators
// (4 or 8 bytes each), and writes |I_j| / 8 + count x rowBytes; decode reads the bitmap twice
// and count x rowBytes, and writes count x rowBytes (+ 8 bytes of index per row for sparse,
// written and read back once for dense rows of more than one element).
#include <cmath>
#include <type_traits>

#include "cuda/device_util.cuh"
#include "cuda/gpu_hash_bitmap.h"
#include "cuda/scan.h"
#include "cuda/stream_wait.h"

namespace zen::cuda {
namespace {

using ull = unsigned long long;

enum Slot : int { kTileCountsSlot = 1, kTileOffsetsSlot, kRowListSlot, kVerdictSlot };
enum PinnedSlot : int { kReadbackPinned = 0 };
enum Verdict : int { kVerdictOk = 0, kVerdictPadding = 1, kVerdictCount = 2 };

struct WordSource {
  const uint32_t* words;
  __device__ uint32_t operator()(int64_t w) const { return words[w]; }
};

struct ByteSource {
  const uint8_t* bitmap;
  int64_t bytes;
  __device__ uint32_t operator()(int64_t w) const { return loadBitmapWord(bitmap, bytes, w); }
};

// acc x scale rounded once to T; integers divide by 1/scale and truncate (the CPU's scaleRow).
template <typename T>
struct Scaler {
  using Acc = AccumulatorT<T>;
  double scale;
  double divisor;
  bool one;
  __device__ T operator()(Acc v) const {
    if (one) return fromAccumulator<T>(v);
    if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(trunc(static_cast<double>(v) / divisor));
    } else {
      return fromAccumulator<T>(v * static_cast<Acc>(scale));
    }
  }
};

template <typename T>
__global__ void __launch_bounds__(kBlockThreads) encodeCompactKernel(const uint32_t* words,
                                                                     int64_t numWords,
                                                                     const int64_t* tileOffsets,
                                                                     const AccumulatorT<T>* acc,
                                                                     Scaler<T> scaler,
                                                                     bool fused,
                                                                     T* out,
                                                                     uint32_t* rowList) {
  tileCompact(WordSource{words}, numWords, tileOffsets, [&](int64_t k, int64_t pos) {
    if (fused) {
      out[k] = scaler(acc[pos]);
    } else {
      rowList[k] = static_cast<uint32_t>(pos);
    }
  });
}

template <typename T>
__global__ void encodeRowsKernel(const uint32_t* rowList,
                                 int64_t count,
                                 int64_t rowSize,
                                 const AccumulatorT<T>* acc,
                                 Scaler<T> scaler,
                                 T* out) {
  const int64_t total = count * rowSize;
  for (int64_t t = globalThread(); t < total; t += gridThreads()) {
    const int64_t k = t / rowSize;
    const int64_t e = t - k * rowSize;
    out[t] = scaler(acc[static_cast<int64_t>(rowList[k]) * rowSize + e]);
  }
}

// verdict[0] = kVerdict*, verdict[1] = set bits found, verdict[2] = the last bitmap byte.
__global__ void verdictKernel(const int64_t* total,
                              const uint8_t* bitmap,
                              int64_t bitmapBytes,
                              uint64_t size,
                              int64_t expectedCount,
                              ull* verdict) {
  const uint8_t last = bitmap[bitmapBytes - 1];
  const int padFrom = static_cast<int>(size % 8);
  const bool padding = padFrom != 0 && (last >> padFrom) != 0;
  verdict[1] = static_cast<ull>(*total);
  verdict[2] = last;
  verdict[0] = padding ? kVerdictPadding : (*total != expectedCount ? kVerdictCount : kVerdictOk);
}

// Dense decode: one-element rows go straight to their index (fused), longer rows record it.
template <typename Unit>
__global__ void __launch_bounds__(kBlockThreads) decodeDenseKernel(ByteSource source,
                                                                   int64_t numWords,
                                                                   const int64_t* tileOffsets,
                                                                   IndexMap map,
                                                                   uint32_t part,
                                                                   const ull* verdict,
                                                                   bool fused,
                                                                   const Unit* values,
                                                                   Unit* out,
                                                                   int64_t* rowList) {
  if (verdict[0] != kVerdictOk) return;  // whole block: before tileCompact's barrier
  tileCompact(source, numWords, tileOffsets, [&](int64_t k, int64_t pos) {
    const auto idx = static_cast<int64_t>(map.indexOf(part, static_cast<uint64_t>(pos)));
    if (fused) {
      out[idx] = values[k];
    } else {
      rowList[k] = idx;
    }
  });
}

__global__ void __launch_bounds__(kBlockThreads) decodeIndicesKernel(ByteSource source,
                                                                     int64_t numWords,
                                                                     const int64_t* tileOffsets,
                                                                     IndexMap map,
                                                                     uint32_t part,
                                                                     const ull* verdict,
                                                                     int64_t* outIndices) {
  if (verdict[0] != kVerdictOk) return;
  tileCompact(source, numWords, tileOffsets, [&](int64_t k, int64_t pos) {
    outIndices[k] = static_cast<int64_t>(map.indexOf(part, static_cast<uint64_t>(pos)));
  });
}

// Tile counts and their exclusive scan for `numWords` words: offsets[tiles] = set bits.
template <typename Source>
Status countTiles(Source source,
                  int64_t numWords,
                  int64_t tiles,
                  Workspace* ws,
                  cudaStream_t stream,
                  int64_t** offsetsOut) {
  int64_t* counts = nullptr;
  int64_t* offsets = nullptr;
  ZEN_RETURN_IF_ERROR(ws->device(kTileCountsSlot, tiles + 1, &counts));
  ZEN_RETURN_IF_ERROR(ws->device(kTileOffsetsSlot, tiles + 1, &offsets));
  ZEN_CHECK_CUDA(cudaMemsetAsync(counts + tiles, 0, sizeof(int64_t), stream));
  tileCountKernel<<<tiles, kBlockThreads, 0, stream>>>(source, numWords, counts);
  ZEN_CHECK_LAUNCH("tileCountKernel");
  ZEN_RETURN_IF_ERROR(exclusiveSum(counts, offsets, tiles + 1, ws, stream));
  *offsetsOut = offsets;
  return Status::ok();
}

// The host-side checks both decoders share; *count = rows in the payload.
Status checkDecodeArgs(const IndexMap& map,
                       uint32_t part,
                       const uint8_t* bitmap,
                       size_t bitmapBytes,
                       const void* values,
                       size_t valueBytes,
                       DataType dtype,
                       int64_t rowSize,
                       Workspace* workspace,
                       int64_t* count) {
  ZEN_CHECK_ARG(workspace != nullptr, "GPU decode needs a workspace");
  ZEN_CHECK_ARG(rowSize >= 1, "row size must be at least 1, got {}", rowSize);
  ZEN_CHECK_ARG(static_cast<int64_t>(part) < map.numParts(),
                "bitmap for part {} but the index map has {} parts", part, map.numParts());
  const uint64_t size = map.partSize(static_cast<int>(part));
  const auto expected = static_cast<size_t>((size + 7) / 8);
  ZEN_CHECK_ARG(bitmapBytes == expected,
                "bitmap of part {} has {} bytes, expected ceil({} / 8) = {}", part, bitmapBytes,
                size, expected);
  ZEN_CHECK_ARG(bitmapBytes == 0 || bitmap != nullptr, "bitmap of part {} has no buffer", part);
  const size_t rowBytes = static_cast<size_t>(rowSize) * dataTypeSize(dtype);
  ZEN_CHECK_ARG(valueBytes % rowBytes == 0,
                "part {} sent {} value bytes, not a multiple of {} bytes per row", part, valueBytes,
                rowBytes);
  ZEN_CHECK_ARG(valueBytes == 0 || values != nullptr, "values of part {} have no buffer", part);
  ZEN_CHECK_ARG(bitmapBytes > 0 || valueBytes == 0,
                "part {} owns no positions but sent {} value bytes", part, valueBytes);
  *count = static_cast<int64_t>(valueBytes / rowBytes);
  return Status::ok();
}

// Decode step 1: counts, scan, verdict. *verdict points to 3 device words.
Status validatePayload(const IndexMap& map,
                       uint32_t part,
                       const uint8_t* bitmap,
                       size_t bitmapBytes,
                       int64_t count,
                       Workspace* ws,
                       cudaStream_t stream,
                       int64_t** offsets,
                       ull** verdict) {
  const auto bytes = static_cast<int64_t>(bitmapBytes);
  const int64_t numWords = (bytes + 3) / 4;
  const int64_t tiles = tilesForBits(bytes * 8);
  ZEN_RETURN_IF_ERROR(countTiles(ByteSource{bitmap, bytes}, numWords, tiles, ws, stream, offsets));
  ZEN_RETURN_IF_ERROR(ws->device(kVerdictSlot, 3, verdict));
  verdictKernel<<<1, 1, 0, stream>>>(*offsets + tiles, bitmap, bytes,
                                     map.partSize(static_cast<int>(part)), count, *verdict);
  ZEN_CHECK_LAUNCH("verdictKernel");
  return Status::ok();
}

// Decode's last step: wait, read the verdict, turn it into the CPU decoder's messages.
Status readVerdict(uint32_t part,
                   uint64_t size,
                   int64_t count,
                   size_t rowBytes,
                   const ull* verdict,
                   Workspace* ws,
                   cudaStream_t stream) {
  ull* host = nullptr;
  ZEN_RETURN_IF_ERROR(ws->pinned(kReadbackPinned, 3, &host));
  ZEN_CHECK_CUDA(cudaMemcpyAsync(host, verdict, 3 * sizeof(ull), cudaMemcpyDeviceToHost, stream));
  ZEN_RETURN_IF_ERROR(waitStream(stream, ws->waitTimeoutSeconds(), "the GPU decode's verdict"));
  if (host[0] == kVerdictPadding) {
    return ZEN_ERROR(StatusCode::kInvalidArgument,
                     "bitmap of part {} has padding bits set past its {} positions (last byte "
                     "0x{:02x})",
                     part, size, static_cast<unsigned>(host[2]));
  }
  if (host[0] == kVerdictCount) {
    return ZEN_ERROR(StatusCode::kInvalidArgument,
                     "part {} sent {} value bytes, expected {} set bits x {} bytes per row = {}",
                     part, static_cast<size_t>(count) * rowBytes, host[1], rowBytes,
                     host[1] * rowBytes);
  }
  return Status::ok();
}

}  // namespace

Status GpuEncodedPart::toHost(EncodedPart* out) const {
  out->count = count;
  out->bitmap.resize(bitmapBytes);
  out->values.resize(valueBytes());
  if (bitmapBytes > 0) {
    ZEN_CHECK_CUDA(
        cudaMemcpy(out->bitmap.data(), bitmap.data(), bitmapBytes, cudaMemcpyDeviceToHost));
  }
  if (!out->values.empty()) {
    ZEN_CHECK_CUDA(
        cudaMemcpy(out->values.data(), values.data(), out->values.size(), cudaMemcpyDeviceToHost));
  }
  return Status::ok();
}

Status gpuEncode(const GpuAggregator& agg,
                 double scale,
                 GpuEncodedPart* out,
                 Workspace* workspace,
                 cudaStream_t stream) {
  ZEN_CHECK_ARG(out != nullptr && workspace != nullptr,
                "gpuEncode needs an output and a workspace");
  ZEN_CHECK_ARG(std::isfinite(scale) && scale != 0.0, "scale must be finite and non-zero, got {}",
                scale);
  ZEN_CHECK_ARG(agg.errorWords() != nullptr, "gpuEncode of an aggregator that was never reset");
  const uint64_t size = agg.size();
  const int64_t numWords = agg.occupancyWordCount();
  const int64_t tiles = tilesForBits(static_cast<int64_t>(size));
  out->dtype = agg.dtype();
  out->rowSize = agg.rowSize();
  out->bitmapBytes = static_cast<size_t>((size + 7) / 8);
  out->count = 0;

  ull* readback = nullptr;  // set bits, then the aggregator's two error words
  ZEN_RETURN_IF_ERROR(workspace->pinned(kReadbackPinned, 3, &readback));
  int64_t* offsets = nullptr;
  if (tiles > 0) {
    ZEN_RETURN_IF_ERROR(
        countTiles(WordSource{agg.occupancyWords()}, numWords, tiles, workspace, stream, &offsets));
    ZEN_CHECK_CUDA(cudaMemcpyAsync(readback, offsets + tiles, sizeof(int64_t),
                                   cudaMemcpyDeviceToHost, stream));
  } else {
    readback[0] = 0;
  }
  ZEN_CHECK_CUDA(cudaMemcpyAsync(readback + 1, agg.errorWords(), 2 * sizeof(ull),
                                 cudaMemcpyDeviceToHost, stream));
  ZEN_RETURN_IF_ERROR(
      waitStream(stream, workspace->waitTimeoutSeconds(), "the GPU encode's set-bit count"));
  ZEN_RETURN_IF_ERROR(agg.errorStatus(readback + 1));
  const auto count = static_cast<int64_t>(readback[0]);

  ZEN_RETURN_IF_ERROR(out->bitmap.reserve(out->bitmapBytes));
  ZEN_RETURN_IF_ERROR(out->values.reserve(
      static_cast<size_t>(count) * static_cast<size_t>(agg.rowSize()) * dataTypeSize(agg.dtype())));
  out->count = count;
  if (out->bitmapBytes > 0) {
    ZEN_CHECK_CUDA(cudaMemcpyAsync(out->bitmap.data(), agg.occupancyWords(), out->bitmapBytes,
                                   cudaMemcpyDeviceToDevice, stream));
  }
  if (count == 0) return Status::ok();

  const bool fused = agg.rowSize() == 1;
  uint32_t* rowList = nullptr;
  if (!fused) ZEN_RETURN_IF_ERROR(workspace->device(kRowListSlot, count, &rowList));
  const int sm = workspace->smCount();
  return dispatchDataType(agg.dtype(), [&](auto tag) -> Status {
    using T = decltype(tag);
    using Acc = AccumulatorT<T>;
    const Scaler<T> scaler{scale, 1.0 / scale, scale == 1.0};
    const auto* acc = static_cast<const Acc*>(agg.accumulators());
    T* dst = out->values.as<T>();
    encodeCompactKernel<T><<<tiles, kBlockThreads, 0, stream>>>(
        agg.occupancyWords(), numWords, offsets, acc, scaler, fused, dst, rowList);
    ZEN_CHECK_LAUNCH("encodeCompactKernel");
    if (!fused) {
      encodeRowsKernel<T>
          <<<gridBlocks(count * agg.rowSize(), kBlockThreads, sm), kBlockThreads, 0, stream>>>(
              rowList, count, agg.rowSize(), acc, scaler, dst);
      ZEN_CHECK_LAUNCH("encodeRowsKernel");
    }
    return Status::ok();
  });
}

Status gpuDecodeToDense(const IndexMap& map,
                        uint32_t part,
                        const uint8_t* bitmap,
                        size_t bitmapBytes,
                        const void* values,
                        size_t valueBytes,
                        DataType dtype,
                        int64_t rowSize,
                        const DenseView& out,
                        Workspace* workspace,
                        cudaStream_t stream) {
  ZEN_CHECK_ARG(out.device.kind == Device::Kind::kCuda,
                "gpuDecodeToDense writes GPU memory, not {}", out.device.toString());
  ZEN_CHECK_ARG(out.dtype == dtype, "output has dtype {}, the payload {}", dataTypeName(out.dtype),
                dataTypeName(dtype));
  ZEN_CHECK_ARG(static_cast<uint64_t>(out.numRows()) == map.numRows() && out.rowSize() == rowSize,
                "output is {} rows x {}, expected {} x {}", out.numRows(), out.rowSize(),
                map.numRows(), rowSize);
  int64_t count = 0;
  ZEN_RETURN_IF_ERROR(checkDecodeArgs(map, part, bitmap, bitmapBytes, values, valueBytes, dtype,
                                      rowSize, workspace, &count));
  if (bitmapBytes == 0) return Status::ok();
  ZEN_CHECK_ARG(count == 0 || out.data != nullptr, "output for {} decoded rows has no buffer",
                count);
  int64_t* offsets = nullptr;
  ull* verdict = nullptr;
  ZEN_RETURN_IF_ERROR(validatePayload(map, part, bitmap, bitmapBytes, count, workspace, stream,
                                      &offsets, &verdict));
  const size_t elementBytes = dataTypeSize(dtype);
  const size_t rowBytes = static_cast<size_t>(rowSize) * elementBytes;
  const auto bytes = static_cast<int64_t>(bitmapBytes);
  const ByteSource source{bitmap, bytes};
  const int64_t numWords = (bytes + 3) / 4;
  const int64_t tiles = tilesForBits(bytes * 8);
  if (count > 0) {
    const bool fused = rowSize == 1;
    int64_t* rowList = nullptr;
    if (!fused) ZEN_RETURN_IF_ERROR(workspace->device(kRowListSlot, count, &rowList));
    ZEN_RETURN_IF_ERROR(dispatchUnit(static_cast<int>(elementBytes), [&](auto tag) -> Status {
      using Unit = decltype(tag);
      decodeDenseKernel<Unit><<<tiles, kBlockThreads, 0, stream>>>(
          source, numWords, offsets, map, part, verdict, fused, static_cast<const Unit*>(values),
          static_cast<Unit*>(out.data), rowList);
      ZEN_CHECK_LAUNCH("decodeDenseKernel");
      return Status::ok();
    }));
    if (!fused) {
      ZEN_RETURN_IF_ERROR(copyRows(values, out.data, count, rowBytes, IdentityRow{},
                                   ListRow<int64_t>{rowList}, verdict, workspace->smCount(),
                                   stream));
    }
  }
  return readVerdict(part, map.partSize(static_cast<int>(part)), count, rowBytes, verdict,
                     workspace, stream);
}

Status gpuDecodeToSparse(const IndexMap& map,
                         uint32_t part,
                         const uint8_t* bitmap,
                         size_t bitmapBytes,
                         const void* values,
                         size_t valueBytes,
                         DataType dtype,
                         int64_t rowSize,
                         int64_t* outIndices,
                         void* outValues,
                         Workspace* workspace,
                         cudaStream_t stream) {
  int64_t count = 0;
  ZEN_RETURN_IF_ERROR(checkDecodeArgs(map, part, bitmap, bitmapBytes, values, valueBytes, dtype,
                                      rowSize, workspace, &count));
  if (bitmapBytes == 0) return Status::ok();
  ZEN_CHECK_ARG(count == 0 || (outIndices != nullptr && outValues != nullptr),
                "output for {} decoded rows has no buffer", count);
  int64_t* offsets = nullptr;
  ull* verdict = nullptr;
  ZEN_RETURN_IF_ERROR(validatePayload(map, part, bitmap, bitmapBytes, count, workspace, stream,
                                      &offsets, &verdict));
  const size_t rowBytes = static_cast<size_t>(rowSize) * dataTypeSize(dtype);
  if (count > 0) {
    const auto bytes = static_cast<int64_t>(bitmapBytes);
    decodeIndicesKernel<<<tilesForBits(bytes * 8), kBlockThreads, 0, stream>>>(
        ByteSource{bitmap, bytes}, (bytes + 3) / 4, offsets, map, part, verdict, outIndices);
    ZEN_CHECK_LAUNCH("decodeIndicesKernel");
    ZEN_RETURN_IF_ERROR(copyRows(values, outValues, count, rowBytes, IdentityRow{}, IdentityRow{},
                                 verdict, workspace->smCount(), stream));
  }
  return readVerdict(part, map.partSize(static_cast<int>(part)), count, rowBytes, verdict,
                     workspace, stream);
}

}  // namespace zen::cuda
