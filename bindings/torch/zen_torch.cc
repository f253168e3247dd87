// zen.torch's C++ extension (module zen.torch._zen_torch): torch tensors in, Zen's C API
// (bindings/c_api.h, libzen.so) underneath. Framework ops only post requests: every
// *_async function hands the tensor's memory to the daemon as it is (no copy, host or CUDA;
// Python keeps the tensors alive until synchronize) and returns the handle; wait() blocks
// with the GIL released. Compiles against a CPU-only torch (no CUDA headers needed). Outputs the
// daemon allocates (sparse result, gathered tensor, alltoall's output) become torch tensors
// over the daemon's memory,
// which is released with the last of them; the gathered tensor and the sparse result of CUDA
// inputs are device memory (CUDA tensors over it: zen.torch copies them into tensors of
// torch's allocator, device to device).
//
// Errors: enqueue failures raise ValueError for bad arguments (a name in flight, an
// unsupported dtype, not initialized) and RuntimeError otherwise; a failed operation raises
// RuntimeError with the daemon's message from wait() (zen.torch turns it into
// HorovodInternalError, a RuntimeError, as horovod.torch does).
#include <torch/extension.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "bindings/c_api.h"

namespace {

[[noreturn]] void raiseEnqueueError(int code) {
  const std::string message = zen_last_error();
  if (code == ZEN_INVALID_ARGUMENT || code == ZEN_NOT_INITIALIZED) {
    throw std::invalid_argument(message);
  }
  throw std::runtime_error(message);
}

void checkEnqueue(int code) {
  if (code != ZEN_OK) raiseEnqueueError(code);
}

int32_t dtypeOf(const torch::Tensor& t) {
  switch (t.scalar_type()) {
    case torch::kFloat32:
      return ZEN_FLOAT32;
    case torch::kFloat16:
      return ZEN_FLOAT16;
    case torch::kBFloat16:
      return ZEN_BFLOAT16;
    case torch::kFloat64:
      return ZEN_FLOAT64;
    case torch::kInt32:
      return ZEN_INT32;
    case torch::kInt64:
      return ZEN_INT64;
    default:
      throw std::invalid_argument(std::string("Tensor type ") + t.toString() +
                                  " is not supported by zen (float32, float16, bfloat16, "
                                  "float64, int32, int64).");
  }
}

torch::ScalarType scalarTypeOf(int32_t dtype) {
  switch (dtype) {
    case ZEN_FLOAT16:
      return torch::kFloat16;
    case ZEN_BFLOAT16:
      return torch::kBFloat16;
    case ZEN_FLOAT64:
      return torch::kFloat64;
    case ZEN_INT32:
      return torch::kInt32;
    case ZEN_INT64:
      return torch::kInt64;
    default:
      return torch::kFloat32;
  }
}

// Host or CUDA memory, handed to the daemon as it is (no copy). A CUDA tensor's readiness is
// the work queued so far on `stream` (torch.cuda.current_stream().cuda_stream, from Python):
// the daemon records an event there during the enqueue. A zen build without CUDA refuses it.
struct Placement {
  int32_t type = ZEN_DEVICE_CPU;
  int32_t index = 0;
};

// The C API's stream for a CUDA tensor's readiness. torch's default stream has cuda_stream 0,
// the legacy default stream, but a NULL stream tells zen "ready at once" and the daemon's
// non-blocking stream does not wait for the legacy one: 0 becomes cudaStreamLegacy (0x1; no
// CUDA headers here), on which the daemon records its ready event like on any other.
void* readyStream(int64_t stream) {
  return reinterpret_cast<void*>(stream != 0 ? stream : 0x1);
}

Placement placementOf(const torch::Tensor& t, const char* what) {
  if (!t.is_contiguous()) throw std::invalid_argument(std::string(what) + " is not contiguous");
  if (t.device().is_cpu()) return {};
  if (t.is_cuda()) return {ZEN_DEVICE_CUDA, static_cast<int32_t>(t.device().index())};
  throw std::invalid_argument(std::string(what) + " is on " + t.device().str() +
                              "; zen.torch synchronizes CPU and CUDA tensors");
}

// A view of a tensor for the C API; the shape lives as long as the view.
struct TensorArg {
  std::vector<int64_t> shape;
  zen_tensor_t c{};

  TensorArg(const torch::Tensor& t, const char* what, int64_t stream = 0) {
    const Placement p = placementOf(t, what);
    shape = t.sizes().vec();
    c.data = t.data_ptr();
    c.dtype = dtypeOf(t);
    c.ndims = static_cast<int32_t>(shape.size());
    c.shape = shape.data();
    c.device_type = p.type;
    c.device_index = p.index;
    if (p.type == ZEN_DEVICE_CUDA) c.stream = readyStream(stream);
  }
};

// Releases the handle when the last tensor over its outputs is freed.
struct HandleGuard {
  explicit HandleGuard(zen_handle_t h) : handle(h) {}
  ~HandleGuard() { zen_release(handle); }
  HandleGuard(const HandleGuard&) = delete;
  HandleGuard& operator=(const HandleGuard&) = delete;
  zen_handle_t handle;
};

// device: host, or the CUDA device the daemon's memory is on (results of CUDA inputs).
torch::Tensor overDaemonMemory(const void* data,
                               std::vector<int64_t> sizes,
                               torch::ScalarType type,
                               const std::shared_ptr<HandleGuard>& guard,
                               torch::Device device = torch::kCPU) {
  int64_t count = 1;
  for (int64_t s : sizes) count *= s;
  const auto options = torch::dtype(type).device(device);
  if (count == 0 || data == nullptr) return torch::empty(sizes, options);
  return torch::from_blob(
      const_cast<void*>(data), sizes, [guard](void*) {}, options);
}

// One operation of `kind` named name (whose string outlives the enqueue).
zen_op_t opOf(int32_t kind, const std::string& name, int32_t processSet) {
  zen_op_t op{};
  op.kind = kind;
  op.name = name.c_str();
  op.process_set = processSet;
  return op;
}

// Posts one operation: through zen_enqueue_group, whose zen_op_t names the process set (the
// single-operation C functions run over every rank).
int64_t enqueueOne(const zen_op_t& op) {
  zen_handle_t h = 0;
  checkEnqueue(zen_enqueue_group(&op, 1, &h));
  return h;
}

// processSet (every function below): the id of the set the operation runs over, 0 for every
// rank; rank numbers (root, splits) are then within the set.
int64_t allreduceAsync(const std::string& name,
                       const torch::Tensor& input,
                       const torch::Tensor& output,
                       int32_t op,
                       int64_t stream,
                       int32_t processSet) {
  TensorArg in(input, "allreduce input", stream);
  TensorArg out(output, "allreduce output");
  zen_op_t o = opOf(ZEN_OP_ALLREDUCE, name, processSet);
  o.input = in.c;
  o.output = out.c;
  o.reduce_op = op;
  return enqueueOne(o);
}

// One group of dense input -> output operations of `kind` (ZEN_OP_ALLREDUCE or
// ZEN_OP_REDUCESCATTER), posted together so the daemon negotiates and fuses them in one cycle.
std::vector<int64_t> groupedDenseAsync(int32_t kind,
                                       const char* what,
                                       const std::vector<std::string>& names,
                                       const std::vector<torch::Tensor>& inputs,
                                       const std::vector<torch::Tensor>& outputs,
                                       int32_t op,
                                       int64_t stream,
                                       int32_t processSet) {
  if (names.size() != inputs.size() || inputs.size() != outputs.size() || inputs.empty()) {
    throw std::invalid_argument(std::string(what) + ": one name and output per input tensor");
  }
  const std::string input = std::string(what) + " input";
  const std::string output = std::string(what) + " output";
  std::vector<std::unique_ptr<TensorArg>> args;
  std::vector<zen_op_t> ops(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    args.push_back(std::make_unique<TensorArg>(inputs[i], input.c_str(), stream));
    args.push_back(std::make_unique<TensorArg>(outputs[i], output.c_str()));
    zen_op_t& o = ops[i];
    o = opOf(kind, names[i], processSet);
    o.input = args[args.size() - 2]->c;
    o.output = args.back()->c;
    o.reduce_op = op;
  }
  std::vector<zen_handle_t> handles(inputs.size());
  checkEnqueue(zen_enqueue_group(ops.data(), static_cast<int32_t>(ops.size()), handles.data()));
  return std::vector<int64_t>(handles.begin(), handles.end());
}

std::vector<int64_t> groupedAllreduceAsync(const std::vector<std::string>& names,
                                           const std::vector<torch::Tensor>& inputs,
                                           const std::vector<torch::Tensor>& outputs,
                                           int32_t op,
                                           int64_t stream,
                                           int32_t processSet) {
  return groupedDenseAsync(ZEN_OP_ALLREDUCE, "grouped allreduce", names, inputs, outputs, op,
                           stream, processSet);
}

// outputs[i]: this rank's piece of inputs[i], as reducescatterAsync's output.
std::vector<int64_t> groupedReducescatterAsync(const std::vector<std::string>& names,
                                               const std::vector<torch::Tensor>& inputs,
                                               const std::vector<torch::Tensor>& outputs,
                                               int32_t op,
                                               int64_t stream,
                                               int32_t processSet) {
  return groupedDenseAsync(ZEN_OP_REDUCESCATTER, "grouped reducescatter", names, inputs, outputs,
                           op, stream, processSet);
}

// indices: [nnz] int64 rows; values: [nnz, ...] (row_size = product of the trailing dims).
int64_t sparseAllreduceAsync(const std::string& name,
                             const torch::Tensor& indices,
                             const torch::Tensor& values,
                             int64_t numRows,
                             int32_t op,
                             const c10::optional<torch::Tensor>& denseOutput,
                             int64_t stream,
                             int32_t processSet) {
  const Placement p = placementOf(values, "sparse values");
  if (placementOf(indices, "sparse indices").type != p.type ||
      indices.device() != values.device()) {
    throw std::invalid_argument("sparse indices and values are on different devices");
  }
  if (indices.scalar_type() != torch::kInt64 || indices.dim() != 1) {
    throw std::invalid_argument("sparse indices must be a 1-D int64 tensor");
  }
  if (values.dim() < 1 || values.size(0) != indices.size(0)) {
    throw std::invalid_argument("sparse values need one row per index");
  }
  zen_op_t o = opOf(ZEN_OP_SPARSE_ALLREDUCE, name, processSet);
  zen_sparse_tensor_t& s = o.sparse;
  s.indices = indices.data_ptr<int64_t>();
  s.values = values.data_ptr();
  s.nnz = indices.size(0);
  s.num_rows = numRows;
  s.row_size = 1;
  for (int64_t d = 1; d < values.dim(); ++d) s.row_size *= values.size(d);
  s.dtype = dtypeOf(values);
  s.device_type = p.type;
  s.device_index = p.index;
  if (p.type == ZEN_DEVICE_CUDA) s.stream = readyStream(stream);
  o.reduce_op = op;
  std::unique_ptr<TensorArg> out;
  if (denseOutput.has_value()) {
    out = std::make_unique<TensorArg>(*denseOutput, "sparse allreduce dense output");
    o.dense_output = out->c;
  }
  return enqueueOne(o);
}

int64_t allgatherAsync(const std::string& name,
                       const torch::Tensor& input,
                       int64_t stream,
                       int32_t processSet) {
  TensorArg in(input, "allgather input", stream);
  zen_op_t o = opOf(ZEN_OP_ALLGATHER, name, processSet);
  o.input = in.c;
  return enqueueOne(o);
}

// splits: rows to each rank (Horovod's), none for an equal split.
int64_t alltoallAsync(const std::string& name,
                      const torch::Tensor& input,
                      const std::vector<int64_t>& splits,
                      int64_t stream,
                      int32_t processSet) {
  TensorArg in(input, "alltoall input", stream);
  zen_op_t o = opOf(ZEN_OP_ALLTOALL, name, processSet);
  o.input = in.c;
  o.splits = splits.empty() ? nullptr : splits.data();
  o.num_splits = static_cast<int32_t>(splits.size());
  return enqueueOne(o);
}

// output: this rank's piece, [reducescatter_rows(rows, rank, size), ...].
int64_t reducescatterAsync(const std::string& name,
                           const torch::Tensor& input,
                           const torch::Tensor& output,
                           int32_t op,
                           int64_t stream,
                           int32_t processSet) {
  TensorArg in(input, "reducescatter input", stream);
  TensorArg out(output, "reducescatter output");
  zen_op_t o = opOf(ZEN_OP_REDUCESCATTER, name, processSet);
  o.input = in.c;
  o.output = out.c;
  o.reduce_op = op;
  return enqueueOne(o);
}

int64_t reducescatterRows(int64_t rows, int32_t rank, int32_t size) {
  const int64_t out = zen_reducescatter_rows(rows, rank, size);
  if (out < 0) throw std::invalid_argument(zen_last_error());
  return out;
}

int64_t broadcastAsync(const std::string& name,
                       const torch::Tensor& tensor,
                       int32_t root,
                       int64_t stream,
                       int32_t processSet) {
  TensorArg t(tensor, "broadcast tensor", stream);
  zen_op_t o = opOf(ZEN_OP_BROADCAST, name, processSet);
  o.input = t.c;
  o.root_rank = root;
  return enqueueOne(o);
}

int64_t joinAsync() {
  zen_handle_t h = 0;
  checkEnqueue(zen_enqueue_join(ZEN_NO_COMPLETION, &h));
  return h;
}

int64_t barrierAsync(int32_t processSet) {
  zen_op_t o{};
  o.kind = ZEN_OP_BARRIER;
  o.process_set = processSet;
  return enqueueOne(o);
}

bool poll(int64_t handle) {
  int done = 0;
  if (zen_poll(handle, &done) != ZEN_OK) throw std::invalid_argument(zen_last_error());
  return done != 0;
}

// Waits with the GIL released, a slice at a time so that Ctrl-C still interrupts.
void wait(int64_t handle) {
  for (;;) {
    int code = 0;
    {
      pybind11::gil_scoped_release release;
      code = zen_wait(handle, 0.2);
    }
    if (code == ZEN_OK) return;
    if (code == ZEN_UNKNOWN_HANDLE) throw std::invalid_argument(zen_last_error());
    if (code != ZEN_PENDING) throw std::runtime_error(zen_last_error());
    if (PyErr_CheckSignals() != 0) throw pybind11::error_already_set();
  }
}

torch::Device deviceOf(int32_t type, int32_t index) {
  return type == ZEN_DEVICE_CUDA ? torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(index))
                                 : torch::Device(torch::kCPU);
}

// (indices [nnz] int64, values [nnz, row_size]) on the daemon's memory: host, or the CUDA
// device of CUDA inputs.
std::vector<torch::Tensor> sparseResult(int64_t handle) {
  zen_sparse_result_t r{};
  int32_t type = ZEN_DEVICE_CPU;
  int32_t index = 0;
  if (zen_sparse_result_placed(handle, &r, &type, &index) != ZEN_OK) {
    throw std::runtime_error(zen_last_error());
  }
  auto guard = std::make_shared<HandleGuard>(handle);
  const torch::Device device = deviceOf(type, index);
  return {overDaemonMemory(r.indices, {r.nnz}, torch::kInt64, guard, device),
          overDaemonMemory(r.values, {r.nnz, r.row_size}, scalarTypeOf(r.dtype), guard, device)};
}

// A gathered tensor (allgather's, alltoall's output) over the daemon's memory, host or device.
torch::Tensor overGathered(const zen_gathered_t& g,
                           torch::ScalarType type,
                           const std::shared_ptr<HandleGuard>& guard) {
  return overDaemonMemory(g.data, std::vector<int64_t>(g.shape, g.shape + g.ndims), type, guard,
                          deviceOf(g.device_type, g.device_index));
}

// like: a tensor of the gathered dtype (the input).
torch::Tensor allgatherResult(int64_t handle, const torch::Tensor& like) {
  zen_gathered_t g{};
  if (zen_allgather_result(handle, &g) != ZEN_OK) throw std::runtime_error(zen_last_error());
  return overGathered(g, like.scalar_type(), std::make_shared<HandleGuard>(handle));
}

// (the rows every rank sent here over the daemon's memory, host or device, int32 received
// splits on the host as Horovod's).
std::vector<torch::Tensor> alltoallResult(int64_t handle, const torch::Tensor& like) {
  zen_alltoall_result_t r{};
  if (zen_alltoall_result(handle, &r) != ZEN_OK) throw std::runtime_error(zen_last_error());
  auto guard = std::make_shared<HandleGuard>(handle);
  const zen_gathered_t& g = r.output;
  torch::Tensor splits = torch::empty({r.num_ranks}, torch::kInt32);
  int32_t* received = splits.data_ptr<int32_t>();
  for (int32_t p = 0; p < r.num_ranks; ++p)
    received[p] = static_cast<int32_t>(r.received_splits[p]);
  return {overGathered(g, like.scalar_type(), guard), splits};
}

int joinResult(int64_t handle) {
  int32_t last = -1;
  if (zen_join_result(handle, &last) != ZEN_OK) throw std::runtime_error(zen_last_error());
  return last;
}

void release(int64_t handle) {
  if (zen_release(handle) != ZEN_OK) throw std::invalid_argument(zen_last_error());
}

void init() {
  int code = 0;
  {
    pybind11::gil_scoped_release release;
    code = zen_init();
  }
  if (code != ZEN_OK) throw std::runtime_error(std::string("zen init: ") + zen_last_error());
}

// The cause the job stopped with when another rank stopped it first, "" otherwise.
std::string shutdown() {
  int code = 0;
  {
    pybind11::gil_scoped_release release;
    code = zen_shutdown();
  }
  return code == ZEN_OK ? std::string() : std::string(zen_last_error());
}

int placement(int value) {
  if (value < 0) throw std::invalid_argument("zen has not been initialized; use hvd.init().");
  return value;
}

std::string statsJson() {
  char* json = nullptr;
  if (zen_stats_json(&json) != ZEN_OK) throw std::invalid_argument(zen_last_error());
  std::string out(json);
  zen_free(json);
  return out;
}

void startTimeline(const std::string& path, bool markCycles) {
  const int code = zen_start_timeline(path.c_str(), markCycles ? 1 : 0);
  if (code != ZEN_OK) raiseEnqueueError(code);
}

void stopTimeline() {
  const int code = zen_stop_timeline();
  if (code != ZEN_OK) raiseEnqueueError(code);
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "zen.torch's C++ extension over Zen's C API (libzen.so)";
  m.attr("SUM") = static_cast<int>(ZEN_SUM);
  m.attr("AVERAGE") = static_cast<int>(ZEN_AVERAGE);
  m.attr("MIN") = static_cast<int>(ZEN_MIN);
  m.attr("MAX") = static_cast<int>(ZEN_MAX);
  m.attr("PRODUCT") = static_cast<int>(ZEN_PRODUCT);
  m.def("init", &init);
  m.def("shutdown", &shutdown);
  m.def("is_initialized", [] { return zen_is_initialized() != 0; });
  m.def("rank", [] { return placement(zen_rank()); });
  m.def("size", [] { return placement(zen_size()); });
  m.def("local_rank", [] { return placement(zen_local_rank()); });
  m.def("local_size", [] { return placement(zen_local_size()); });
  m.def("cross_rank", [] { return placement(zen_cross_rank()); });
  m.def("cross_size", [] { return placement(zen_cross_size()); });
  m.def("backend", [] { return std::string(zen_backend()); });
  m.def("version", [] { return std::string(zen_version()); });
  m.def("cuda_built", [] { return zen_cuda_built() != 0; });
  // stream: the framework's cudaStream_t as an integer, for CUDA tensors (0: the default).
  // process_set: the set's id (zen.common.process_sets), 0 for every rank.
  m.def("allreduce_async", &allreduceAsync, pybind11::arg("name"), pybind11::arg("input"),
        pybind11::arg("output"), pybind11::arg("op"), pybind11::arg("stream") = 0,
        pybind11::arg("process_set") = 0);
  m.def("grouped_allreduce_async", &groupedAllreduceAsync, pybind11::arg("names"),
        pybind11::arg("inputs"), pybind11::arg("outputs"), pybind11::arg("op"),
        pybind11::arg("stream") = 0, pybind11::arg("process_set") = 0);
  m.def("sparse_allreduce_async", &sparseAllreduceAsync, pybind11::arg("name"),
        pybind11::arg("indices"), pybind11::arg("values"), pybind11::arg("num_rows"),
        pybind11::arg("op"), pybind11::arg("dense_output"), pybind11::arg("stream") = 0,
        pybind11::arg("process_set") = 0);
  m.def("allgather_async", &allgatherAsync, pybind11::arg("name"), pybind11::arg("input"),
        pybind11::arg("stream") = 0, pybind11::arg("process_set") = 0);
  m.def("alltoall_async", &alltoallAsync, pybind11::arg("name"), pybind11::arg("input"),
        pybind11::arg("splits"), pybind11::arg("stream") = 0, pybind11::arg("process_set") = 0);
  m.def("reducescatter_async", &reducescatterAsync, pybind11::arg("name"), pybind11::arg("input"),
        pybind11::arg("output"), pybind11::arg("op"), pybind11::arg("stream") = 0,
        pybind11::arg("process_set") = 0);
  m.def("grouped_reducescatter_async", &groupedReducescatterAsync, pybind11::arg("names"),
        pybind11::arg("inputs"), pybind11::arg("outputs"), pybind11::arg("op"),
        pybind11::arg("stream") = 0, pybind11::arg("process_set") = 0);
  m.def("reducescatter_rows", &reducescatterRows);
  m.def("broadcast_async", &broadcastAsync, pybind11::arg("name"), pybind11::arg("tensor"),
        pybind11::arg("root"), pybind11::arg("stream") = 0, pybind11::arg("process_set") = 0);
  m.def("join_async", &joinAsync);
  m.def("barrier_async", &barrierAsync, pybind11::arg("process_set") = 0);
  m.def("poll", &poll);
  m.def("wait", &wait);
  m.def("sparse_result", &sparseResult);
  m.def("allgather_result", &allgatherResult);
  m.def("alltoall_result", &alltoallResult);
  m.def("join_result", &joinResult);
  m.def("release", &release);
  m.def("stats_json", &statsJson);
  m.def("start_timeline", &startTimeline);
  m.def("stop_timeline", &stopTimeline);
}
