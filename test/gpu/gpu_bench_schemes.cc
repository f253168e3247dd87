#include "test/gpu/gpu_bench_schemes.h"

#include <chrono>
#include <cstdio>

#include "cuda/gpu_sparse_allreduce.h"
#include "cuda/nccl_comm.h"
#include "ops/inprocess_transport.h"

namespace zen::cuda {

Status benchGpuSchemes(const char* label,
                       const DenseView& input,
                       void* output,
                       int reps,
                       const std::function<uint64_t()>& mismatches) {
  ops::TransportOptions to;
  to.rank = 0;
  to.size = 1;
  ZEN_ASSIGN_OR_RETURN(auto transport, ops::createInProcessTransport(ops::makeInProcessHub(1), to));
  NcclCommOptions co;
  co.deviceIndex = input.device.index;
  co.timeoutSeconds = 120;
  NcclComm comm(*transport, co);
  cudaStream_t stream = nullptr;
  if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) {
    return ZEN_ERROR(StatusCode::kInternal, "cudaStreamCreate failed");
  }
  GpuSparseAllreduceWorkspace ws;
  GpuSparseAllreduceResult result;
  Status status;
  for (Scheme scheme :
       {Scheme::kZen, Scheme::kHc, Scheme::kAgSparse, Scheme::kBlocks, Scheme::kDense}) {
    GpuSparseAllreduceOptions o;
    o.comm = &comm;
    o.denseInput = input;
    o.scheme = scheme;
    o.denseOutput = true;
    o.denseOutputView = input;
    o.denseOutputView.data = output;
    o.stream = stream;
    o.workspace = &ws;
    status = gpuSparseAllreduce(o, &result);  // warm-up
    if (!status.isOk()) break;
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < reps && status.isOk(); ++i) status = gpuSparseAllreduce(o, &result);
    if (!status.isOk()) break;
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count() /
        reps;
    const uint64_t bad = mismatches();
    std::string phases;
    for (const auto& [name, seconds] : result.stats.phases) {
      phases += fmt::format(" {} {:.2f}", name, seconds * 1e3);
    }
    std::printf("%-8s scheme %-9s 1 rank, dense in/out: %9.3f ms  rows out %lld  %s  (ms:%s)\n",
                label, schemeName(scheme), ms, static_cast<long long>(result.stats.outputNnz),
                bad == 0 ? "exact" : "MISMATCH", phases.c_str());
    if (bad != 0) {
      status = ZEN_ERROR(StatusCode::kInternal, "scheme {}: {} elements differ", schemeName(scheme),
                         bad);
      break;
    }
  }
  cudaStreamDestroy(stream);
  return status;
}

}  // namespace zen::cuda
