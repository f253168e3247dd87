#pragma once

// core's Executor on the CPU: runs one response of the plan over the data-plane Transport
// (a transport of its own, separate from the control channel's).
// - allreduce: the bucket's tensors are copied into one fusion buffer (kept across steps,
//   grown to the largest bucket seen), reduced by Transport::allreduce with the bucket's op
//   (sum, min, max, product; 16-bit floats in fp32), divided by n for Average, copied out. A
//   single tensor runs in place in its output. Adasum buckets go to ops::adasum instead (an
//   fp64 bucket of its own that keeps every tensor's bounds: dot products are per tensor).
// - sparse allreduce: the bucket is one virtual tensor (index spaces concatenated at
//   Response::rowOffsets, totalRows rows) through ops::sparseAllreduce with ZEN_SCHEME (auto:
//   zen, hc or agsparse as ops/auto_scheme.h profiled for this bucket); the coalesced result is
//   split back per tensor (sparse, or scattered into a dense output).
// - allgather: every tensor's rows packed into one buffer, one allgatherv, unpacked.
// - broadcast: Transport::broadcast in place (never fused).
// - alltoall: ops::alltoall straight from the input with the plan's splits (never fused); the
//   rows received and the received splits go into the handle's OpResult.
// - reducescatter: ops::reducescatter over the bucket (rank p's block holds every tensor's
//   piece p; the fusion buffer is the scratch), divided by n for Average.
// A rank that has joined contributes the op's identity (zeros for sum, average and adasum:
// Horovod's rule) / no rows for the tensors it did not post.
// Process sets: each set this rank is in gets an executor of its own over
// Transport::subset (its buffers and auto-scheme profiles are the set's), sharing the threads.

#include <map>
#include <memory>
#include <vector>

#include "core/config.h"
#include "core/executor.h"
#include "core/thread_pool.h"
#include "ops/auto_scheme.h"
#include "ops/cpu_sparse_bucket.h"
#include "ops/sparse_allreduce.h"
#include "ops/transport.h"

namespace zen::ops {

struct CpuExecutorOptions {
  Scheme scheme = Scheme::kAuto;                    // ZEN_SCHEME
  int autoProfileCalls = kDefaultAutoProfileCalls;  // ZEN_AUTO_PROFILE_CALLS (ops/auto_scheme.h)
  std::vector<Scheme> autoSchemes = defaultAutoSchemes();  // ZEN_AUTO_SCHEMES
  uint64_t seed = 0x5eed2e2ULL;                            // ZEN_SEED
  int hashFunctions = 3;                                   // ZEN_HASH_FUNCTIONS
  double memoryFactor = 1.5;                               // ZEN_HASH_MEMORY_FACTOR
  int threads = 0;  // ZEN_THREADS (0: all cores here; the runtime passes its share, cpu_share.h)

  static CpuExecutorOptions fromConfig(const Config& config);
};

class CpuExecutor final : public Executor {
 public:
  CpuExecutor(std::unique_ptr<Transport> transport, CpuExecutorOptions options);

  Status execute(const Response& response,
                 const std::vector<TensorEntry*>& entries,
                 BucketReport* report) override;

  Status addProcessSet(int32_t id, const std::vector<int32_t>& members) override;
  void removeProcessSet(int32_t id) override;
  void abandon(const Status& why) override { transport_->failAll(why); }

  Transport& transport() { return *transport_; }

 private:
  CpuExecutor(std::unique_ptr<Transport> transport,
              CpuExecutorOptions options,
              std::shared_ptr<ThreadPool> pool);

  // execute() over this executor's transport (the job's, or the set's it was made for).
  Status run(const Response& response,
             const std::vector<TensorEntry*>& entries,
             BucketReport* report);

  Status allreduce(const Response& r, const std::vector<TensorEntry*>& e, BucketReport* report);
  Status adasum(const Response& r, const std::vector<TensorEntry*>& e, BucketReport* report);
  Status sparse(const Response& r, const std::vector<TensorEntry*>& e, BucketReport* report);
  Status allgather(const Response& r, const std::vector<TensorEntry*>& e, BucketReport* report);
  Status broadcast(const Response& r, const std::vector<TensorEntry*>& e, BucketReport* report);
  Status alltoall(const Response& r, const std::vector<TensorEntry*>& e, BucketReport* report);
  Status reducescatter(const Response& r, const std::vector<TensorEntry*>& e, BucketReport* report);

  std::unique_ptr<Transport> transport_;
  CpuExecutorOptions options_;
  std::shared_ptr<ThreadPool> pool_;  // shared with the process sets' executors
  SparseAllreduceWorkspace workspace_;
  AutoScheme autoScheme_;
  std::vector<std::byte> fusion_;      // dense buckets and gathers; reused across steps
  std::vector<double> adasumScratch_;  // Adasum's fp64 bucket; reused
  SparseBucket sparseBucket_;          // the fused sparse input; reused
  SparseAllreduceResult sparseResult_;
  std::map<int32_t, std::unique_ptr<CpuExecutor>> sets_;  // by process set id
};

}  // namespace zen::ops
