#pragma once

// core's Executor for buckets on a GPU (ARCHITECTURE.md "Processes, threads, devices";
// Horovod's GPU ops). The bindings pair it with the CPU executor (cuda/dispatch_executor.h).
// - One CUDA stream of the daemon's own (never the framework's), created with the NCCL
//   communicator (cuda/nccl_comm.h) at the first GPU bucket, on that bucket's device; a rank
//   runs all its GPU tensors on that one device.
// - accept() (framework thread): checks the device and records an event on the framework's
//   stream when the tensor brought a stream instead of an event (TensorEntry::ready).
// - Each bucket: the stream waits on every entry's ready event (cudaStreamWaitEvent, no host
//   wait); dense allreduce fuses the tensors into a device fusion buffer (batched copies,
//   cuda/batched_copy.h), runs NcclComm::allreduce and copies out; broadcast runs in place;
//   sparse allreduce runs the GPU schemes (cuda/gpu_sparse_allreduce.h: it synchronizes the
//   stream itself, so the bucket's status is known when it returns; a fused bucket's dense
//   result is copied out on the stream; a sparse result is sorted and split per tensor on the
//   device and stays there, in memory the handles own, OpResult::sparseIndicesOnDevice, and a
//   bucket mixing dense outputs and sparse results scatters the dense ones' rows into their
//   outputs there: cuda/sparse_result.h);
//   allgather packs every tensor's rows into this rank's segment of one device buffer, runs
//   NcclComm::allgatherv (first dimensions may differ per rank) and copies each tensor's
//   result into device memory the executor allocates (cudaMalloc) and the handle owns
//   (OpResult::gatheredOnDevice, freed with the handle).
//   alltoall (never fused) sends its rows straight from the input with NcclComm::alltoallv
//   into such memory (cuda/alltoall_plan.h), the received splits beside it; reducescatter
//   stages the bucket in equal, padded rank blocks for one NcclComm::reducescatter and copies
//   this rank's block out (cuda/reducescatter_plan.h); a joined rank contributes the op's
//   identity, as on the CPU.
// - The loop does not wait for the device: an event recorded after the bucket's work goes to
//   the finalizer thread (cuda/finalizer.h), which completes the bucket (Executor::submit's
//   done) once the event has completed, or with the device's error, or kTimeout. The events
//   come from a pool (cuda/event_pool.h): a fired one is reused, a timed-out or failed one
//   destroyed.
// - Every host wait is bounded by timeoutSeconds (NcclComm::wait, the kernels' stream waits,
//   cuda/stream_wait.h, the finalizer's). Before its first wait for the stream (a sparse
//   bucket, a buffer's growth) a bucket waits on the host for its inputs' ready events: a framework
//   stream that never finishes them is a kTimeout that leaves the communicator alone (ncclCommAbort
//   would wait for the framework's kernel). A bucket whose NCCL or kernel wait timed out fails its
//   handles with that kTimeout, and the communicator has been aborted by then (by NcclComm's waits,
//   and by gpuSparseAllreduce for its kernels' waits): its stuck kernels end and later GPU buckets
//   fail with kAborted (the data plane needs a new communicator).
// - Adasum and the collectives of process sets other than the global one have no NCCL form
//   here (the communicator is the job's): the DispatchExecutor runs them in the CPU executor
//   over host copies (cuda/host_staging.h), moved by staging() (cuda/cuda_staging.h) on this
//   executor's device.
// - Without NCCL (ZEN_HAVE_NCCL undefined) every device tensor is refused.
// CUDA and NCCL types stay in cuda_executor.cc.
#include <memory>

#include "core/config.h"
#include "core/executor.h"
#include "cuda/host_staging.h"
#include "ops/transport.h"

namespace spdlog {
class logger;
}

namespace zen::cuda {

struct CudaExecutorOptions {
  Scheme scheme = Scheme::kAuto;  // ZEN_SCHEME (auto: zen on the GPU)
  uint64_t seed = 0x5eed2e2ULL;   // ZEN_SEED
  int hashFunctions = 3;          // ZEN_HASH_FUNCTIONS
  double memoryFactor = 1.5;      // ZEN_HASH_MEMORY_FACTOR
  double timeoutSeconds = 30.0;   // ZEN_TIMEOUT: bound on every wait (NCCL, kernels, finalizer)
  std::shared_ptr<spdlog::logger> logger;  // optional: the communicator's creation notes

  static CudaExecutorOptions fromConfig(const Config& config);
};

class CudaExecutor final : public Executor {
 public:
  // bootstrap carries NCCL's unique id at the first GPU bucket (the runtime's data transport,
  // used on the loop thread only; it must outlive this executor).
  CudaExecutor(ops::Transport& bootstrap, CudaExecutorOptions options);
  // Drains the finalizer, then frees the stream, buffers and communicator.
  ~CudaExecutor() override;

  Status accept(TensorEntry& entry) override;
  // submit() and a wait for the bucket's end (tests, and callers that want it synchronous).
  Status execute(const Response& response,
                 const std::vector<TensorEntry*>& entries,
                 BucketReport* report) override;
  void submit(const Response& response,
              const std::vector<TensorEntry*>& entries,
              const BucketDone& done) override;
  void drain() override;

  // The staging of the buckets the DispatchExecutor runs on the host (cuda/cuda_staging.h),
  // on this executor's device; it lives as long as this executor.
  DeviceStaging& staging();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// CUDA devices this process sees (0 on error or without a driver).
int cudaDeviceCount();

}  // namespace zen::cuda
