#pragma once
// What every zen.tensorflow kernel shares: tensors as the C API takes them, the daemon's
// codes as TensorFlow statuses, and the one way an operation ends. A kernel enqueues and
// returns; the daemon's completion (on its background thread) only hands the rest to
// TensorFlow's CPU worker pool, where the outputs are read, the handle released and `done`
// called. TensorFlow's inter-op threads never wait on the network.
#include <atomic>
#include <cstring>
#include <functional>
#include <mutex>
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

// One kernel's operations in flight: one, or a group (zen_enqueue_group) of `count`. finish
// (optional) runs on TensorFlow's worker pool once every operation has succeeded, once per
// operation (its index in the group and handle), while the outputs are readable; it may set
// an error on the context. The first failure fails the kernel.
class Pending {
 public:
  using Finish = std::function<void(OpKernelContext*, int index, zen_handle_t)>;

  Pending(OpKernelContext* context, AsyncOpKernel::DoneCallback done, Finish finish, int count = 1)
      : context_(context),
        done_(std::move(done)),
        finish_(std::move(finish)),
        slots_(static_cast<size_t>(count)),
        remaining_(count) {
    for (size_t i = 0; i < slots_.size(); ++i) slots_[i] = Slot{this, static_cast<int>(i), 0};
  }

  // Operation index's completion.
  zen_completion_t completion(int index) {
    return zen_completion_t{&Pending::completed, &slots_[static_cast<size_t>(index)]};
  }

  // Runs enqueue(pending) (which posts every operation with pending->completion(i)); a refused
  // post (all or none) ends the kernel at once with the C API's message. Takes ownership of
  // pending either way.
  template <typename Enqueue>
  static void start(Pending* pending, Enqueue enqueue) {
    const int code = enqueue(pending);
    if (code != ZEN_OK) {
      pending->context_->SetStatus(lastError(code));
      pending->end();
    }
  }

 private:
  struct Slot {
    Pending* self;
    int index;
    zen_handle_t handle;
  };

  static void completed(zen_handle_t handle, int32_t code, const char* message, void* user) {
    auto* slot = static_cast<Slot*>(user);
    Pending* self = slot->self;
    slot->handle = handle;
    if (code != ZEN_OK) {
      std::lock_guard<std::mutex> lock(self->mutex_);
      if (self->error_.ok()) self->error_ = statusFrom(code, message);
    }
    if (self->remaining_.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    // The last one: the outputs are read on TensorFlow's pool, not the daemon's thread.
    self->context_->device()->tensorflow_cpu_worker_threads()->workers->Schedule([self]() {
      if (!self->error_.ok()) {
        self->context_->SetStatus(self->error_);
      } else if (self->finish_) {
        for (const Slot& s : self->slots_) self->finish_(self->context_, s.index, s.handle);
      }
      self->end();
    });
  }

  void end() {
    for (const Slot& s : slots_) {
      if (s.handle != 0) zen_release(s.handle);
    }
    AsyncOpKernel::DoneCallback done = std::move(done_);
    delete this;
    done();
  }

  OpKernelContext* context_;
  AsyncOpKernel::DoneCallback done_;
  Finish finish_;
  std::vector<Slot> slots_;
  std::atomic<int> remaining_;
  std::mutex mutex_;  // error_ while completions arrive
  absl::Status error_;
};

}  // namespace zen_tf
}  // namespace tensorflow
