#pragma once

// The finalizer thread of the CUDA executor (Horovod's finalizer thread pool): the background
// loop queues a bucket's work on the device stream, records an event after it and hands the
// event's poll and the bucket's completion here, so the loop never waits on the device. Items
// end in the order they were added (one stream: the device ends them in that order too).
//
// Plain C++ without CUDA types: `poll` wraps cudaEventQuery in cuda_executor.cc, and
// test/cuda_host drives the thread with fake events on any machine.
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "core/status.h"

namespace zen::cuda {

class Finalizer {
 public:
  // What the device says of an item's event: still running, finished, or failed (the error).
  enum class State { kPending, kDone, kFailed };
  using Poll = std::function<State(Status* error)>;
  // The name of an input of the item whose ready event (the framework's work on it) has not
  // completed yet, "" once every one has: asked only at the item's deadline.
  using PendingInput = std::function<std::string()>;
  // Whose fault a failed item is. kDevice: its own work (a hung collective, a device error);
  // the caller aborts the communicator. kInputs: the framework's: an input was never ready, or
  // an earlier item's, which this one queues behind on the stream; none of its NCCL work ran,
  // and an abort would block, since ncclCommAbort's frees wait for every kernel on the device,
  // the framework's stuck one too (NVIDIA/nccl#829).
  enum class Fault { kNone, kDevice, kInputs };
  using Done = std::function<void(const Status& status, Fault fault)>;

  // timeoutSeconds bounds each item from the moment it is added (kTimeout after that: a hung
  // collective); pollInterval is the sleep between polls of a pending item.
  explicit Finalizer(double timeoutSeconds,
                     std::chrono::microseconds pollInterval = std::chrono::microseconds(50));
  // Ends every item first (drain), then stops the thread.
  ~Finalizer();
  Finalizer(const Finalizer&) = delete;
  Finalizer& operator=(const Finalizer&) = delete;

  // `what` names the item in a timeout message. done runs on the finalizer thread, once:
  // OK when the poll said kDone, the poll's error when kFailed (kDevice), kTimeout past the
  // deadline: kInputs naming the input when pendingInput (may be empty) names one, or naming
  // the earlier item an input of which was never ready, else kDevice.
  void add(std::string what, Poll poll, PendingInput pendingInput, Done done);
  // Returns once every item added so far has run its done.
  void drain();
  size_t pending() const;

 private:
  struct Item {
    std::string what;
    Poll poll;
    PendingInput pendingInput;
    Done done;
    std::chrono::steady_clock::time_point deadline;
  };
  void run();
  // Past item's deadline: kTimeout and whose fault (Fault).
  Status timedOut(const Item& item, Fault* fault);

  const std::chrono::duration<double> timeout_;
  const std::chrono::microseconds pollInterval_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> items_;
  bool busy_ = false;  // the thread holds an item outside the queue
  bool stop_ = false;
  // The first item whose input was never ready, with that input: the stream waits behind it, so
  // every later item is the framework's fault too. Finalizer thread only.
  std::string stuck_;
  std::thread thread_;
};

}  // namespace zen::cuda
