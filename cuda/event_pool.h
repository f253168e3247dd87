#pragma once

// Completion events of the CUDA executor, reused instead of one cudaEventCreate and
// cudaEventDestroy per bucket (Horovod's GPUContext event queue). Plain C++ over opaque
// handles: cuda_executor.cc passes cudaEventCreateWithFlags / cudaEventDestroy, test/cuda_host
// passes fakes.
//
// - acquire() (the loop thread) takes an idle event, or creates one.
// - release(event, reusable) (the finalizer thread, once the bucket has ended) puts it back
//   when the bucket completed normally (the event has fired: re-recording it is safe), and
//   destroys it otherwise (a timed-out bucket's event may still be pending on a hung stream, a
//   failed one belongs to a dead context), or when maxIdle events are already idle.
// - The destructor destroys the idle events; every acquired event must have been released
//   first (the executor drains its finalizer before the pool goes).
#include <cstddef>
#include <functional>
#include <mutex>
#include <vector>

#include "core/status.h"

namespace zen::cuda {

class EventPool {
 public:
  using Create = std::function<Result<void*>()>;
  using Destroy = std::function<void(void*)>;

  EventPool(Create create, Destroy destroy, size_t maxIdle = 64);
  ~EventPool();
  EventPool(const EventPool&) = delete;
  EventPool& operator=(const EventPool&) = delete;

  Result<void*> acquire();
  void release(void* event, bool reusable);

  size_t idle() const;
  size_t created() const;  // events created so far (a steady loop stops creating)

 private:
  const Create create_;
  const Destroy destroy_;
  const size_t maxIdle_;
  mutable std::mutex mu_;
  std::vector<void*> idle_;
  size_t created_ = 0;
};

}  // namespace zen::cuda
