// The CUDA executor (cuda/cuda_executor.h). Bytes on the wire per rank are the collective's:
// NCCL's ring allreduce 2(n-1)/n of the bucket, the broadcast root's n-1 copies, the
// allgatherv's n-1 copies of this rank's rows, the alltoall's rows to each peer, the ring
// reduce-scatter's (n-1)/n of the padded blocks, the sparse scheme's
// (cuda/gpu_sparse_allreduce.h), all read from NcclComm::counters().
#include "cuda/cuda_executor.h"

#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "cuda/alltoall_plan.h"
#include "cuda/batched_copy.h"
#include "cuda/cuda_check.h"
#include "cuda/cuda_staging.h"
#include "cuda/device_bucket.h"
#include "cuda/device_buffer.h"
#include "cuda/device_memory.h"
#include "cuda/elementwise.h"
#include "cuda/event_pool.h"
#include "cuda/finalizer.h"
#include "cuda/ready_event.h"
#include "cuda/reducescatter_plan.h"
#include "cuda/sparse_result.h"
#include "cuda/stream_wait.h"

#ifdef ZEN_HAVE_NCCL
#include "cuda/gpu_sparse_allreduce.h"
#include "cuda/nccl_comm.h"
#endif

namespace zen::cuda {
namespace {

using Clock = std::chrono::steady_clock;

Status cudaError(cudaError_t err, const std::string& what) {
  return Status(StatusCode::kInternal,
                fmt::format("{}: {} ({})", what, cudaGetErrorString(err), cudaGetErrorName(err)));
}

// The tensor of the first of `events` not completed yet, "" when none has (or a query failed:
// the completion event's poll reports that).
std::string firstPendingInput(const std::vector<cudaEvent_t>& events,
                              const std::vector<std::string>& names) {
  size_t done = 0;
  Status failure;
  return queryEvents(events, &done, &failure) == PollState::kPending ? names[done] : "";
}

std::string bucketWhat(const Response& r) {
  std::string out = fmt::format("{} of '{}'", responseTypeName(r.type), r.tensorNames.front());
  if (r.tensorNames.size() > 1) out += fmt::format(" and {} more", r.tensorNames.size() - 1);
  return out;
}

#ifdef ZEN_HAVE_NCCL
// The host-side plans of the collectives that have them, made once per bucket: submit checks
// them before touching the device or a peer, the collective then runs them.
struct HostPlans {
  AlltoallPlan alltoall;
  ReducescatterPlan reducescatter;
};

Status planOnHost(const Response& r,
                  const std::vector<TensorEntry*>& entries,
                  int ranks,
                  int rank,
                  HostPlans* plans) {
  if (r.type == ResponseType::kAlltoall) {
    ZEN_ASSIGN_OR_RETURN(plans->alltoall, planAlltoall(r, entries, ranks, rank));
  } else if (r.type == ResponseType::kReducescatter) {
    ZEN_ASSIGN_OR_RETURN(plans->reducescatter, planReducescatter(r, entries, ranks));
  }
  return Status::ok();
}
#endif  // ZEN_HAVE_NCCL

}  // namespace

int cudaDeviceCount() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

CudaExecutorOptions CudaExecutorOptions::fromConfig(const Config& config) {
  CudaExecutorOptions o;
  o.scheme = config.scheme;
  o.seed = config.seed;
  o.hashFunctions = config.hashFunctions;
  o.memoryFactor = config.hashMemoryFactor;
  o.timeoutSeconds = config.timeoutSeconds;
  return o;
}

struct CudaExecutor::Impl {
  Impl(ops::Transport& t, CudaExecutorOptions o)
      : bootstrap(t),
        options(o),
        events(
            []() -> Result<void*> {
              cudaEvent_t e = nullptr;
              const cudaError_t err = cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
              if (err != cudaSuccess) return cudaError(err, "creating a completion event");
              return static_cast<void*>(e);
            },
            [](void* e) { (void)cudaEventDestroy(static_cast<cudaEvent_t>(e)); }),
        staging(
            o.timeoutSeconds, [this](int index) { return ensureDevice(index); }, o.logger),
        finalizer(o.timeoutSeconds) {}
  ~Impl() {
    finalizer.drain();
    if (stream != nullptr) {
      (void)cudaSetDevice(device);
#ifdef ZEN_HAVE_NCCL
      // Bounded; on a timeout it aborts the communicator, which ends NCCL's stuck kernels.
      if (comm) (void)comm->wait(stream, "shutdown");
#endif
      // The rest of the stream's work (a failed communicator's wait returns at once), bounded
      // too. A kernel that still never ends (not NCCL's) would block the buffers' cudaFree
      // below as well: nothing in CUDA ends it short of the process's exit.
      (void)waitStream(stream, options.timeoutSeconds, "the CUDA executor's shutdown");
      (void)cudaStreamDestroy(stream);
#ifdef ZEN_HAVE_NCCL
      // Before the buffers: a communicator failed without an abort (markStuck) may still hold
      // a collective of an input once stuck, now running unmatched; its abort ends it, the
      // buffers' cudaFree would wait for it.
      comm.reset();
#endif
    }
  }

  Status ensureDevice(int index);
  // The stream waits on every entry's ready event (no host wait); keeps them in `ready`, their
  // tensors in `readyNames`.
  Status waitReady(const std::vector<TensorEntry*>& entries);
  // On the host, bounded, before the bucket's first wait for its stream (sparse buckets, a
  // buffer's growth): those ready events. A stream wait's timeout aborts the communicator, and
  // ncclCommAbort's frees wait for every kernel on the device (NVIDIA/nccl#829): behind a
  // framework kernel that never ends, the bucket would fail only once it does. This kTimeout
  // leaves the communicator alone, and marks the stream stuck (markStuck).
  Status waitInputs();
  // The stream waits behind an input that was never ready (waitInputs, or a dense bucket's
  // finalizer timeout: Finalizer::Fault::kInputs), and a dense bucket's collective may sit
  // there unmatched: the communicator fails without an abort (NcclComm::requestFail), so the
  // loop's current or next NCCL wait or call returns kAborted naming `why` at once, instead of
  // timing out behind it and aborting, which would block behind the framework's kernel. From
  // any thread.
  void markStuck(const Status& why);
  // Each runs one bucket on the stream; *async: the work is still queued when it returns.
  Status allreduce(const Response& r, const std::vector<TensorEntry*>& e, bool* async);
  Status broadcast(const Response& r, const std::vector<TensorEntry*>& e, bool* async);
  Status allgather(const Response& r, const std::vector<TensorEntry*>& e, bool* async);
  // alltoall and reducescatter run the plans submit made (planOnHost).
  Status alltoall(const AlltoallPlan& plan, const std::vector<TensorEntry*>& e, bool* async);
  Status reducescatter(const ReducescatterPlan& plan,
                       const Response& r,
                       const std::vector<TensorEntry*>& e,
                       bool* async);
  Status sparse(const Response& r,
                const std::vector<TensorEntry*>& e,
                BucketReport* report,
                bool* async);
  // Enqueues the copies `in` into a fusion buffer; the slots of tensors this rank did not post
  // (joined), `zeros`, get the op's identity (the CPU executor's fillIdentity). Takes `in` to
  // append the zero fills of a sum to its launch.
  Status fuseIn(std::vector<CopyJob> in,
                const std::vector<CopyJob>& zeros,
                ReduceOp op,
                DataType dtype);
  // buffer.reserve(bytes), after a bounded wait for the stream when that frees memory:
  // cudaFree waits for the whole device (device_buffer.cc), which behind an earlier bucket's
  // hung collective would never return; NcclComm::wait times out and aborts it instead (after
  // waitInputs).
  Status reserve(DeviceBuffer& buffer, size_t bytes);
  // Device memory of `bytes` for out's result, owned by the handle (OpResult::gatheredOnDevice;
  // null for 0 bytes): the allgather's and the alltoall's output, sized by the plan.
  Result<void*> deviceResult(OpResult& out, TensorShape shape, size_t bytes);

  ops::Transport& bootstrap;
  const CudaExecutorOptions options;
  int device = -1;
  cudaStream_t stream = nullptr;
  std::vector<cudaEvent_t> ready;       // the current bucket's inputs' ready events (waitReady)
  std::vector<std::string> readyNames;  // their tensors
  DeviceBuffer fusion;                  // dense buckets; a fused sparse bucket's dense result
  DeviceBuffer sparseIndices;           // a fused sparse bucket's input
  DeviceBuffer sparseValues;
  DeviceBuffer gatherBuffer;  // an allgather bucket: every rank's segment (device_bucket.h)
#ifdef ZEN_HAVE_NCCL
  std::unique_ptr<NcclComm> comm;
  GpuSparseAllreduceWorkspace workspace;
  GpuSparseAllreduceResult sparseResult;
#endif
  SparseResultDelivery sparseDelivery;  // sparse results, and a mixed bucket's dense outputs
  EventPool events;                     // completion events; outlives the finalizer's callbacks
  CudaStaging staging;                  // the DispatchExecutor's staged buckets
  Finalizer finalizer;                  // last: destroyed (drained) first
};

Status CudaExecutor::Impl::ensureDevice(int index) {
  if (device >= 0) {
    ZEN_CHECK_ARG(index == device,
                  "this rank runs its GPU tensors on cuda:{} (its first GPU tensor's device); "
                  "this bucket is on cuda:{}",
                  device, index);
    ZEN_CHECK_CUDA(cudaSetDevice(device));
    return Status::ok();
  }
  ZEN_CHECK_CUDA(cudaSetDevice(index));
  ZEN_CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  device = index;
#ifdef ZEN_HAVE_NCCL
  NcclCommOptions o;
  o.deviceIndex = index;
  o.timeoutSeconds = options.timeoutSeconds;
  o.logger = options.logger;
  comm = std::make_unique<NcclComm>(bootstrap, o);
#endif
  return Status::ok();
}

Status CudaExecutor::Impl::waitReady(const std::vector<TensorEntry*>& entries) {
  ready.clear();
  readyNames.clear();
  for (const TensorEntry* e : entries) {
    if (e == nullptr) continue;
    const cudaEvent_t ev = readyEventOf(*e);
    if (ev == nullptr) continue;
    ready.push_back(ev);
    readyNames.push_back(e->request.name);
    ZEN_CHECK_CUDA(cudaStreamWaitEvent(stream, ev, 0));
  }
  return Status::ok();
}

Status CudaExecutor::Impl::waitInputs() {
  const Status s =
      waitEvents(ready, options.timeoutSeconds,
                 fmt::format("rank {}: the framework's work on the inputs (their ready events)",
                             bootstrap.rank()));
  if (s.code() == StatusCode::kTimeout) markStuck(s);
  return s;
}

void CudaExecutor::Impl::markStuck(const Status& why) {
#ifdef ZEN_HAVE_NCCL
  if (comm) comm->requestFail(why);
#else
  (void)why;
#endif
}

Status CudaExecutor::Impl::fuseIn(std::vector<CopyJob> in,
                                  const std::vector<CopyJob>& zeros,
                                  ReduceOp op,
                                  DataType dtype) {
  if (op == ReduceOp::kSum || op == ReduceOp::kAverage) {
    in.insert(in.end(), zeros.begin(), zeros.end());
  } else {
    for (const CopyJob& z : zeros) {
      ZEN_RETURN_IF_ERROR(
          launchFillIdentity(z.dst, z.bytes / dataTypeSize(dtype), dtype, op, stream));
    }
  }
  return batchedCopy(in, stream);
}

Result<void*> CudaExecutor::Impl::deviceResult(OpResult& out, TensorShape shape, size_t bytes) {
  out.gatheredShape = std::move(shape);
  out.gathered.clear();
  out.gatheredDevice = Device::cuda(device);
  out.gatheredDeviceBytes = bytes;
  ZEN_RETURN_IF_ERROR(ownedDeviceMemory(device, bytes, &out.gatheredOnDevice));
  return out.gatheredOnDevice.get();
}

#ifdef ZEN_HAVE_NCCL

Status CudaExecutor::Impl::reserve(DeviceBuffer& buffer, size_t bytes) {
  if (bytes > buffer.capacity() && buffer.data() != nullptr) {
    ZEN_RETURN_IF_ERROR(waitInputs());
    ZEN_RETURN_IF_ERROR(comm->wait(stream, "growing a device buffer"));
  }
  return buffer.reserve(bytes);
}

Status CudaExecutor::Impl::allreduce(const Response& r,
                                     const std::vector<TensorEntry*>& entries,
                                     bool* async) {
  const DenseFusionPlan plan = planDenseFusion(r, entries);
  if (plan.inPlace) {
    TensorEntry* e = entries.front();
    if (e->output.data != e->input.data && plan.totalBytes > 0) {
      ZEN_CHECK_CUDA(cudaMemcpyAsync(e->output.data, e->input.data, plan.totalBytes,
                                     cudaMemcpyDeviceToDevice, stream));
    }
    ZEN_RETURN_IF_ERROR(comm->allreduce(e->output.data, plan.count, r.dtype, r.reduceOp, stream));
    *async = true;
    return Status::ok();
  }
  ZEN_RETURN_IF_ERROR(reserve(fusion, plan.totalBytes));
  DenseFusionCopies copies = fusionCopies(plan, entries, fusion.data());
  ZEN_RETURN_IF_ERROR(fuseIn(std::move(copies.in), copies.zeros, r.reduceOp, r.dtype));
  ZEN_RETURN_IF_ERROR(comm->allreduce(fusion.data(), plan.count, r.dtype, r.reduceOp, stream));
  ZEN_RETURN_IF_ERROR(batchedCopy(copies.out, stream));
  *async = true;
  return Status::ok();
}

Status CudaExecutor::Impl::broadcast(const Response& r,
                                     const std::vector<TensorEntry*>& entries,
                                     bool* async) {
  TensorEntry* e = entries.front();
  const size_t bytes = static_cast<size_t>(denseBytes(r, 0));
  void* data = nullptr;
  if (e != nullptr) {
    data = e->output.data;
    if (comm->rank() == r.rootRank && data != e->input.data && bytes > 0) {
      ZEN_CHECK_CUDA(cudaMemcpyAsync(data, e->input.data, bytes, cudaMemcpyDeviceToDevice, stream));
    }
  } else {
    ZEN_RETURN_IF_ERROR(reserve(fusion, bytes));  // joined: receive and drop
    data = fusion.data();
  }
  ZEN_RETURN_IF_ERROR(comm->broadcast(data, bytes, r.rootRank, stream));
  *async = true;
  return Status::ok();
}

Status CudaExecutor::Impl::allgather(const Response& r,
                                     const std::vector<TensorEntry*>& entries,
                                     bool* async) {
  const int n = comm->size();
  const int me = comm->rank();
  ZEN_ASSIGN_OR_RETURN(const GatherPlan plan, planGather(r, n));
  const std::vector<size_t>& at = plan.segmentOffset;
  ZEN_RETURN_IF_ERROR(reserve(gatherBuffer, std::max<size_t>(at.back(), 1)));
  auto* recv = gatherBuffer.as<std::byte>();
  // This rank's rows straight into its own segment, which is also what it sends.
  ZEN_RETURN_IF_ERROR(batchedCopy(gatherInCopies(plan, r, entries, me, recv), stream));
  std::vector<DeviceMutableBytes> recvs(static_cast<size_t>(n));
  for (size_t p = 0; p < recvs.size(); ++p) recvs[p] = {recv + at[p], at[p + 1] - at[p]};
  const size_t mine = at[me + 1] - at[me];
  ZEN_RETURN_IF_ERROR(comm->allgatherv(recv + at[me], mine, recvs, stream));
  // Each result in device memory its handle owns (OpResult::gatheredOnDevice).
  std::vector<void*> outputs(entries.size(), nullptr);
  for (size_t i = 0; i < entries.size(); ++i) {
    if (entries[i] == nullptr) continue;
    ZEN_ASSIGN_OR_RETURN(
        outputs[i], deviceResult(entries[i]->handle->result(), r.shapes[i], plan.outputBytes[i]));
  }
  ZEN_RETURN_IF_ERROR(batchedCopy(gatherOutCopies(plan, r, recv, outputs), stream));
  *async = true;
  return Status::ok();
}

Status CudaExecutor::Impl::alltoall(const AlltoallPlan& plan,
                                    const std::vector<TensorEntry*>& entries,
                                    bool* async) {
  const int n = comm->size();
  TensorEntry* e = entries.front();
  // Straight from the input into the output (the handle's device memory), no staging.
  OpResult& out = e->handle->result();
  ZEN_ASSIGN_OR_RETURN(void* output, deviceResult(out, plan.outputShape, plan.recvOffset.back()));
  out.receivedSplits = plan.receivedSplits;
  const auto* input = static_cast<const std::byte*>(e->input.data);
  std::vector<DeviceBytes> sends(static_cast<size_t>(n));
  std::vector<DeviceMutableBytes> recvs(static_cast<size_t>(n));
  for (size_t p = 0; p < sends.size(); ++p) {
    const size_t sendBytes = plan.sendOffset[p + 1] - plan.sendOffset[p];
    const size_t recvBytes = plan.recvOffset[p + 1] - plan.recvOffset[p];
    // Empty segments as null: NcclComm passes its own valid address for them.
    sends[p] = {sendBytes > 0 ? input + plan.sendOffset[p] : nullptr, sendBytes};
    recvs[p] = {recvBytes > 0 ? static_cast<std::byte*>(output) + plan.recvOffset[p] : nullptr,
                recvBytes};
  }
  ZEN_RETURN_IF_ERROR(comm->alltoallv(sends, recvs, stream));
  *async = true;
  return Status::ok();
}

Status CudaExecutor::Impl::reducescatter(const ReducescatterPlan& plan,
                                         const Response& r,
                                         const std::vector<TensorEntry*>& entries,
                                         bool* async) {
  const int n = comm->size();
  if (plan.direct) {
    const TensorEntry* e = entries.front();
    ZEN_RETURN_IF_ERROR(comm->reducescatter(e->input.data, e->output.data, plan.blockElements,
                                            r.dtype, r.reduceOp, stream));
    *async = true;
    return Status::ok();
  }
  // Padded blocks (cuda/reducescatter_plan.h); this rank's block is reduced in place. The
  // padding is left uninitialised: the reduction is element-wise, so it never mixes into a
  // piece, and copies.out reads only the pieces (test/cuda_host checks where they come from).
  const size_t blockBytes = plan.blockElements * dataTypeSize(r.dtype);
  ZEN_RETURN_IF_ERROR(reserve(fusion, std::max<size_t>(blockBytes * static_cast<size_t>(n), 1)));
  DenseFusionCopies copies = reducescatterCopies(plan, r, entries, comm->rank(), fusion.data());
  ZEN_RETURN_IF_ERROR(fuseIn(std::move(copies.in), copies.zeros, r.reduceOp, r.dtype));
  std::byte* mine = fusion.as<std::byte>() + static_cast<size_t>(comm->rank()) * blockBytes;
  ZEN_RETURN_IF_ERROR(
      comm->reducescatter(fusion.data(), mine, plan.blockElements, r.dtype, r.reduceOp, stream));
  ZEN_RETURN_IF_ERROR(batchedCopy(copies.out, stream));
  *async = true;
  return Status::ok();
}

Status CudaExecutor::Impl::sparse(const Response& r,
                                  const std::vector<TensorEntry*>& entries,
                                  BucketReport* report,
                                  bool* async) {
  ZEN_RETURN_IF_ERROR(waitInputs());  // the scheme waits for its stream
  const SparseOutput mode = sparseOutputOf(entries);
  GpuSparseAllreduceOptions o;
  o.comm = comm.get();
  o.op = r.reduceOp;
  o.scheme = options.scheme;
  o.seed = options.seed;
  o.hashFunctions = options.hashFunctions;
  o.memoryFactor = options.memoryFactor;
  o.stream = stream;
  o.workspace = &workspace;
  const size_t rowBytes = static_cast<size_t>(r.rowSize) * dataTypeSize(r.dtype);
  o.input.numRows = r.totalRows;
  o.input.rowSize = r.rowSize;
  o.input.dtype = r.dtype;
  o.input.device = Device::cuda(device);
  if (entries.size() == 1 && entries.front() != nullptr) {
    o.input = entries.front()->sparseInput;
  } else {
    const SparseFusionPlan plan = planSparseFusion(r, entries);
    ZEN_RETURN_IF_ERROR(reserve(sparseIndices, static_cast<size_t>(plan.nnz) * sizeof(int64_t)));
    ZEN_RETURN_IF_ERROR(reserve(sparseValues, static_cast<size_t>(plan.nnz) * rowBytes));
    std::vector<CopyJob> values;
    for (size_t i = 0; i < entries.size(); ++i) {
      const TensorEntry* e = entries[i];
      if (e == nullptr || e->sparseInput.nnz == 0) continue;
      const int64_t first = plan.firstEntry[i];
      ZEN_RETURN_IF_ERROR(offsetIndices(e->sparseInput.indices, sparseIndices.as<int64_t>() + first,
                                        e->sparseInput.nnz, r.rowOffsets[i], r.shapes[i].numRows(),
                                        stream));
      values.push_back(CopyJob{e->sparseInput.values,
                               sparseValues.as<std::byte>() + static_cast<size_t>(first) * rowBytes,
                               static_cast<size_t>(e->sparseInput.nnz) * rowBytes});
    }
    ZEN_RETURN_IF_ERROR(batchedCopy(values, stream));
    o.input.indices = sparseIndices.as<int64_t>();
    o.input.values = sparseValues.data();
    o.input.nnz = plan.nnz;
  }
  const bool dense = mode != SparseOutput::kSparse && mode != SparseOutput::kMixed;
  o.denseOutput = dense;
  if (mode == SparseOutput::kDenseInPlace) {
    o.denseOutputView = entries.front()->output;
  } else if (dense) {
    ZEN_RETURN_IF_ERROR(reserve(fusion, static_cast<size_t>(r.totalRows) * rowBytes));
    o.denseOutputView.data = fusion.data();
    o.denseOutputView.dtype = r.dtype;
    o.denseOutputView.shape = TensorShape({r.totalRows, r.rowSize});
    o.denseOutputView.device = Device::cuda(device);
  }
  report->nnz = o.input.nnz;
  report->rows = r.totalRows;
  const auto start = Clock::now();
  const Status status = gpuSparseAllreduce(o, &sparseResult);
  const ops::SyncStats& stats = sparseResult.stats;
  auto at = start;
  for (const auto& [name, seconds] : stats.phases) {
    const auto end =
        at + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
    std::string phase = name == "partition" ? "HASH" : name;
    for (char& c : phase) c = c == ' ' ? '_' : static_cast<char>(std::toupper(c));
    report->phases.push_back(ExecPhase{phase, at, end});
    at = end;
  }
  report->scheme = std::string("gpu-") + schemeName(stats.scheme);
  report->imbalance = stats.imbalance;
  report->bytesSent = stats.bytesSent;
  report->bytesReceived = stats.bytesReceived;
  ZEN_RETURN_IF_ERROR(status);

  if (mode == SparseOutput::kDenseFused) {  // tensor i's rows are contiguous in the result
    std::vector<CopyJob> out;
    for (size_t i = 0; i < entries.size(); ++i) {
      if (entries[i] == nullptr) continue;
      out.push_back(
          CopyJob{fusion.as<std::byte>() + static_cast<size_t>(r.rowOffsets[i]) * rowBytes,
                  entries[i]->output.data, static_cast<size_t>(r.shapes[i].numRows()) * rowBytes});
    }
    ZEN_RETURN_IF_ERROR(batchedCopy(out, stream));
    *async = true;
    return Status::ok();
  }
  if (!dense) {  // sorted and split on the device; dense outputs of a mixed bucket filled there
    const GpuSparse& s = sparseResult.sparse;
    SparseResultInput in;
    in.indices = s.indices.as<int64_t>();
    in.values = s.values.data();
    in.nnz = s.nnz;
    in.device = device;
    in.stream = stream;
    in.wait = [this](const char* what) { return comm->wait(stream, what); };
    return sparseDelivery.deliver(r, entries, in, async);
  }
  return Status::ok();  // in place, or dropped
}

#endif  // ZEN_HAVE_NCCL

CudaExecutor::CudaExecutor(ops::Transport& bootstrap, CudaExecutorOptions options)
    : impl_(std::make_unique<Impl>(bootstrap, options)) {}

CudaExecutor::~CudaExecutor() = default;

Status CudaExecutor::accept(TensorEntry& entry) {
  const Device device = entryDevice(entry);
  const std::string& name = entry.request.name;
#ifndef ZEN_HAVE_NCCL
  return ZEN_ERROR(StatusCode::kInvalidArgument,
                   "tensor '{}' is on {}, but zen was built without NCCL, which its GPU "
                   "collectives need; pass host tensors",
                   name, device.toString());
#endif
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  ZEN_CHECK_ARG(err == cudaSuccess && device.index < count,
                "tensor '{}' is on {}, but this process sees {} CUDA device(s){}", name,
                device.toString(), err == cudaSuccess ? count : 0,
                err == cudaSuccess ? "" : fmt::format(" ({})", cudaGetErrorString(err)));
  if (entry.ready.event != nullptr || entry.ready.stream == nullptr) return Status::ok();
  // The framework gave its stream: an event there marks the inputs' readiness.
  DeviceGuard guard(device.index);
  cudaEvent_t event = nullptr;
  ZEN_CHECK_CUDA(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  const cudaError_t recorded =
      cudaEventRecord(event, static_cast<cudaStream_t>(entry.ready.stream));
  if (recorded != cudaSuccess) {
    (void)cudaEventDestroy(event);
    return cudaError(recorded, fmt::format("recording the ready event of '{}'", name));
  }
  entry.deviceState = std::shared_ptr<void>(
      event, [](void* e) { (void)cudaEventDestroy(static_cast<cudaEvent_t>(e)); });
  return Status::ok();
}

void CudaExecutor::submit(const Response& response,
                          const std::vector<TensorEntry*>& entries,
                          const BucketDone& done) {
  Impl& m = *impl_;
  BucketReport report;
  for (size_t i = 0; i < response.shapes.size(); ++i) report.denseBytes += denseBytes(response, i);
  const auto start = Clock::now();
  bool async = false;
  Status status = [&]() -> Status {
    ZEN_CHECK_ARG(entries.size() == response.tensorNames.size() &&
                      response.shapes.size() == response.tensorNames.size(),
                  "{}: {} entries and {} shapes for {} tensors", responseTypeName(response.type),
                  entries.size(), response.shapes.size(), response.tensorNames.size());
#ifndef ZEN_HAVE_NCCL
    return ZEN_ERROR(StatusCode::kUnimplemented, "zen was built without NCCL");
#else
    // A plan these collectives cannot run fails here, before touching the device or a peer
    // (the plan is the same on every rank, so every rank fails it and none waits).
    HostPlans plans;
    ZEN_RETURN_IF_ERROR(
        planOnHost(response, entries, m.bootstrap.size(), m.bootstrap.rank(), &plans));
    // The device of this rank's own tensors; a rank that posted none of them (joined) keeps
    // its device (the plan lists the first poster's there).
    int index =
        m.device >= 0 ? m.device : response.devices[static_cast<size_t>(m.bootstrap.rank())].index;
    for (const TensorEntry* e : entries) {
      if (e != nullptr) index = entryDevice(*e).index;
    }
    ZEN_RETURN_IF_ERROR(m.ensureDevice(index));
    ZEN_RETURN_IF_ERROR(m.waitReady(entries));
    const ops::TransportCounters before = m.comm->counters();
    Status s;
    switch (response.type) {
      case ResponseType::kAllreduce:
        report.scheme = "nccl-allreduce";
        for (const TensorShape& shape : response.shapes) report.rows += shape.numElements();
        s = m.allreduce(response, entries, &async);
        break;
      case ResponseType::kBroadcast:
        report.scheme = "nccl-broadcast";
        s = m.broadcast(response, entries, &async);
        break;
      case ResponseType::kSparseAllreduce:
        s = m.sparse(response, entries, &report, &async);
        break;
      case ResponseType::kAllgather:
        report.scheme = "nccl-allgatherv";
        s = m.allgather(response, entries, &async);
        break;
      case ResponseType::kAlltoall:
        report.scheme = "nccl-alltoallv";
        report.rows = plans.alltoall.outputShape.dim(0);
        s = m.alltoall(plans.alltoall, entries, &async);
        break;
      case ResponseType::kReducescatter:
        report.scheme = "nccl-reducescatter";
        for (const ops::ReducescatterTensor& x : plans.reducescatter.tensors) report.rows += x.rows;
        s = m.reducescatter(plans.reducescatter, response, entries, &async);
        break;
      default:
        return ZEN_ERROR(StatusCode::kUnimplemented, "{} of CUDA tensors is not supported yet",
                         responseTypeName(response.type));
    }
    if (report.bytesSent == 0 && report.bytesReceived == 0) {
      const ops::TransportCounters after = m.comm->counters();
      report.bytesSent = after.totalSent() - before.totalSent();
      report.bytesReceived = after.totalReceived() - before.totalReceived();
    }
    return s;
#endif
  }();
  if (!status.isOk()) {
    status = Status(status.code(), fmt::format("{}: {}", bucketWhat(response), status.message()));
  }
  cudaEvent_t event = nullptr;
  if (status.isOk() && async) {
    Result<void*> pooled = m.events.acquire();
    if (!pooled.isOk()) {
      status =
          Status(pooled.status().code(), bucketWhat(response) + ": " + pooled.status().message());
    } else {
      event = static_cast<cudaEvent_t>(pooled.value());
      const cudaError_t err = cudaEventRecord(event, m.stream);
      if (err != cudaSuccess) {
        status = cudaError(err, bucketWhat(response) + ": recording its completion event");
        m.events.release(event, false);
        event = nullptr;
      }
    }
  }
  if (event == nullptr) {
    report.phases.push_back(ExecPhase{"CUDA", start, Clock::now()});
    done(status, std::move(report));
    return;
  }
  const std::string what = bucketWhat(response);
  // The ready events are queried at the deadline: accept()'s are kept here till the item ends
  // (the framework keeps its own until the handles end).
  std::vector<std::shared_ptr<void>> owned;
  for (const TensorEntry* e : entries) {
    if (e != nullptr && e->deviceState) owned.push_back(e->deviceState);
  }
  m.finalizer.add(
      what,
      [event, what, device = m.device](Status* error) {
        // The finalizer thread's CUDA calls (this query, the event's release, the done
        // callbacks') must not create a context on device 0 of a multi-GPU host.
        (void)cudaSetDevice(device);
        const cudaError_t q = cudaEventQuery(event);
        if (q == cudaSuccess) return Finalizer::State::kDone;
        if (q == cudaErrorNotReady) return Finalizer::State::kPending;
        // An asynchronous device error is sticky: this rank's GPU data plane is gone.
        *error =
            Status(StatusCode::kAborted, fmt::format("{}: the device failed: {} ({})", what,
                                                     cudaGetErrorString(q), cudaGetErrorName(q)));
        return Finalizer::State::kFailed;
      },
      [ready = m.ready, names = m.readyNames, owned = std::move(owned), device = m.device] {
        (void)owned;  // kept alive, not read
        (void)cudaSetDevice(device);
        return firstPendingInput(ready, names);
      },
      [event, done, start, report = std::move(report), impl = &m](const Status& s,
                                                                  Finalizer::Fault fault) mutable {
        // Fired: back to the pool. Timed out (maybe still pending) or failed: destroyed.
        impl->events.release(event, s.isOk());
        // An input never ready: the communicator fails without an abort (markStuck), which
        // would wait for the framework's kernel.
        if (fault == Finalizer::Fault::kInputs) impl->markStuck(s);
#ifdef ZEN_HAVE_NCCL
        // A hung collective (timeout) or a dead device: the loop thread aborts the
        // communicator at its next NCCL call or wait (NcclComm::requestAbort).
        if (fault == Finalizer::Fault::kDevice && impl->comm) impl->comm->requestAbort(s);
#endif
        report.phases.push_back(ExecPhase{"CUDA", start, Clock::now()});
        done(s, std::move(report));
      });
}

Status CudaExecutor::execute(const Response& response,
                             const std::vector<TensorEntry*>& entries,
                             BucketReport* report) {
  std::mutex mu;
  std::condition_variable cv;
  bool ended = false;
  Status result;
  submit(response, entries, [&](const Status& s, BucketReport r) {
    std::lock_guard<std::mutex> lock(mu);
    result = s;
    *report = std::move(r);
    ended = true;
    cv.notify_all();
  });
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return ended; });
  return result;
}

DeviceStaging& CudaExecutor::staging() {
  return impl_->staging;
}

void CudaExecutor::drain() {
  impl_->finalizer.drain();
}

}  // namespace zen::cuda
