// The C API over the process's Api (bindings/c_api.h).
#include "bindings/c_api.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "bindings/api.h"

#ifdef ZEN_HAVE_NCCL
#include "cuda/nccl_comm.h"  // ncclBuildVersion
#endif

namespace zen::bindings {
namespace {

static_assert(static_cast<int>(StatusCode::kInvalidArgument) == ZEN_INVALID_ARGUMENT &&
                  static_cast<int>(StatusCode::kOutOfRange) == ZEN_OUT_OF_RANGE &&
                  static_cast<int>(StatusCode::kFailedPrecondition) == ZEN_FAILED_PRECONDITION &&
                  static_cast<int>(StatusCode::kTimeout) == ZEN_TIMEOUT &&
                  static_cast<int>(StatusCode::kIoError) == ZEN_IO_ERROR &&
                  static_cast<int>(StatusCode::kAborted) == ZEN_ABORTED &&
                  static_cast<int>(StatusCode::kInternal) == ZEN_INTERNAL &&
                  static_cast<int>(StatusCode::kUnimplemented) == ZEN_UNIMPLEMENTED,
              "zen_code_t mirrors zen::StatusCode");
static_assert(static_cast<int>(DataType::kFloat32) == ZEN_FLOAT32 &&
                  static_cast<int>(DataType::kFloat16) == ZEN_FLOAT16 &&
                  static_cast<int>(DataType::kBFloat16) == ZEN_BFLOAT16 &&
                  static_cast<int>(DataType::kFloat64) == ZEN_FLOAT64 &&
                  static_cast<int>(DataType::kInt32) == ZEN_INT32 &&
                  static_cast<int>(DataType::kInt64) == ZEN_INT64,
              "zen_dtype_t mirrors zen::DataType");

Api& api() {
  return processApi();
}

int fail(int code, const std::string& message) {
  api().setLastError(message);
  return code;
}

int fail(const Status& status) {
  return fail(static_cast<int>(status.code()), status.message());
}

int check(const Status& status) {
  return status.isOk() ? ZEN_OK : fail(status);
}

// Not initialized is its own code; everything else the status says.
int failCall(const Status& status) {
  if (!api().initialized()) return fail(ZEN_NOT_INITIALIZED, status.message());
  return fail(status);
}

int failUnknown(const Status& status) {
  return fail(ZEN_UNKNOWN_HANDLE, status.message());
}

Result<DataType> dtypeOf(int32_t dtype) {
  ZEN_CHECK_ARG(dtype >= ZEN_FLOAT32 && dtype <= ZEN_INT64,
                "unknown dtype code {} (zen_dtype_t: 0..5)", dtype);
  return static_cast<DataType>(dtype);
}

Result<ReduceOp> reduceOpOf(int32_t op) {
  ZEN_CHECK_ARG(op >= ZEN_SUM && op <= ZEN_ADASUM,
                "unknown reduce op {} (zen_reduce_op_t: ZEN_SUM, ZEN_AVERAGE, ZEN_MIN, ZEN_MAX, "
                "ZEN_PRODUCT or ZEN_ADASUM, 0..5)",
                op);
  static_assert(ZEN_SUM == static_cast<int>(ReduceOp::kSum) &&
                    ZEN_AVERAGE == static_cast<int>(ReduceOp::kAverage) &&
                    ZEN_MIN == static_cast<int>(ReduceOp::kMin) &&
                    ZEN_MAX == static_cast<int>(ReduceOp::kMax) &&
                    ZEN_PRODUCT == static_cast<int>(ReduceOp::kProduct) &&
                    ZEN_ADASUM == static_cast<int>(ReduceOp::kAdasum),
                "zen_reduce_op_t mirrors zen::ReduceOp");
  return static_cast<ReduceOp>(op);
}

Result<Device> deviceOf(int32_t type, int32_t index, const char* what) {
  ZEN_CHECK_ARG(type == ZEN_DEVICE_CPU || type == ZEN_DEVICE_CUDA,
                "{} tensor: unknown device type {} (ZEN_DEVICE_CPU or ZEN_DEVICE_CUDA)", what,
                type);
  if (type == ZEN_DEVICE_CPU) return Device::cpu();
  ZEN_CHECK_ARG(index >= 0, "{} tensor: CUDA device index {}", what, index);
  return Device::cuda(index);
}

Result<DenseView> denseOf(const zen_tensor_t* t, const char* what) {
  ZEN_CHECK_ARG(t != nullptr, "no {} tensor", what);
  ZEN_CHECK_ARG(t->ndims >= 0 && (t->ndims == 0 || t->shape != nullptr),
                "{} tensor: {} dimensions and {} shape", what, t->ndims, t->shape ? "a" : "no");
  DenseView v;
  v.data = t->data;
  ZEN_ASSIGN_OR_RETURN(v.device, deviceOf(t->device_type, t->device_index, what));
  ZEN_ASSIGN_OR_RETURN(v.dtype, dtypeOf(t->dtype));
  v.shape = TensorShape(std::vector<int64_t>(t->shape, t->shape + t->ndims));
  return v;
}

Result<std::string> nameOf(const char* name) {
  ZEN_CHECK_ARG(name != nullptr && name[0] != '\0', "an operation needs a name");
  return std::string(name);
}

// The operation op describes, over every rank (opOf puts it in its process set).
Result<TensorOp> globalOpOf(const zen_op_t& op) {
  switch (op.kind) {
    case ZEN_OP_ALLREDUCE: {
      ZEN_ASSIGN_OR_RETURN(std::string name, nameOf(op.name));
      ZEN_ASSIGN_OR_RETURN(DenseView in, denseOf(&op.input, "input"));
      ZEN_ASSIGN_OR_RETURN(DenseView out, denseOf(&op.output, "output"));
      ZEN_ASSIGN_OR_RETURN(ReduceOp reduce, reduceOpOf(op.reduce_op));
      return TensorOp::allreduce(std::move(name), in, out, reduce)
          .withReady({op.input.ready_event, op.input.stream});
    }
    case ZEN_OP_SPARSE_ALLREDUCE: {
      ZEN_ASSIGN_OR_RETURN(std::string name, nameOf(op.name));
      ZEN_ASSIGN_OR_RETURN(ReduceOp reduce, reduceOpOf(op.reduce_op));
      SparseView s;
      s.indices = op.sparse.indices;
      s.values = op.sparse.values;
      s.nnz = op.sparse.nnz;
      s.numRows = op.sparse.num_rows;
      s.rowSize = op.sparse.row_size;
      ZEN_ASSIGN_OR_RETURN(s.dtype, dtypeOf(op.sparse.dtype));
      ZEN_ASSIGN_OR_RETURN(s.device,
                           deviceOf(op.sparse.device_type, op.sparse.device_index, "sparse"));
      DenseView out;
      if (op.dense_output.data != nullptr) {
        ZEN_ASSIGN_OR_RETURN(out, denseOf(&op.dense_output, "dense output"));
      }
      return TensorOp::sparseAllreduce(std::move(name), s, reduce, out)
          .withReady({op.sparse.ready_event, op.sparse.stream});
    }
    case ZEN_OP_ALLGATHER: {
      ZEN_ASSIGN_OR_RETURN(std::string name, nameOf(op.name));
      ZEN_ASSIGN_OR_RETURN(DenseView in, denseOf(&op.input, "input"));
      ZEN_CHECK_ARG(in.shape.rank() >= 1, "allgather '{}': a tensor of at least one dimension",
                    name);
      return TensorOp::allgather(std::move(name), in)
          .withReady({op.input.ready_event, op.input.stream});
    }
    case ZEN_OP_BROADCAST: {
      ZEN_ASSIGN_OR_RETURN(std::string name, nameOf(op.name));
      ZEN_ASSIGN_OR_RETURN(DenseView t, denseOf(&op.input, "broadcast"));
      return TensorOp::broadcast(std::move(name), t, op.root_rank)
          .withReady({op.input.ready_event, op.input.stream});
    }
    case ZEN_OP_ALLTOALL: {
      ZEN_ASSIGN_OR_RETURN(std::string name, nameOf(op.name));
      ZEN_ASSIGN_OR_RETURN(DenseView in, denseOf(&op.input, "input"));
      ZEN_CHECK_ARG(in.shape.rank() >= 1, "alltoall '{}': a tensor of at least one dimension",
                    name);
      ZEN_CHECK_ARG(op.num_splits >= 0 && (op.splits != nullptr || op.num_splits == 0),
                    "alltoall '{}': {} splits at {}", name, op.num_splits,
                    op.splits ? "an address" : "NULL");
      std::vector<int64_t> splits(op.splits, op.splits + op.num_splits);
      return TensorOp::alltoall(std::move(name), in, std::move(splits))
          .withReady({op.input.ready_event, op.input.stream});
    }
    case ZEN_OP_REDUCESCATTER: {
      ZEN_ASSIGN_OR_RETURN(std::string name, nameOf(op.name));
      ZEN_ASSIGN_OR_RETURN(DenseView in, denseOf(&op.input, "input"));
      ZEN_ASSIGN_OR_RETURN(DenseView out, denseOf(&op.output, "output"));
      ZEN_ASSIGN_OR_RETURN(ReduceOp reduce, reduceOpOf(op.reduce_op));
      return TensorOp::reducescatter(std::move(name), in, out, reduce)
          .withReady({op.input.ready_event, op.input.stream});
    }
    case ZEN_OP_JOIN:
      return TensorOp::join();
    case ZEN_OP_BARRIER:
      return TensorOp::barrier();
    default:
      return ZEN_ERROR(StatusCode::kInvalidArgument, "unknown operation kind {} (zen_op_kind_t)",
                       op.kind);
  }
}

Result<TensorOp> opOf(const zen_op_t& op) {
  ZEN_CHECK_ARG(op.kind != ZEN_OP_JOIN || op.process_set == kGlobalProcessSet,
                "join runs over every rank: process set {} given", op.process_set);
  ZEN_ASSIGN_OR_RETURN(TensorOp out, globalOpOf(op));
  out.inProcessSet(op.process_set);
  return out;
}

Completion completionOf(zen_completion_t done) {
  if (done.fn == nullptr) return {};
  return [done](int64_t id, const Status& status) {
    done.fn(id, static_cast<int32_t>(status.code()), status.message().c_str(), done.user_data);
  };
}

int enqueueOps(const zen_op_t* ops, int32_t count, zen_handle_t* handles) {
  if (handles == nullptr) return fail(ZEN_INVALID_ARGUMENT, "no place for the handles");
  if (ops == nullptr || count <= 0) {
    return fail(ZEN_INVALID_ARGUMENT, "zen_enqueue_group needs at least one operation");
  }
  std::vector<TensorOp> tensorOps;
  std::vector<Completion> completions;
  for (int32_t i = 0; i < count; ++i) {
    Result<TensorOp> op = opOf(ops[i]);
    if (!op.isOk()) return fail(op.status());
    tensorOps.push_back(std::move(op).value());
    completions.push_back(completionOf(ops[i].done));
  }
  Result<std::vector<int64_t>> ids = api().enqueue(std::move(tensorOps), std::move(completions));
  if (!ids.isOk()) return failCall(ids.status());
  for (int32_t i = 0; i < count; ++i) handles[i] = ids.value()[static_cast<size_t>(i)];
  return ZEN_OK;
}

zen_op_t blankOp(int32_t kind, const char* name, zen_completion_t done) {
  zen_op_t op;
  std::memset(&op, 0, sizeof(op));
  op.kind = kind;
  op.name = name;
  op.done = done;
  return op;
}

// An operation of an input, an output and a reduce op (allreduce, reducescatter).
int enqueueReduction(int32_t kind,
                     const char* what,
                     const char* name,
                     const zen_tensor_t* input,
                     const zen_tensor_t* output,
                     int32_t reduceOp,
                     zen_completion_t done,
                     zen_handle_t* handle) {
  if (input == nullptr || output == nullptr) {
    return fail(ZEN_INVALID_ARGUMENT, std::string(what) + " needs an input and an output tensor");
  }
  zen_op_t op = blankOp(kind, name, done);
  op.input = *input;
  op.output = *output;
  op.reduce_op = reduceOp;
  return enqueueOps(&op, 1, handle);
}

// get(placement) as an int, or -1 (ZEN_NOT_INITIALIZED) before init.
template <typename Get>
int placementValue(Get get) {
  Result<Placement> p = api().placement();
  if (!p.isOk()) {
    fail(ZEN_NOT_INITIALIZED, p.status().message());
    return -1;
  }
  return static_cast<int>(get(p.value()));
}

int placementField(int Placement::*field) {
  return placementValue([field](const Placement& p) { return p.*field; });
}

// The knobs a runtime started with, in Zen's units: what a ZEN_* variable, a HOROVOD_* alias
// or a zenrun flag set, as the ranks see it.
nlohmann::json configJson(const Config& c) {
  nlohmann::json j;
  j["fusion_threshold_bytes"] = c.fusionThresholdBytes;
  j["cycle_time_ms"] = c.cycleTimeMs;
  j["cache_capacity"] = c.cacheCapacity;
  j["timeline"] = c.timeline;
  j["timeline_mark_cycles"] = c.timelineMarkCycles;
  j["autotune"] = c.autotune;
  j["stall_check_time_seconds"] = c.stallCheckSeconds;
  j["stall_shutdown_time_seconds"] = c.stallShutdownSeconds;
  j["timeout_seconds"] = c.timeoutSeconds;
  j["log_level"] = c.logLevel;
  j["scheme"] = schemeName(c.scheme);
  return j;
}

nlohmann::json statsJson(const RuntimeStats& s) {
  nlohmann::json j;
  j["cycles"] = s.cycles;
  j["fast_path_cycles"] = s.fastPathCycles;
  j["slow_path_cycles"] = s.slowPathCycles;
  j["cache_hits"] = s.cacheHits;
  j["buckets_executed"] = s.bucketsExecuted;
  j["tensors_executed"] = s.tensorsExecuted;
  j["completed"] = s.completed;
  j["failed"] = s.failed;
  j["bytes_sent"] = s.bytesSent;
  j["bytes_received"] = s.bytesReceived;
  j["phase_seconds"] = s.phaseSeconds;
  j["buckets_by_scheme"] = s.bucketsByScheme;
  j["max_imbalance"] = s.maxImbalance;
  j["stall_warnings"] = s.stallWarnings;
  j["last_stall_warning"] = s.lastStallWarning;
  j["parameter_updates"] = s.parameterUpdates;
  if (s.tunedParameters) {
    j["tuned_parameters"] = {{"fusion_threshold_bytes", s.tunedParameters->fusionThresholdBytes},
                             {"cycle_time_ms", s.tunedParameters->cycleTimeMs}};
  } else {
    j["tuned_parameters"] = nullptr;
  }
  nlohmann::json tensors = nlohmann::json::object();
  for (const auto& [name, t] : s.tensors) {
    nlohmann::json e;
    e["completed"] = t.completed;
    e["failed"] = t.failed;
    e["cache_hits"] = t.cacheHits;
    e["bytes_sent"] = t.bytesSent;
    e["bytes_received"] = t.bytesReceived;
    e["phase_seconds"] = t.phaseSeconds;
    e["last_scheme"] = t.lastScheme;
    e["last_imbalance"] = t.lastImbalance;
    e["last_nnz"] = t.lastNnz;
    e["last_bucket"] = t.lastBucket;
    e["last_bucket_size"] = t.lastBucketSize;
    tensors[name] = std::move(e);
  }
  j["tensors"] = std::move(tensors);
  return j;
}

}  // namespace
}  // namespace zen::bindings

using zen::bindings::api;
using zen::bindings::check;
using zen::bindings::fail;
using zen::bindings::Placement;

extern "C" {

int zen_init(void) {
  return check(api().init());
}

int zen_shutdown(void) {
  return check(api().shutdown());
}

int zen_is_initialized(void) {
  return api().initialized() ? 1 : 0;
}

int zen_rank(void) {
  return zen::bindings::placementField(&Placement::rank);
}
int zen_size(void) {
  return zen::bindings::placementField(&Placement::size);
}
int zen_local_rank(void) {
  return zen::bindings::placementField(&Placement::localRank);
}
int zen_local_size(void) {
  return zen::bindings::placementField(&Placement::localSize);
}
int zen_cross_rank(void) {
  return zen::bindings::placementField(&Placement::crossRank);
}
int zen_cross_size(void) {
  return zen::bindings::placementField(&Placement::crossSize);
}
int zen_is_homogeneous(void) {
  return zen::bindings::placementValue([](const Placement& p) { return p.launch.homogeneous; });
}
int zen_mpi_threads_supported(void) {
  return zen::bindings::placementValue(
      [](const Placement& p) { return p.launch.mpiThreadsSupported; });
}

const char* zen_backend(void) {
  auto p = api().placement();
  if (!p.isOk()) return "";
  static const char* const kNames[] = {"tcp", "mpi", "in-process"};
  for (const char* name : kNames) {
    if (p.value().backend == name) return name;
  }
  return "unknown";
}

const char* zen_version(void) {
  return ZEN_VERSION_STRING;
}

int zen_cuda_built(void) {
#ifdef ZEN_HAVE_NCCL
  return 1;
#else
  return 0;
#endif
}

int zen_mpi_built(void) {
#ifdef ZEN_HAVE_MPI
  return 1;
#else
  return 0;
#endif
}

int zen_nccl_built(void) {
#ifdef ZEN_HAVE_NCCL
  return zen::cuda::ncclBuildVersion();
#else
  return 0;
#endif
}

const char* zen_last_error(void) {
  return api().lastError();
}

int zen_enqueue_allreduce(const char* name,
                          const zen_tensor_t* input,
                          const zen_tensor_t* output,
                          int32_t reduce_op,
                          zen_completion_t done,
                          zen_handle_t* handle) {
  return zen::bindings::enqueueReduction(ZEN_OP_ALLREDUCE, "allreduce", name, input, output,
                                         reduce_op, done, handle);
}

int zen_enqueue_sparse_allreduce(const char* name,
                                 const zen_sparse_tensor_t* input,
                                 int32_t reduce_op,
                                 const zen_tensor_t* dense_output,
                                 zen_completion_t done,
                                 zen_handle_t* handle) {
  if (input == nullptr) return fail(ZEN_INVALID_ARGUMENT, "sparse allreduce needs an input");
  zen_op_t op = zen::bindings::blankOp(ZEN_OP_SPARSE_ALLREDUCE, name, done);
  op.sparse = *input;
  if (dense_output != nullptr) {
    if (dense_output->data == nullptr) {
      return fail(ZEN_INVALID_ARGUMENT, "the dense output of sparse allreduce has no data");
    }
    op.dense_output = *dense_output;
  }
  op.reduce_op = reduce_op;
  return zen::bindings::enqueueOps(&op, 1, handle);
}

int zen_enqueue_allgather(const char* name,
                          const zen_tensor_t* input,
                          zen_completion_t done,
                          zen_handle_t* handle) {
  if (input == nullptr) return fail(ZEN_INVALID_ARGUMENT, "allgather needs an input tensor");
  zen_op_t op = zen::bindings::blankOp(ZEN_OP_ALLGATHER, name, done);
  op.input = *input;
  return zen::bindings::enqueueOps(&op, 1, handle);
}

int zen_enqueue_broadcast(const char* name,
                          const zen_tensor_t* tensor,
                          int32_t root_rank,
                          zen_completion_t done,
                          zen_handle_t* handle) {
  if (tensor == nullptr) return fail(ZEN_INVALID_ARGUMENT, "broadcast needs a tensor");
  zen_op_t op = zen::bindings::blankOp(ZEN_OP_BROADCAST, name, done);
  op.input = *tensor;
  op.root_rank = root_rank;
  return zen::bindings::enqueueOps(&op, 1, handle);
}

int zen_enqueue_alltoall(const char* name,
                         const zen_tensor_t* input,
                         const int64_t* splits,
                         int32_t num_splits,
                         zen_completion_t done,
                         zen_handle_t* handle) {
  if (input == nullptr) return fail(ZEN_INVALID_ARGUMENT, "alltoall needs an input tensor");
  zen_op_t op = zen::bindings::blankOp(ZEN_OP_ALLTOALL, name, done);
  op.input = *input;
  op.splits = splits;
  op.num_splits = num_splits;
  return zen::bindings::enqueueOps(&op, 1, handle);
}

int zen_enqueue_reducescatter(const char* name,
                              const zen_tensor_t* input,
                              const zen_tensor_t* output,
                              int32_t reduce_op,
                              zen_completion_t done,
                              zen_handle_t* handle) {
  return zen::bindings::enqueueReduction(ZEN_OP_REDUCESCATTER, "reducescatter", name, input, output,
                                         reduce_op, done, handle);
}

int64_t zen_reducescatter_rows(int64_t rows, int32_t rank, int32_t size) {
  if (rows < 0 || size < 1 || rank < 0 || rank >= size) {
    fail(ZEN_INVALID_ARGUMENT, "zen_reducescatter_rows(" + std::to_string(rows) + ", " +
                                   std::to_string(rank) + ", " + std::to_string(size) +
                                   "): rows >= 0 and a rank of [0, size)");
    return -1;
  }
  return zen::scatterRows(rows, size, rank);
}

int zen_enqueue_join(zen_completion_t done, zen_handle_t* handle) {
  zen_op_t op = zen::bindings::blankOp(ZEN_OP_JOIN, nullptr, done);
  return zen::bindings::enqueueOps(&op, 1, handle);
}

int zen_enqueue_barrier(zen_completion_t done, zen_handle_t* handle) {
  zen_op_t op = zen::bindings::blankOp(ZEN_OP_BARRIER, nullptr, done);
  return zen::bindings::enqueueOps(&op, 1, handle);
}

int zen_enqueue_group(const zen_op_t* ops, int32_t count, zen_handle_t* handles) {
  return zen::bindings::enqueueOps(ops, count, handles);
}

int zen_add_process_set(const int32_t* ranks, int32_t count, int32_t* id) {
  if (id == nullptr) return fail(ZEN_INVALID_ARGUMENT, "no place for the process set's id");
  if (count < 0 || (count > 0 && ranks == nullptr)) {
    return fail(ZEN_INVALID_ARGUMENT, "zen_add_process_set: " + std::to_string(count) +
                                          " ranks at " + (ranks ? "an address" : "NULL"));
  }
  auto r = api().addProcessSet(std::vector<int32_t>(ranks, ranks + count));
  if (!r.isOk()) return zen::bindings::failCall(r.status());
  *id = r.value();
  return ZEN_OK;
}

int zen_remove_process_set(int32_t id) {
  const zen::Status status = api().removeProcessSet(id);
  return status.isOk() ? ZEN_OK : zen::bindings::failCall(status);
}

int zen_process_set_ranks(int32_t id, int32_t* ranks, int32_t capacity, int32_t* count) {
  if (count == nullptr) return fail(ZEN_INVALID_ARGUMENT, "no place for the rank count");
  if (capacity < 0 || (capacity > 0 && ranks == nullptr)) {
    return fail(ZEN_INVALID_ARGUMENT, "zen_process_set_ranks: room for " +
                                          std::to_string(capacity) + " ranks at " +
                                          (ranks ? "an address" : "NULL"));
  }
  auto r = api().processSetRanks(id);
  if (!r.isOk()) return zen::bindings::failCall(r.status());
  const std::vector<int32_t>& members = r.value();
  *count = static_cast<int32_t>(members.size());
  std::copy_n(members.begin(), std::min(members.size(), static_cast<size_t>(capacity)), ranks);
  return ZEN_OK;
}

int zen_poll(zen_handle_t handle, int* done) {
  if (done == nullptr) return fail(ZEN_INVALID_ARGUMENT, "zen_poll needs a place for the answer");
  auto r = api().poll(handle);
  if (!r.isOk()) return zen::bindings::failUnknown(r.status());
  *done = r.value() ? 1 : 0;
  return ZEN_OK;
}

int zen_wait(zen_handle_t handle, double timeout_seconds) {
  bool finished = false;
  const zen::Status status = api().wait(handle, timeout_seconds, &finished);
  if (!finished) {
    if (!status.isOk()) return zen::bindings::failUnknown(status);
    return fail(ZEN_PENDING, "operation " + std::to_string(handle) + " still pending after " +
                                 std::to_string(timeout_seconds) + " s");
  }
  return check(status);
}

int zen_release(zen_handle_t handle) {
  const zen::Status status = api().release(handle);
  return status.isOk() ? ZEN_OK : zen::bindings::failUnknown(status);
}

int zen_sparse_result(zen_handle_t handle, zen_sparse_result_t* result) {
  int32_t deviceType = ZEN_DEVICE_CPU;
  int32_t deviceIndex = 0;
  const int code = zen_sparse_result_placed(handle, result, &deviceType, &deviceIndex);
  if (code != ZEN_OK || deviceType == ZEN_DEVICE_CPU) return code;
  *result = zen_sparse_result_t{};
  return fail(ZEN_INVALID_ARGUMENT, "the sparse result of operation " + std::to_string(handle) +
                                        " is on cuda:" + std::to_string(deviceIndex) +
                                        " (CUDA inputs); read it with zen_sparse_result_placed");
}

int zen_sparse_result_placed(zen_handle_t handle,
                             zen_sparse_result_t* result,
                             int32_t* device_type,
                             int32_t* device_index) {
  if (result == nullptr) return fail(ZEN_INVALID_ARGUMENT, "no place for the sparse result");
  auto r = api().result(handle);
  if (!r.isOk()) {
    return r.status().code() == zen::StatusCode::kInvalidArgument
               ? zen::bindings::failUnknown(r.status())
               : fail(r.status());
  }
  const zen::OpResult& o = *r.value();
  const zen::SparseTensor& s = o.sparse;
  const bool onDevice = o.sparseDevice.kind == zen::Device::Kind::kCuda;
  result->indices =
      onDevice ? static_cast<const int64_t*>(o.sparseIndicesOnDevice.get()) : s.indices.data();
  result->values = onDevice ? o.sparseValuesOnDevice.get() : s.values.data();
  result->nnz = onDevice ? o.sparseDeviceNnz : s.nnz();
  result->num_rows = s.numRows;
  result->row_size = s.rowSize;
  result->dtype = static_cast<int32_t>(s.dtype);
  if (device_type != nullptr) *device_type = onDevice ? ZEN_DEVICE_CUDA : ZEN_DEVICE_CPU;
  if (device_index != nullptr) *device_index = onDevice ? o.sparseDevice.index : 0;
  return ZEN_OK;
}

int zen_allgather_result(zen_handle_t handle, zen_gathered_t* result) {
  if (result == nullptr) return fail(ZEN_INVALID_ARGUMENT, "no place for the gathered tensor");
  auto r = api().result(handle);
  if (!r.isOk()) {
    return r.status().code() == zen::StatusCode::kInvalidArgument
               ? zen::bindings::failUnknown(r.status())
               : fail(r.status());
  }
  const zen::OpResult& o = *r.value();
  const bool onDevice = o.gatheredDevice.kind == zen::Device::Kind::kCuda;
  result->data = onDevice ? o.gatheredOnDevice.get() : o.gathered.data();
  result->bytes = onDevice ? o.gatheredDeviceBytes : o.gathered.size();
  result->ndims = o.gatheredShape.rank();
  result->shape = o.gatheredShape.dims().data();
  result->device_type = onDevice ? ZEN_DEVICE_CUDA : ZEN_DEVICE_CPU;
  result->device_index = onDevice ? o.gatheredDevice.index : 0;
  return ZEN_OK;
}

int zen_alltoall_result(zen_handle_t handle, zen_alltoall_result_t* result) {
  if (result == nullptr) return fail(ZEN_INVALID_ARGUMENT, "no place for the alltoall result");
  const int code = zen_allgather_result(handle, &result->output);
  if (code != ZEN_OK) return code;
  const zen::OpResult& o = *api().result(handle).value();
  result->received_splits = o.receivedSplits.data();
  result->num_ranks = static_cast<int32_t>(o.receivedSplits.size());
  return ZEN_OK;
}

int zen_join_result(zen_handle_t handle, int32_t* last_joined_rank) {
  if (last_joined_rank == nullptr) return fail(ZEN_INVALID_ARGUMENT, "no place for the rank");
  auto r = api().result(handle);
  if (!r.isOk()) {
    return r.status().code() == zen::StatusCode::kInvalidArgument
               ? zen::bindings::failUnknown(r.status())
               : fail(r.status());
  }
  *last_joined_rank = r.value()->lastJoinedRank;
  return ZEN_OK;
}

int zen_stats(zen_stats_t* stats) {
  if (stats == nullptr) return fail(ZEN_INVALID_ARGUMENT, "no place for the stats");
  auto r = api().stats();
  if (!r.isOk()) return zen::bindings::failCall(r.status());
  const zen::RuntimeStats& s = r.value();
  stats->cycles = s.cycles;
  stats->fast_path_cycles = s.fastPathCycles;
  stats->slow_path_cycles = s.slowPathCycles;
  stats->cache_hits = s.cacheHits;
  stats->buckets_executed = s.bucketsExecuted;
  stats->tensors_executed = s.tensorsExecuted;
  stats->completed = s.completed;
  stats->failed = s.failed;
  stats->bytes_sent = s.bytesSent;
  stats->bytes_received = s.bytesReceived;
  stats->stall_warnings = s.stallWarnings;
  stats->max_imbalance = s.maxImbalance;
  return ZEN_OK;
}

int zen_stats_json(char** json) {
  if (json == nullptr) return fail(ZEN_INVALID_ARGUMENT, "no place for the stats");
  auto r = api().stats();
  if (!r.isOk()) return zen::bindings::failCall(r.status());
  auto config = api().config();
  if (!config.isOk()) return zen::bindings::failCall(config.status());
  nlohmann::json j = zen::bindings::statsJson(r.value());
  j["config"] = zen::bindings::configJson(config.value());
  const std::string text = j.dump();
  char* out = static_cast<char*>(std::malloc(text.size() + 1));
  if (out == nullptr) return fail(ZEN_INTERNAL, "out of memory for the stats");
  std::memcpy(out, text.c_str(), text.size() + 1);
  *json = out;
  return ZEN_OK;
}

void zen_free(void* pointer) {
  std::free(pointer);
}

int zen_start_timeline(const char* path, int mark_cycles) {
  const zen::Status status = api().startTimeline(path ? path : "", mark_cycles != 0);
  return status.isOk() ? ZEN_OK : zen::bindings::failCall(status);
}

int zen_stop_timeline(void) {
  const zen::Status status = api().stopTimeline();
  return status.isOk() ? ZEN_OK : zen::bindings::failCall(status);
}

}  // extern "C"
