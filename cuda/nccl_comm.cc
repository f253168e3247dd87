// The NCCL backend (see nccl_comm.h for the contract).
//
// The communicator is created non-blocking (ncclConfig_t.blocking = 0): every NCCL call
// returns at once, possibly ncclInProgress, and completion is polled with
// ncclCommGetAsyncError under the caller's deadline (nccl_plan.h's pollWithDeadline). So no
// call here can hang: a peer that never joins, never posts its half of a send/recv or dies
// shows as kTimeout / kIoError, after which the communicator is aborted.
//
// allgatherv is grouped ncclSend/ncclRecv rather than ncclAllGather of padded sizes: the
// sizes are known after allgatherCounts, the pull parts differ (bitmap tails, value counts),
// and padding every part to the largest is the bug ALGORITHMS.md §8 lists; each rank sends
// its part to n - 1 peers, the same bytes a ring allgather moves per rank.
#include "cuda/nccl_comm.h"

#include <cuda_runtime.h>
#include <nccl.h>
#include <spdlog/logger.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "cuda/cuda_check.h"
#include "cuda/device_buffer.h"
#include "cuda/elementwise.h"
#include "cuda/nccl_plan.h"

namespace zen::cuda {

NcclCommOptions NcclCommOptions::fromConfig(const Config& config) {
  NcclCommOptions options;
  options.deviceIndex = config.localRank.value_or(0);
  options.timeoutSeconds = config.timeoutSeconds;
  return options;
}

namespace {

StatusCode ncclStatusCode(ncclResult_t r) {
  switch (r) {
    case ncclInvalidArgument:
    case ncclInvalidUsage:
      return StatusCode::kInvalidArgument;
    case ncclSystemError:
    case ncclRemoteError:
      return StatusCode::kIoError;
    default:
      return StatusCode::kInternal;
  }
}

Result<ncclDataType_t> ncclType(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat32:
      return ncclFloat32;
    case DataType::kFloat16:
      return ncclFloat16;
    case DataType::kBFloat16:
      return ncclBfloat16;
    case DataType::kFloat64:
      return ncclFloat64;
    case DataType::kInt32:
      return ncclInt32;
    case DataType::kInt64:
      return ncclInt64;
  }
  return ZEN_ERROR(StatusCode::kInvalidArgument, "no NCCL type for dtype {}",
                   static_cast<int>(dtype));
}

bool isInteger(DataType dtype) {
  return dtype == DataType::kInt32 || dtype == DataType::kInt64;
}

// NCCL's op for a ReduceOp. Integer Average is a sum (the caller divides): NCCL's ncclAvg
// would round differently from the CPU's truncating division.
Result<ncclRedOp_t> ncclOp(ReduceOp op, DataType dtype, int rank, const char* call) {
  switch (op) {
    case ReduceOp::kSum:
      return ncclSum;
    case ReduceOp::kAverage:
      return isInteger(dtype) ? ncclSum : ncclAvg;
    case ReduceOp::kMin:
      return ncclMin;
    case ReduceOp::kMax:
      return ncclMax;
    case ReduceOp::kProduct:
      return ncclProd;
    case ReduceOp::kAdasum:
      return ZEN_ERROR(StatusCode::kUnimplemented, "{} on rank {}: adasum has no NCCL op", call,
                       rank);
  }
  return ZEN_ERROR(StatusCode::kInvalidArgument, "{} on rank {}: unknown reduce op {}", call, rank,
                   static_cast<int>(op));
}

// Whether the result still needs ncclOp's integer division by the rank count.
bool dividesAfter(ReduceOp op, DataType dtype, int size) {
  return op == ReduceOp::kAverage && isInteger(dtype) && size > 1;
}

}  // namespace

struct NcclComm::Impl {
  ops::Transport& bootstrap;
  NcclCommOptions options;
  int rank;
  int size;
  ncclComm_t comm = nullptr;
  Status failure;       // the first communicator failure: every later call returns it (kAborted)
  DeviceBuffer counts;  // device uint64 [2 n] for the count exchanges; also a dummy buffer
  PinnedBuffer hostCounts;  // pinned uint64 [2 n]
  EndRequest endRequest;    // requestAbort(), requestFail(), from any thread
  bool keepComm = false;    // driving thread: failed by requestFail, aborted when destroyed
  std::unique_ptr<std::atomic<uint64_t>[]> sent;
  std::unique_ptr<std::atomic<uint64_t>[]> received;

  Impl(ops::Transport& t, NcclCommOptions o)
      : bootstrap(t),
        options(o),
        rank(t.rank()),
        size(t.size()),
        sent(new std::atomic<uint64_t>[static_cast<size_t>(t.size())]),
        received(new std::atomic<uint64_t>[static_cast<size_t>(t.size())]) {
    for (int p = 0; p < size; ++p) sent[p] = received[p] = 0;
  }

  // Aborts the communicator (once; not after requestFail) and remembers why.
  Status fail(Status why) {
    if (failure.isOk()) failure = why;
    if (comm != nullptr && !keepComm) {
      ncclCommAbort(comm);
      comm = nullptr;
    }
    return why;
  }

  Status ncclError(ncclResult_t r, const char* call, const char* file, int line) {
    const char* last = comm != nullptr ? ncclGetLastError(comm) : "";
    Status s(ncclStatusCode(r),
             fmt::format("rank {}: {} failed: {}{}{}", rank, call, ncclGetErrorString(r),
                         (last != nullptr && *last != '\0') ? ": " : "", last ? last : ""),
             file, line);
    // Argument errors leave the communicator usable; anything else may not.
    if (s.code() == StatusCode::kInvalidArgument) return s;
    return fail(s);
  }

  Status cudaError(cudaError_t err, const char* call, const char* file, int line) {
    return fail(Status(StatusCode::kInternal,
                       fmt::format("rank {}: {} failed: {} ({})", rank, call,
                                   cudaGetErrorString(err), cudaGetErrorName(err)),
                       file, line));
  }

  // Every rank's loaded libnccl against nccl.h and each other, and every rank's own setup
  // (`local`), shared (nccl_plan.h's agreeOnNcclSetup, over the bootstrap transport) before the
  // unique id: one rank's refusal is every rank's at once. A refusal is this communicator's
  // failure, so later calls name it.
  Status agreeOnSetup(const Status& local) {
    int loaded = 0;
    if (ncclGetVersion(&loaded) != ncclSuccess) loaded = 0;  // the peers learn it too
    if (options.logger) {
      options.logger->info("rank {}: NCCL {} loaded (built with {})", rank,
                           decodeNcclVersion(loaded).toString(),
                           decodeNcclVersion(NCCL_VERSION_CODE).toString());
    }
    const Status s = agreeOnNcclSetup(bootstrap, local, loaded, NCCL_VERSION_CODE);
    if (s.isOk()) return s;
    return fail(ZEN_ERROR(s.code(), "rank {}: setting up NCCL: {}", rank, s.message()));
  }

  // Acts on requestAbort() and requestFail() (driving thread only).
  Status honourAbortRequest() {
    if (!endRequest.pending()) return Status::ok();
    Status why;
    const bool onlyFail = endRequest.current(&why) == EndRequest::Kind::kFail;
    if (onlyFail) {
      keepComm = true;
      return fail(ZEN_ERROR(StatusCode::kAborted,
                            "rank {}: NCCL communicator failed on request (not aborted: that "
                            "would wait for the work it queues behind): {}",
                            rank, why.toString()));
    }
    return fail(ZEN_ERROR(StatusCode::kAborted, "rank {}: NCCL communicator aborted on request: {}",
                          rank, why.toString()));
  }

  Status guard() {
    if (failure.isOk()) ZEN_RETURN_IF_ERROR(honourAbortRequest());
    if (failure.isOk()) return Status::ok();
    return ZEN_ERROR(StatusCode::kAborted, "NCCL communicator of rank {} failed earlier: {}", rank,
                     failure.toString());
  }

  // Polls the communicator until its pending NCCL calls (init, a group) are issued.
  Status waitIssued(const char* what) {
    const Status s = pollWithDeadline(
        [&](Status* err) {
          if (endRequest.pending()) {
            *err = honourAbortRequest();
            return PollState::kFailed;
          }
          ncclResult_t state = ncclSuccess;
          const ncclResult_t r = ncclCommGetAsyncError(comm, &state);
          if (r != ncclSuccess) {
            *err = ncclError(r, "ncclCommGetAsyncError", __FILE__, __LINE__);
            return PollState::kFailed;
          }
          if (state == ncclInProgress) return PollState::kPending;
          if (state != ncclSuccess) {
            *err = ncclError(state, what, __FILE__, __LINE__);
            return PollState::kFailed;
          }
          return PollState::kDone;
        },
        options.timeoutSeconds, rank, what);
    if (!s.isOk()) return fail(s);
    return s;
  }

  void add(const PeerBytes& b) {
    for (int p = 0; p < size; ++p) {
      sent[p] += b.sent[p];
      received[p] += b.received[p];
    }
  }

  // A valid device address for zero-byte segments given as null.
  void* dummy() const { return counts.data(); }
};

#define ZEN_CHECK_NCCL(impl, expr)                                       \
  do {                                                                   \
    const ncclResult_t zen_nccl_rc_ = (expr);                            \
    if (zen_nccl_rc_ != ncclSuccess && zen_nccl_rc_ != ncclInProgress) { \
      return (impl)->ncclError(zen_nccl_rc_, #expr, __FILE__, __LINE__); \
    }                                                                    \
  } while (0)

// Inside ncclGroupStart/End: close the group before returning, so the comm stays usable after
// an argument error.
#define ZEN_CHECK_NCCL_IN_GROUP(impl, expr)                              \
  do {                                                                   \
    const ncclResult_t zen_nccl_rc_ = (expr);                            \
    if (zen_nccl_rc_ != ncclSuccess && zen_nccl_rc_ != ncclInProgress) { \
      ncclGroupEnd();                                                    \
      return (impl)->ncclError(zen_nccl_rc_, #expr, __FILE__, __LINE__); \
    }                                                                    \
  } while (0)

#define ZEN_CHECK_CUDA_COMM(impl, expr)                                  \
  do {                                                                   \
    const cudaError_t zen_cuda_rc_ = (expr);                             \
    if (zen_cuda_rc_ != cudaSuccess) {                                   \
      return (impl)->cudaError(zen_cuda_rc_, #expr, __FILE__, __LINE__); \
    }                                                                    \
  } while (0)

NcclComm::NcclComm(ops::Transport& bootstrap, NcclCommOptions options)
    : impl_(std::make_unique<Impl>(bootstrap, options)) {}

NcclComm::~NcclComm() {
  if (impl_ == nullptr || impl_->comm == nullptr) return;
  cudaSetDevice(impl_->options.deviceIndex);
  if (impl_->failure.isOk()) (void)impl_->honourAbortRequest();  // one never acted on
  if (impl_->comm == nullptr) return;
  if (impl_->keepComm) {  // failed by requestFail: its work may never run
    ncclCommAbort(impl_->comm);
    impl_->comm = nullptr;
    return;
  }
  // Finalize flushes outstanding work; if it fails or does not finish in time (waitIssued
  // then aborts the communicator), nothing is left to destroy.
  ncclComm_t comm = impl_->comm;
  const ncclResult_t r = ncclCommFinalize(comm);
  if ((r == ncclSuccess || r == ncclInProgress) && impl_->waitIssued("ncclCommFinalize").isOk()) {
    ncclCommDestroy(comm);
    impl_->comm = nullptr;
    return;
  }
  if (impl_->comm != nullptr) {
    ncclCommAbort(impl_->comm);
    impl_->comm = nullptr;
  }
}

int NcclComm::rank() const {
  return impl_->rank;
}
int NcclComm::size() const {
  return impl_->size;
}
int NcclComm::deviceIndex() const {
  return impl_->options.deviceIndex;
}
double NcclComm::timeoutSeconds() const {
  return impl_->options.timeoutSeconds;
}
bool NcclComm::ready() const {
  return impl_->comm != nullptr && impl_->failure.isOk();
}

Status NcclComm::init() {
  Impl* m = impl_.get();
  ZEN_RETURN_IF_ERROR(m->guard());
  ZEN_CHECK_CUDA_COMM(m, cudaSetDevice(m->options.deviceIndex));
  if (m->comm != nullptr) return Status::ok();

  // A failure from here to the id's broadcast reaches every rank through the exchanges below,
  // never as one rank's early return that leaves its peers waiting for it.
  const size_t countBytes = 2 * static_cast<size_t>(m->size) * sizeof(uint64_t);
  Status local = m->counts.reserve(countBytes);
  if (local.isOk()) local = m->hostCounts.reserve(countBytes);

  // Before any other NCCL call: an older libnccl than the headers may lack what they declare.
  ZEN_RETURN_IF_ERROR(m->agreeOnSetup(local));

  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  Status made;
  if (m->rank == 0) {
    const ncclResult_t got = ncclGetUniqueId(&id);
    if (got != ncclSuccess) made = m->ncclError(got, "ncclGetUniqueId", __FILE__, __LINE__);
  }
  const Status shared = shareNcclUniqueId(m->bootstrap, made, &id, sizeof(id));
  if (!shared.isOk()) {
    return m->fail(ZEN_ERROR(shared.code(), "rank {}: sharing the NCCL unique id failed: {}",
                             m->rank, shared.message()));
  }
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  const ncclResult_t r = ncclCommInitRankConfig(&comm, m->size, id, m->rank, &config);
  m->comm = comm;
  if (r != ncclSuccess && r != ncclInProgress) {
    return m->ncclError(r, "ncclCommInitRankConfig", __FILE__, __LINE__);
  }
  return m->waitIssued("ncclCommInitRankConfig");
}

void NcclComm::abort(const Status& why) {
  Impl* m = impl_.get();
  // A pending requestFail wins: its failure keeps the communicator, whose abort would block.
  if (m->failure.isOk()) (void)m->honourAbortRequest();
  if (!m->failure.isOk()) return;
  (void)cudaSetDevice(m->options.deviceIndex);
  (void)m->fail(ZEN_ERROR(StatusCode::kAborted, "rank {}: NCCL communicator aborted: {}", m->rank,
                          why.toString()));
}

Status NcclComm::wait(cudaStream_t stream, const char* what) {
  Impl* m = impl_.get();
  ZEN_RETURN_IF_ERROR(init());
  const Status s = pollWithDeadline(
      [&](Status* err) {
        if (m->endRequest.pending()) {
          *err = m->honourAbortRequest();
          return PollState::kFailed;
        }
        const cudaError_t q = cudaStreamQuery(stream);
        if (q == cudaSuccess) return PollState::kDone;
        if (q != cudaErrorNotReady) {
          *err = m->cudaError(q, "cudaStreamQuery", __FILE__, __LINE__);
          return PollState::kFailed;
        }
        ncclResult_t state = ncclSuccess;
        const ncclResult_t r = ncclCommGetAsyncError(m->comm, &state);
        if (r != ncclSuccess || (state != ncclSuccess && state != ncclInProgress)) {
          *err = m->ncclError(r != ncclSuccess ? r : state, what, __FILE__, __LINE__);
          return PollState::kFailed;
        }
        return PollState::kPending;
      },
      m->options.timeoutSeconds, m->rank, what);
  if (!s.isOk()) return m->fail(s);
  return s;
}

Status NcclComm::exchangeCounts(const std::vector<uint64_t>& sendCounts,
                                std::vector<uint64_t>* recvCounts,
                                cudaStream_t stream) {
  Impl* m = impl_.get();
  const int n = m->size;
  ZEN_CHECK_ARG(static_cast<int>(sendCounts.size()) == n,
                "exchangeCounts on rank {}: expected {} counts, found {}", m->rank, n,
                sendCounts.size());
  ZEN_RETURN_IF_ERROR(init());
  uint64_t* host = m->hostCounts.as<uint64_t>();
  uint64_t* dev = m->counts.as<uint64_t>();
  std::copy(sendCounts.begin(), sendCounts.end(), host);
  ZEN_CHECK_CUDA_COMM(
      m, cudaMemcpyAsync(dev, host, n * sizeof(uint64_t), cudaMemcpyHostToDevice, stream));
  ZEN_CHECK_NCCL(m, ncclGroupStart());
  for (int p = 0; p < n; ++p) {
    ZEN_CHECK_NCCL_IN_GROUP(m, ncclSend(dev + p, 1, ncclUint64, p, m->comm, stream));
    ZEN_CHECK_NCCL_IN_GROUP(m, ncclRecv(dev + n + p, 1, ncclUint64, p, m->comm, stream));
  }
  ZEN_CHECK_NCCL(m, ncclGroupEnd());
  ZEN_RETURN_IF_ERROR(m->waitIssued("exchangeCounts (group)"));
  ZEN_CHECK_CUDA_COMM(
      m, cudaMemcpyAsync(host + n, dev + n, n * sizeof(uint64_t), cudaMemcpyDeviceToHost, stream));
  ZEN_RETURN_IF_ERROR(wait(stream, "exchangeCounts"));
  recvCounts->assign(host + n, host + 2 * n);
  return Status::ok();
}

Status NcclComm::alltoallv(const std::vector<DeviceBytes>& sends,
                           const std::vector<DeviceMutableBytes>& recvs,
                           cudaStream_t stream) {
  Impl* m = impl_.get();
  const int n = m->size;
  const int r = m->rank;
  std::vector<size_t> sendSizes, recvSizes;
  for (const auto& s : sends) sendSizes.push_back(s.size);
  for (const auto& s : recvs) recvSizes.push_back(s.size);
  ZEN_RETURN_IF_ERROR(checkAlltoallvSizes(n, r, sendSizes, recvSizes));
  ZEN_RETURN_IF_ERROR(init());
  if (sends[r].size > 0 && sends[r].data != recvs[r].data) {
    ZEN_CHECK_CUDA_COMM(m, cudaMemcpyAsync(recvs[r].data, sends[r].data, sends[r].size,
                                           cudaMemcpyDeviceToDevice, stream));
  }
  if (n > 1) {
    ZEN_CHECK_NCCL(m, ncclGroupStart());
    for (int p = 0; p < n; ++p) {
      if (p == r) continue;
      const void* sdata = sends[p].data != nullptr ? sends[p].data : m->dummy();
      void* rdata = recvs[p].data != nullptr ? recvs[p].data : m->dummy();
      ZEN_CHECK_NCCL_IN_GROUP(m, ncclSend(sdata, sends[p].size, ncclUint8, p, m->comm, stream));
      ZEN_CHECK_NCCL_IN_GROUP(m, ncclRecv(rdata, recvs[p].size, ncclUint8, p, m->comm, stream));
    }
    ZEN_CHECK_NCCL(m, ncclGroupEnd());
    ZEN_RETURN_IF_ERROR(m->waitIssued("alltoallv (group)"));
  }
  m->add(alltoallvBytes(n, r, sendSizes, recvSizes));
  return Status::ok();
}

Status NcclComm::allgather(const void* send, void* recv, size_t bytesPerRank, cudaStream_t stream) {
  Impl* m = impl_.get();
  ZEN_RETURN_IF_ERROR(init());
  if (bytesPerRank == 0) return Status::ok();
  ZEN_CHECK_NCCL(m, ncclAllGather(send, recv, bytesPerRank, ncclUint8, m->comm, stream));
  ZEN_RETURN_IF_ERROR(m->waitIssued("ncclAllGather"));
  m->add(allgathervBytes(m->size, m->rank, bytesPerRank,
                         std::vector<size_t>(static_cast<size_t>(m->size), bytesPerRank)));
  return Status::ok();
}

Status NcclComm::allgatherCounts(uint64_t mine, std::vector<uint64_t>* all, cudaStream_t stream) {
  Impl* m = impl_.get();
  const int n = m->size;
  ZEN_RETURN_IF_ERROR(init());
  uint64_t* host = m->hostCounts.as<uint64_t>();
  uint64_t* dev = m->counts.as<uint64_t>();
  host[0] = mine;
  ZEN_CHECK_CUDA_COMM(m, cudaMemcpyAsync(dev + n + m->rank, host, sizeof(uint64_t),
                                         cudaMemcpyHostToDevice, stream));
  ZEN_CHECK_NCCL(m, ncclAllGather(dev + n + m->rank, dev + n, 1, ncclUint64, m->comm, stream));
  ZEN_RETURN_IF_ERROR(m->waitIssued("allgatherCounts"));
  ZEN_CHECK_CUDA_COMM(
      m, cudaMemcpyAsync(host + n, dev + n, n * sizeof(uint64_t), cudaMemcpyDeviceToHost, stream));
  ZEN_RETURN_IF_ERROR(wait(stream, "allgatherCounts"));
  all->assign(host + n, host + 2 * n);
  return Status::ok();
}

Status NcclComm::allgatherv(const void* send,
                            size_t sendBytes,
                            const std::vector<DeviceMutableBytes>& recvs,
                            cudaStream_t stream) {
  Impl* m = impl_.get();
  const int n = m->size;
  const int r = m->rank;
  std::vector<size_t> recvSizes;
  for (const auto& s : recvs) recvSizes.push_back(s.size);
  ZEN_RETURN_IF_ERROR(checkAllgathervSizes(n, r, sendBytes, recvSizes));
  ZEN_RETURN_IF_ERROR(init());
  if (sendBytes > 0 && recvs[r].data != send) {
    ZEN_CHECK_CUDA_COMM(
        m, cudaMemcpyAsync(recvs[r].data, send, sendBytes, cudaMemcpyDeviceToDevice, stream));
  }
  if (n > 1) {
    const void* sdata = send != nullptr ? send : m->dummy();
    ZEN_CHECK_NCCL(m, ncclGroupStart());
    for (int p = 0; p < n; ++p) {
      if (p == r) continue;
      void* rdata = recvs[p].data != nullptr ? recvs[p].data : m->dummy();
      ZEN_CHECK_NCCL_IN_GROUP(m, ncclSend(sdata, sendBytes, ncclUint8, p, m->comm, stream));
      ZEN_CHECK_NCCL_IN_GROUP(m, ncclRecv(rdata, recvs[p].size, ncclUint8, p, m->comm, stream));
    }
    ZEN_CHECK_NCCL(m, ncclGroupEnd());
    ZEN_RETURN_IF_ERROR(m->waitIssued("allgatherv (group)"));
  }
  m->add(allgathervBytes(n, r, sendBytes, recvSizes));
  return Status::ok();
}

Status NcclComm::allreduce(
    void* data, size_t count, DataType dtype, ReduceOp op, cudaStream_t stream) {
  Impl* m = impl_.get();
  ZEN_CHECK_ARG(data != nullptr || count == 0, "allreduce on rank {}: null buffer of {} elements",
                m->rank, count);
  ZEN_ASSIGN_OR_RETURN(const ncclDataType_t type, ncclType(dtype));
  ZEN_ASSIGN_OR_RETURN(const ncclRedOp_t red, ncclOp(op, dtype, m->rank, "allreduce"));
  ZEN_RETURN_IF_ERROR(init());
  if (count == 0) return Status::ok();
  ZEN_CHECK_NCCL(m, ncclAllReduce(data, data, count, type, red, m->comm, stream));
  ZEN_RETURN_IF_ERROR(m->waitIssued("ncclAllReduce"));
  if (dividesAfter(op, dtype, m->size)) {
    ZEN_RETURN_IF_ERROR(launchDivideIntegers(data, count, dtype, m->size, stream));
  }
  m->add(allreduceBytes(m->size, m->rank, count * dataTypeSize(dtype)));
  return Status::ok();
}

Status NcclComm::reducescatter(const void* send,
                               void* recv,
                               size_t countPerRank,
                               DataType dtype,
                               ReduceOp op,
                               cudaStream_t stream) {
  Impl* m = impl_.get();
  ZEN_CHECK_ARG((send != nullptr && recv != nullptr) || countPerRank == 0,
                "reducescatter on rank {}: null buffer of {} elements per rank", m->rank,
                countPerRank);
  ZEN_ASSIGN_OR_RETURN(const ncclDataType_t type, ncclType(dtype));
  ZEN_ASSIGN_OR_RETURN(const ncclRedOp_t red, ncclOp(op, dtype, m->rank, "reducescatter"));
  ZEN_RETURN_IF_ERROR(init());
  if (countPerRank == 0) return Status::ok();
  ZEN_CHECK_NCCL(m, ncclReduceScatter(send, recv, countPerRank, type, red, m->comm, stream));
  ZEN_RETURN_IF_ERROR(m->waitIssued("ncclReduceScatter"));
  if (dividesAfter(op, dtype, m->size)) {
    ZEN_RETURN_IF_ERROR(launchDivideIntegers(recv, countPerRank, dtype, m->size, stream));
  }
  m->add(reducescatterBytes(m->size, m->rank, countPerRank * dataTypeSize(dtype)));
  return Status::ok();
}

Status NcclComm::broadcast(void* data, size_t bytes, int root, cudaStream_t stream) {
  Impl* m = impl_.get();
  ZEN_CHECK_ARG(root >= 0 && root < m->size, "broadcast on rank {}: root {} outside [0, {})",
                m->rank, root, m->size);
  ZEN_RETURN_IF_ERROR(init());
  if (bytes == 0) return Status::ok();
  ZEN_CHECK_NCCL(m, ncclBroadcast(data, data, bytes, ncclUint8, root, m->comm, stream));
  ZEN_RETURN_IF_ERROR(m->waitIssued("ncclBroadcast"));
  m->add(broadcastBytes(m->size, m->rank, bytes, root));
  return Status::ok();
}

void NcclComm::requestAbort(const Status& why) {
  impl_->endRequest.request(why, EndRequest::Kind::kAbort);
}

void NcclComm::requestFail(const Status& why) {
  impl_->endRequest.request(why, EndRequest::Kind::kFail);
}

ops::TransportCounters NcclComm::counters() const {
  ops::TransportCounters c;
  for (int p = 0; p < impl_->size; ++p) {
    c.bytesSent.push_back(impl_->sent[p].load());
    c.bytesReceived.push_back(impl_->received[p].load());
  }
  return c;
}

void NcclComm::resetCounters() {
  for (int p = 0; p < impl_->size; ++p) impl_->sent[p] = impl_->received[p] = 0;
}

int ncclBuildVersion() {
  return NCCL_VERSION_CODE;
}

}  // namespace zen::cuda
