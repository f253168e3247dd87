#pragma once

// GPU buckets that run on the host (Horovod stages Adasum's cross-node part through host memory
// too): the collectives the GPU path has no NCCL form of, Adasum and the collectives of process
// sets other than the global one (the NCCL communicator is the job's), run in the CPU executor
// over host copies of this rank's device tensors, and their results go back to the device in
// the form the GPU path gives them. Per bucket, on the loop thread:
//   1. wait (bounded) for the inputs' ready events, copy every input to host memory;
//   2. run the bucket in the host executor over entries that view those copies (same
//      requests and handles, host device), so it follows the plan with the other ranks, wherever
//      their tensors are;
//   3. copy the dense outputs back into the device outputs, and move the handle's host results
//      to device memory the handle owns: an allgather's or alltoall's rows
//      (OpResult::gatheredOnDevice) and a sparse result's rows (sparseIndicesOnDevice,
//      sparseValuesOnDevice), as cuda_executor.h delivers them.
// Synchronous: the bucket has ended when runStaged returns. Plain C++ over DeviceStaging, so
// test/cuda_host runs it with host memory posing as a device.
#include <cstddef>
#include <memory>
#include <vector>

#include "core/executor.h"

namespace zen::cuda {

// One copy between this rank's device and host memory.
struct StagedCopy {
  const void* src = nullptr;
  void* dst = nullptr;
  size_t bytes = 0;
};

// What staging needs from the device (the CUDA executor; tests fake it). Every wait is bounded.
class DeviceStaging {
 public:
  virtual ~DeviceStaging() = default;
  // Before a bucket's copies: makes cuda:`device` this rank's device and current, and waits
  // (bounded, on the host) until the entries' inputs are ready (their ready events).
  virtual Status prepare(int device, const std::vector<TensorEntry*>& entries) = 0;
  // Host memory for a bucket's host twins: at least `bytes`, never null (0 bytes included),
  // valid until the next call. The CUDA executor's is page-locked and reused, so copies to
  // and from it need no bounce buffer.
  virtual Result<std::byte*> hostMemory(size_t bytes) = 0;
  // Device to host / host to device; every copy has completed when they return.
  virtual Status toHost(const std::vector<StagedCopy>& copies) = 0;
  virtual Status toDevice(const std::vector<StagedCopy>& copies) = 0;
  // *out = `bytes` of device memory on the prepared device, freed with its last owner (a
  // handle's result); null for 0 bytes.
  virtual Status allocate(size_t bytes, std::shared_ptr<void>* out) = 0;
};

// A staged copy's piece through a bounce buffer of fixed capacity (page-locked host memory: a
// copy between the device and pageable memory may block the host until the stream drains,
// beyond any bound): `bytes` of copy `copy` from offset `offset`, at `at` in the buffer.
struct BouncePiece {
  size_t copy = 0;
  size_t offset = 0;
  size_t at = 0;
  size_t bytes = 0;
};
// The copies cut into rounds that each fill at most `capacity` bytes of the buffer, in order;
// one waits for a round before the next reuses the buffer. No round for empty copies.
std::vector<std::vector<BouncePiece>> planBounce(const std::vector<StagedCopy>& copies,
                                                 size_t capacity);

// Whether a bucket whose tensors are on GPUs runs on the host: the same on every rank (it reads
// only the plan).
bool runsStaged(const Response& response);

// Runs `response` in `host` over host copies of `entries` (device tensors, null for a joined
// rank) and delivers the results on the device (steps above). `report` gets the host
// executor's report with COPY_TO_HOST first and COPY_TO_DEVICE last, its scheme prefixed
// "host-staged ". A failed staging step (a wait, an allocation, a copy) is kAborted and gives
// the host executor's data plane up (Executor::abandon): this rank cannot take part in the
// collective, or in later ones once its device failed, and its peers, told at once by the
// transport, fail instead of waiting out their timeout.
Status runStaged(const Response& response,
                 const std::vector<TensorEntry*>& entries,
                 Executor& host,
                 DeviceStaging& staging,
                 BucketReport* report);

}  // namespace zen::cuda
