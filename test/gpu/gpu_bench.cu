// Timing of the GPU kernels (device only; run by tools/gpu-check): a 214M-element fp32
// tensor (DeepFM's embedding, the paper's Algorithm 1 example) at 1% and 10% density, one
// simulated rank: nonzero extraction, Algorithm 1's claim pass alone, the whole Push-side
// partition, scatter-add of n lists per part, bitmap encode, decode to dense and to sparse.
// Each line: mean wall time over --reps runs after one warm-up (the calls include their
// host synchronizations) and the achieved bandwidth, counting logical bytes read plus bytes
// written (formulas below), against cudaMemcpy device-to-device measured in the same run
// the same way. It also checks that the round trip of n identical ranks returns exactly n
// times the input tensor. With NCCL built in, one row per GPU scheme (zen, hc, agsparse, dense)
// end to end on one rank (gpu_bench_schemes.cc), checked against the input.
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/hash.h"
#include "cuda/cuda_check.h"
#include "cuda/gpu_aggregator.h"
#include "cuda/gpu_hash_bitmap.h"
#include "cuda/gpu_hash_partitioner.h"
#include "cuda/gpu_nonzero.h"
#include "cuda/gpu_plan.h"
#ifdef ZEN_HAVE_NCCL
#include "test/gpu/gpu_bench_schemes.h"
#endif

namespace zen::cuda {
namespace {

struct Options {
  int64_t rows = 214'000'000;
  int64_t rowSize = 1;
  int parts = 8;
  int reps = 5;
  std::vector<double> densities = {0.01, 0.10};
};

// Row r is non-zero with probability d (a hash of r, so the layout is random but
// reproducible); its elements are small integers, exact under any summation order.
__global__ void fillKernel(
    float* dense, int64_t rows, int64_t rowSize, uint64_t threshold, uint64_t seed) {
  const int64_t total = rows * rowSize;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < total;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint64_t h = fmix64(static_cast<uint64_t>(t / rowSize) ^ seed);
    dense[t] = h < threshold ? static_cast<float>((h >> 61) + 1) : 0.0f;
  }
}

// Counts elements where b != factor * a.
__global__ void countMismatchKernel(
    const float* a, const float* b, int64_t n, float factor, unsigned long long* bad) {
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < n;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    if (a[t] * factor != b[t]) atomicAdd(bad, 1ULL);
  }
}

double nowMs() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Mean milliseconds of fn() over reps runs after one warm-up; fn returns a Status.
template <typename Fn>
Status timeIt(int reps, Fn&& fn, double* ms) {
  ZEN_RETURN_IF_ERROR(fn());
  ZEN_CHECK_CUDA(cudaDeviceSynchronize());
  const double start = nowMs();
  for (int i = 0; i < reps; ++i) ZEN_RETURN_IF_ERROR(fn());
  ZEN_CHECK_CUDA(cudaDeviceSynchronize());
  *ms = (nowMs() - start) / reps;
  return Status::ok();
}

void printRow(const char* density,
              const char* phase,
              int64_t items,
              double bytes,
              double ms,
              double memcpyGBs) {
  const double gbs = bytes / (ms * 1e6);
  std::printf("%-8s %-34s %12lld %11.1f %9.3f %9.1f %8.1f%%\n", density, phase,
              static_cast<long long>(items), bytes / 1e6, ms, gbs, 100.0 * gbs / memcpyGBs);
}

Status run(const Options& o) {
  cudaDeviceProp prop{};
  ZEN_CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  const size_t rowBytes = static_cast<size_t>(o.rowSize) * sizeof(float);
  const size_t denseBytes = static_cast<size_t>(o.rows) * rowBytes;
  const HashPartitionOptions hp;
  std::printf(
      "zen GPU kernels on %s (%d SMs, %.0f GiB): tensor %lld x %lld float32 (%.0f MB), "
      "n = %d, k = %d, memory factor %.2f, %d reps\n",
      prop.name, prop.multiProcessorCount, prop.totalGlobalMem / 1073741824.0,
      static_cast<long long>(o.rows), static_cast<long long>(o.rowSize), denseBytes / 1e6, o.parts,
      hp.hashFunctions, hp.memoryFactor, o.reps);

  DeviceBuffer dense, copy, decoded;
  ZEN_RETURN_IF_ERROR(dense.reserve(denseBytes));
  ZEN_RETURN_IF_ERROR(copy.reserve(denseBytes));
  ZEN_RETURN_IF_ERROR(decoded.reserve(denseBytes));
  double memcpyMs = 0;
  ZEN_RETURN_IF_ERROR(timeIt(
      o.reps,
      [&]() -> Status {
        ZEN_CHECK_CUDA(
            cudaMemcpyAsync(copy.data(), dense.data(), denseBytes, cudaMemcpyDeviceToDevice));
        return Status::ok();
      },
      &memcpyMs));
  const double memcpyGBs = 2.0 * denseBytes / (memcpyMs * 1e6);
  std::printf("cudaMemcpy device-to-device of the tensor: %.3f ms, %.1f GB/s (read + write)\n\n",
              memcpyMs, memcpyGBs);
  std::printf("%-8s %-34s %12s %11s %9s %9s %9s\n", "density", "phase", "items", "MB r+w",
              "time ms", "GB/s", "%memcpy");

  const IndexMap map(static_cast<uint64_t>(o.rows), o.parts, 0x2e2);
  GpuNonzeroExtractor extractor;
  GpuHashPartitioner partitioner(map, hp);
  GpuAggregator agg;
  Workspace ws;
  unsigned long long* bad = nullptr;
  ZEN_CHECK_CUDA(cudaMalloc(&bad, sizeof(*bad)));
  bool allOk = true;

  for (double d : o.densities) {
    char label[16];
    std::snprintf(label, sizeof(label), "%g%%", d * 100);
    const auto threshold = static_cast<uint64_t>(d * 18446744073709551616.0);
    fillKernel<<<4096, 256>>>(dense.as<float>(), o.rows, o.rowSize, threshold, 0x5eed);
    ZEN_CHECK_LAUNCH("fillKernel");
    const DenseView view{dense.data(), DataType::kFloat32, TensorShape({o.rows, o.rowSize}),
                         Device::cuda(0)};

    // Nonzero extraction: reads the tensor, writes indices and rows.
    GpuSparse sparse;
    double ms = 0;
    ZEN_RETURN_IF_ERROR(timeIt(
        o.reps, [&] { return extractor.extract(view, &sparse, nullptr); }, &ms));
    const int64_t nnz = sparse.nnz;
    printRow(label, "nonzero extraction", o.rows, denseBytes + nnz * (8.0 + rowBytes), ms,
             memcpyGBs);

    // Algorithm 1: the claim pass alone (index read + one 8-byte slot word per entry), and
    // the whole partition (entries in, distinct (position, row) pairs out).
    GpuPushLists lists;
    GpuPartitionTimes times;
    double claimMs = 0;
    ZEN_RETURN_IF_ERROR(timeIt(
        o.reps,
        [&]() -> Status {
          ZEN_RETURN_IF_ERROR(
              partitioner.partition(sparse.view(), &lists, nullptr, nullptr, &times));
          claimMs += times.claimMs;
          return Status::ok();
        },
        &ms));
    claimMs /= o.reps + 1;
    printRow(label, "Algorithm 1: claim pass", nnz, nnz * 16.0, claimMs, memcpyGBs);
    printRow(label, "Push partition (whole)", nnz,
             nnz * (8.0 + rowBytes) + lists.total() * (4.0 + rowBytes), ms, memcpyGBs);

    // Server side, every part: reset + n adds of its list (as if n ranks pushed the same
    // indices), then encode (Sum); each rank then decodes all n parts.
    std::vector<GpuEncodedPart> encoded(o.parts);
    double aggMs = 0, encMs = 0, aggBytes = 0, encBytes = 0;
    int64_t pulled = 0;
    for (int j = 0; j < o.parts; ++j) {
      const int64_t count = lists.count(j);
      const double partBits = static_cast<double>(map.partSize(j));
      double t = 0;
      ZEN_RETURN_IF_ERROR(timeIt(
          o.reps,
          [&]() -> Status {
            ZEN_RETURN_IF_ERROR(agg.reset(map, j, DataType::kFloat32, o.rowSize, nullptr));
            for (int r = 0; r < o.parts; ++r) {
              ZEN_RETURN_IF_ERROR(
                  agg.add(lists.devicePositions() + lists.offsets[j],
                          lists.values.as<const std::byte>() + lists.offsets[j] * rowBytes, count,
                          nullptr));
            }
            return Status::ok();
          },
          &t));
      aggMs += t;
      aggBytes +=
          partBits * (rowBytes + 0.125) + o.parts * count * (4.0 + rowBytes + 2.0 * rowBytes);
      ZEN_RETURN_IF_ERROR(timeIt(
          o.reps, [&] { return gpuEncode(agg, 1.0, &encoded[j], &ws, nullptr); }, &t));
      encMs += t;
      encBytes += partBits / 4 + count * rowBytes + partBits / 8 + count * rowBytes;
      pulled += encoded[j].count;
    }
    printRow(label, "scatter-add (n lists x n parts)", o.parts * nnz, aggBytes, aggMs, memcpyGBs);
    printRow(label, "bitmap encode (n parts)", pulled, encBytes, encMs, memcpyGBs);

    ZEN_CHECK_CUDA(cudaMemset(decoded.data(), 0, denseBytes));
    const DenseView out{decoded.data(), DataType::kFloat32, TensorShape({o.rows, o.rowSize}),
                        Device::cuda(0)};
    ZEN_RETURN_IF_ERROR(timeIt(
        o.reps,
        [&]() -> Status {
          for (int j = 0; j < o.parts; ++j) {
            const GpuEncodedPart& e = encoded[j];
            ZEN_RETURN_IF_ERROR(gpuDecodeToDense(map, j, e.bitmap.as<uint8_t>(), e.bitmapBytes,
                                                 e.values.data(), e.valueBytes(),
                                                 DataType::kFloat32, o.rowSize, out, &ws, nullptr));
          }
          return Status::ok();
        },
        &ms));
    const double bitmapTotal = o.rows / 8.0;
    printRow(label, "bitmap decode -> dense (n parts)", pulled,
             2 * bitmapTotal + 2.0 * pulled * rowBytes, ms, memcpyGBs);
    GpuSparse result;
    result.dtype = DataType::kFloat32;
    result.rowSize = o.rowSize;
    ZEN_RETURN_IF_ERROR(result.reserve(pulled));
    ZEN_RETURN_IF_ERROR(timeIt(
        o.reps,
        [&]() -> Status {
          int64_t at = 0;
          for (int j = 0; j < o.parts; ++j) {
            const GpuEncodedPart& e = encoded[j];
            ZEN_RETURN_IF_ERROR(gpuDecodeToSparse(
                map, j, e.bitmap.as<uint8_t>(), e.bitmapBytes, e.values.data(), e.valueBytes(),
                DataType::kFloat32, o.rowSize, result.indices.as<int64_t>() + at,
                result.values.as<std::byte>() + at * rowBytes, &ws, nullptr));
            at += e.count;
          }
          return Status::ok();
        },
        &ms));
    printRow(label, "bitmap decode -> sparse (n parts)", pulled,
             2 * bitmapTotal + pulled * (8.0 + 2.0 * rowBytes), ms, memcpyGBs);

    // The Sum of n identical ranks is n x the input, exactly (small integers).
    ZEN_CHECK_CUDA(cudaMemset(bad, 0, sizeof(*bad)));
    countMismatchKernel<<<4096, 256>>>(dense.as<float>(), decoded.as<float>(), o.rows * o.rowSize,
                                       static_cast<float>(o.parts), bad);
    ZEN_CHECK_LAUNCH("countMismatchKernel");
    unsigned long long mismatches = 0;
    ZEN_CHECK_CUDA(cudaMemcpy(&mismatches, bad, sizeof(mismatches), cudaMemcpyDeviceToHost));
    std::printf(
        "%-8s round trip (extract, partition, add, encode, decode): %s (%llu of %lld "
        "elements differ); nnz %lld, spill/overflow passes %d, scratch %.0f MB\n",
        label, mismatches == 0 ? "exact" : "MISMATCH", mismatches,
        static_cast<long long>(o.rows * o.rowSize), static_cast<long long>(nnz),
        partitioner.lastAttempts(), partitioner.scratchBytes() / 1e6);
    allOk = allOk && mismatches == 0;

#ifdef ZEN_HAVE_NCCL
    // The GPU schemes end to end on one rank (NCCL to itself): one rank's Sum is the input.
    const Status schemes = benchGpuSchemes(label, view, decoded.data(), 2, [&]() -> uint64_t {
      // A failed memset or launch would leave a stale or zero count: report it as a mismatch.
      if (cudaMemset(bad, 0, sizeof(*bad)) != cudaSuccess) return ~0ull;
      countMismatchKernel<<<4096, 256>>>(dense.as<float>(), decoded.as<float>(), o.rows * o.rowSize,
                                         1.0f, bad);
      if (cudaGetLastError() != cudaSuccess) return ~0ull;
      unsigned long long count = 0;
      if (cudaMemcpy(&count, bad, sizeof(count), cudaMemcpyDeviceToHost) != cudaSuccess) {
        return ~0ull;
      }
      return count;
    });
    if (!schemes.isOk()) {
      std::printf("%-8s GPU schemes: %s\n", label, schemes.toString().c_str());
      allOk = false;
    }
#endif
  }
  cudaFree(bad);
  std::printf(
      "\nbytes: extraction rows*B + nnz*(8+B); claim 16/entry; partition nnz*(8+B) + "
      "out*(4+B); scatter-add reset + per entry 4+B+2*acc; encode 2 bitmaps + 2*rows; "
      "decode 2 bitmaps + 2*rows (+8/row sparse)\n");
  if (!allOk) return ZEN_ERROR(StatusCode::kInternal, "round trip mismatch");
  return Status::ok();
}

bool parse(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    const char* v = nullptr;
    if (a == "--rows" && (v = next())) {
      o->rows = std::atoll(v);
    } else if (a == "--row-size" && (v = next())) {
      o->rowSize = std::atoll(v);
    } else if (a == "--parts" && (v = next())) {
      o->parts = std::atoi(v);
    } else if (a == "--reps" && (v = next())) {
      o->reps = std::atoi(v);
    } else if (a == "--densities" && (v = next())) {
      o->densities.clear();
      for (const char* p = v; *p != '\0';) {
        char* end = nullptr;
        o->densities.push_back(std::strtod(p, &end));
        if (end == p) return false;
        p = *end == ',' ? end + 1 : end;
      }
    } else {
      std::fprintf(stderr,
                   "usage: zen_gpu_bench [--rows N] [--row-size R] [--parts n] [--reps k] "
                   "[--densities 0.01,0.1]\n");
      return false;
    }
  }
  return o->rows > 0 && o->rowSize > 0 && o->parts > 0 && o->reps > 0 && !o->densities.empty();
}

}  // namespace
}  // namespace zen::cuda

int main(int argc, char** argv) {
  zen::cuda::Options options;
  if (!zen::cuda::parse(argc, argv, &options)) return 2;
  const zen::Status s = zen::cuda::run(options);
  if (!s.isOk()) {
    std::fprintf(stderr, "zen_gpu_bench: %s\n", s.toString().c_str());
    return 1;
  }
  return 0;
}
