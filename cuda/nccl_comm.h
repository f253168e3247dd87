#pragma once

// The NCCL backend of the data plane: one rank's communicator over device buffers, the GPU
// twin of ops::Transport (CONVENTIONS.md §4). NCCL types stay inside nccl_comm.cc (pimpl), so
// including this header needs only the CUDA runtime. Built into zen_cuda when NCCL is found
// (then ZEN_HAVE_NCCL is defined for zen_cuda's users).
//
// Contract (every method):
// - Buffers are device memory on options.deviceIndex; sizes, counts and offsets are host
//   numbers. Work is enqueued on the caller's `stream` (created on that device). Each method
//   makes that device current on the calling thread.
// - Collectives are called by every rank in the same order, by one thread at a time per comm.
// - Creation is lazy: the first call (or init()) creates the communicator. The ranks first
//   allgather their loaded libnccl versions and whether their own setup failed over `bootstrap`
//   (agreeOnNcclSetup, nccl_plan.h) and every rank refuses (kFailedPrecondition, naming the
//   rank) a failed setup, a version older than 2.14, of another major than the headers', or
//   versions that differ across ranks: the GPU machine may load another NCCL (the toolkit's,
//   PyTorch's wheel) than the one Zen was built against. Then rank 0 makes the ncclUniqueId and
//   sends it, or its failure, to the others with bootstrap.broadcast (shareNcclUniqueId; the
//   host control channel / TCP / MPI / in-process transport the runtime already has). The
//   bootstrap transport is used only then, and must outlive it.
// - The communicator is non-blocking (NCCL's fault-tolerance mode): nothing here waits without
//   a bound. Methods marked "waits" poll cudaStreamQuery and ncclCommGetAsyncError until the
//   stream is done or options.timeoutSeconds has passed; on a timeout (kTimeout) or an NCCL
//   error (kIoError / kInternal) the communicator is aborted (ncclCommAbort) and the Status
//   names this rank and the call. After that every call returns kAborted with the first error
//   (gloo's rule, like ops::Transport): rebuild the NcclComm to continue.
// - Methods marked "async" return once the work is enqueued; the outputs are ready in stream
//   order. Call wait(stream) before any cudaStreamSynchronize of that stream: a plain
//   synchronize behind a hung NCCL kernel would never return.
// - Zero sizes are fine everywhere: every pair posts its (possibly empty) send and receive, so
//   both sides always agree.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/dtype.h"
#include "core/message.h"
#include "core/status.h"
#include "ops/transport.h"

namespace spdlog {
class logger;
}

namespace zen::cuda {

struct NcclCommOptions {
  int deviceIndex = 0;           // CUDA device of this rank
  double timeoutSeconds = 30.0;  // bound on creation and on every wait (Config::timeoutSeconds)
  // Optional: creation logs the NCCL versions there (built with, loaded).
  std::shared_ptr<spdlog::logger> logger;

  // deviceIndex = localRank (0 when absent), timeoutSeconds from the config.
  static NcclCommOptions fromConfig(const Config& config);
};

// A read-only / writable device byte range: one peer's segment of a v-collective.
struct DeviceBytes {
  const void* data = nullptr;
  size_t size = 0;
};
struct DeviceMutableBytes {
  void* data = nullptr;
  size_t size = 0;
};

class NcclComm {
 public:
  // Touches neither CUDA nor NCCL; rank and size are bootstrap's.
  NcclComm(ops::Transport& bootstrap, NcclCommOptions options);
  // Destroys the communicator (aborts it if it failed or has work pending).
  ~NcclComm();
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  int rank() const;
  int size() const;
  int deviceIndex() const;
  double timeoutSeconds() const;
  // True once the communicator exists and has not failed.
  bool ready() const;

  // Creates the communicator now (collective over the bootstrap transport; waits, bounded).
  // Idempotent; every other call runs it first.
  Status init();

  // Waits (bounded) until `stream` has finished its work, checking NCCL's asynchronous errors.
  // `what` names the operation in a timeout message.
  Status wait(cudaStream_t stream, const char* what = "wait");

  // From any thread (e.g. a finalizer whose event wait timed out on work this comm enqueued
  // asynchronously): asks the driving thread to abort the communicator. The driving thread's
  // current wait, or its next call, aborts it (ncclCommAbort, which also ends NCCL kernels
  // stuck on the GPU) and returns kAborted with `why`. Only the driving thread touches NCCL.
  void requestAbort(const Status& why);

  // From any thread, like requestAbort, but the driving thread only fails the communicator
  // (kAborted with `why` from its current wait and every later call), without ncclCommAbort:
  // work of it queues on a stream behind a framework's kernel that never ends (an input never
  // ready), and ncclCommAbort's frees would wait for that kernel (NVIDIA/nccl#829). The
  // destructor aborts it. The first reason wins, but this one turns a pending requestAbort
  // (not yet acted on) into a fail (nccl_plan.h's EndRequest says why).
  void requestFail(const Status& why);

  // On the driving thread: aborts the communicator now (ncclCommAbort ends its kernels stuck on
  // the GPU), e.g. after a kernel wrapper's own bounded stream wait (stream_wait.h) timed out
  // behind them (gpuSparseAllreduce). Later calls return kAborted with `why`. A no-op once it has
  // failed; a pending request (requestAbort, requestFail) is honoured instead.
  void abort(const Status& why);

  // Counts first: sendCounts[p] (host, size() entries) goes to rank p; (*recvCounts)[p]
  // becomes what rank p sent here. One grouped NCCL exchange of 8 bytes per pair; waits.
  Status exchangeCounts(const std::vector<uint64_t>& sendCounts,
                        std::vector<uint64_t>* recvCounts,
                        cudaStream_t stream);

  // Data: sends[p] goes to rank p, recvs[p] receives rank p's segment; recvs[p].size must be
  // exactly what rank p sends (agree on it with exchangeCounts first). The own segment is a
  // device copy. Grouped ncclSend/ncclRecv, every pair posted; async.
  Status alltoallv(const std::vector<DeviceBytes>& sends,
                   const std::vector<DeviceMutableBytes>& recvs,
                   cudaStream_t stream);

  // ncclAllGather: every rank's `bytesPerRank` bytes at `send` land in rank order in `recv`
  // (size() x bytesPerRank, device); async.
  Status allgather(const void* send, void* recv, size_t bytesPerRank, cudaStream_t stream);

  // Every rank's 8-byte value gathered in rank order (ncclAllGather); waits.
  Status allgatherCounts(uint64_t mine, std::vector<uint64_t>* all, cudaStream_t stream);

  // True allgather-v (no padding, ALGORITHMS.md §8): recvs[p] receives rank p's `sendBytes`
  // (recvs[p].size must equal it, e.g. from allgatherCounts); recvs[rank()] gets a device copy
  // of `send` (may alias it: then no copy). Grouped ncclSend/ncclRecv; async.
  Status allgatherv(const void* send,
                    size_t sendBytes,
                    const std::vector<DeviceMutableBytes>& recvs,
                    cudaStream_t stream);

  // In place over `count` elements (ncclAllReduce). kSum, kMin, kMax, kProduct (ncclSum, ncclMin,
  // ncclMax, ncclProd), or kAverage (ncclAvg; integers are summed, then divided with truncation
  // toward zero like the CPU). fp16 / bf16 are reduced natively by NCCL (not in fp32 like the
  // CPU transports): expect rounding differences for sum and product. Async.
  Status allreduce(void* data, size_t count, DataType dtype, ReduceOp op, cudaStream_t stream);

  // ncclReduceScatter: `send` holds size() blocks of `countPerRank` elements; block p of every
  // rank, reduced with op, lands in rank p's `recv` (countPerRank elements; in place when recv
  // is send's block rank()). Equal blocks only: callers pad Horovod's uneven pieces
  // (cuda/reducescatter_plan.h says why). Ops, dtypes and the integer Average as allreduce's.
  // Async.
  Status reducescatter(const void* send,
                       void* recv,
                       size_t countPerRank,
                       DataType dtype,
                       ReduceOp op,
                       cudaStream_t stream);

  // The root's `bytes` overwrite everyone's `data` (ncclBroadcast in place); async.
  Status broadcast(void* data, size_t bytes, int root, cudaStream_t stream);

  // Payload bytes per peer since the last reset (ops::TransportCounters' rules: allreduce
  // counts a ring's 2 (n - 1) / n, reducescatter a ring's (n - 1) / n of the (padded) buffer,
  // broadcast a flat fan-out from the root, the count exchanges are not counted).
  ops::TransportCounters counters() const;
  void resetCounters();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// NCCL_VERSION_CODE of the nccl.h Zen was built with (Horovod's nccl_built(), e.g. 22809 for
// 2.28.9).
int ncclBuildVersion();

}  // namespace zen::cuda
