#pragma once
// What every zen.tensorflow kernel shares: tensors as the C API takes them, the daemon's
// codes as TensorFlow statuses, and the one way an operation ends. A kernel enqueues and
// returns; the daemon's completion (on its background thread) only hands the rest to
// TensorFlow's CPU worker pool, where the outputs are read, the handle released and `done`
// called. TensorFlow's inter-op threads never wait on the network.
#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "bindings/c_api.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"

namespace tensorflow {
namespace zen_tf {

inline absl::Status statusFrom(int code, const std::string& message) {
  switch (code) {
    case ZEN_OK:
      return absl::OkStatus();
    case ZEN_INVALID_ARGUMENT:
      return absl::InvalidArgumentError(message);
    case ZEN_OUT_OF_RANGE:
      return absl::OutOfRangeError(message);
    case ZEN_FAILED_PRECONDITION:
    case ZEN_NOT_INITIALIZED:
      return absl::FailedPreconditionError(message);
    case ZEN_TIMEOUT:
      return absl::DeadlineExceededError(message);
    case ZEN_IO_ERROR:
      return absl::UnavailableError(message);
    case ZEN_ABORTED:
      return absl::AbortedError(message);
    case ZEN_UNIMPLEMENTED:
      return absl::UnimplementedError(message);
    default:
      return absl::InternalError(message);
  }
}

inline absl::Status lastError(int code) {
  return statusFrom(code, zen_last_error());
}

inline absl::Status zenDtype(DataType type, int32_t* out) {
  switch (type) {
    case DT_FLOAT:
      *out = ZEN_FLOAT32;
      return absl::OkStatus();
    case DT_HALF:
      *out = ZEN_FLOAT16;
      return absl::OkStatus();
    case DT_BFLOAT16:
      *out = ZEN_BFLOAT16;
      return absl::OkStatus();
    case DT_DOUBLE:
      *out = ZEN_FLOAT64;
      return absl::OkStatus();
    case DT_INT32:
      *out = ZEN_INT32;
      return absl::OkStatus();
    case DT_INT64:
      *out = ZEN_INT64;
      return absl::OkStatus();
    default:
      return absl::InvalidArgumentError("zen: unsupported dtype " + DataTypeString(type));
  }
}

// A tensor's memory as the C API takes it; a scalar travels as one element.
struct TensorArg {
  std::vector<int64_t> shape;
  zen_tensor_t c{};

  absl::Status init(const Tensor& t) {
    shape.clear();
    for (int d = 0; d < t.dims(); ++d) shape.push_back(t.dim_size(d));
    if (shape.empty()) shape.push_back(1);
    c.data = const_cast<char*>(t.tensor_data().data());
    c.ndims = static_cast<int32_t>(shape.size());
    c.shape = shape.data();
    return zenDtype(t.dtype(), &c.dtype);
  }
};

// One operation in flight. finish (optional) runs on TensorFlow's worker pool after success,
// while the handle's outputs are readable; it may set an error on the context.
class Pending {
 public:
  using Finish = std::function<void(OpKernelContext*, zen_handle_t)>;

  Pending(OpKernelContext* context, AsyncOpKernel::DoneCallback done, Finish finish)
      : context_(context), done_(std::move(done)), finish_(std::move(finish)) {}

  // Runs enqueue(completion, &handle); on a refused post ends the operation at once with the
  // C API's message. Takes ownership of pending either way.
  template <typename Enqueue>
  static void start(Pending* pending, Enqueue enqueue) {
    zen_handle_t handle = 0;
    const int code = enqueue(zen_completion_t{&Pending::completed, pending}, &handle);
    if (code != ZEN_OK) {
      pending->context_->SetStatus(lastError(code));
      pending->end(0);
    }
  }

 private:
  static void completed(zen_handle_t handle, int32_t code, const char* message, void* user) {
    auto* self = static_cast<Pending*>(user);
    absl::Status status = statusFrom(code, message);
    self->context_->device()->tensorflow_cpu_worker_threads()->workers->Schedule(
        [self, handle, status]() {
          if (!status.ok()) {
            self->context_->SetStatus(status);
          } else if (self->finish_) {
            self->finish_(self->context_, handle);
          }
          self->end(handle);
        });
  }

  void end(zen_handle_t handle) {
    if (handle != 0) zen_release(handle);
    AsyncOpKernel::DoneCallback done = std::move(done_);
    delete this;
    done();
  }

  OpKernelContext* context_;
  AsyncOpKernel::DoneCallback done_;
  Finish finish_;
};

}  // namespace zen_tf
}  // namespace tensorflow
