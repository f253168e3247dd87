#pragma once

// The tensors this rank has enqueued and not yet completed (Horovod's TensorQueue): the entry
// of each (request, views of the framework's tensors, handle), and the requests not yet handed
// to the negotiator. Framework threads add; the background thread takes new requests each
// cycle, finds entries by name when a plan names them, and removes them when they complete.

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "core/handle.h"
#include "core/message.h"
#include "core/status.h"
#include "core/tensor.h"

namespace zen {

// One enqueued operation. The views point into framework memory, which must stay valid until
// the handle completes.
struct TensorEntry {
  Request request;
  SparseView sparseInput;  // kSparseAllreduce
  DenseView input;         // the dense ops' (broadcast: read on the root)
  // kAllreduce and kBroadcast: where the result goes (may alias input). kReducescatter: this
  // rank's piece. kSparseAllreduce: a dense [rows x rowSize] output, or data == nullptr for a
  // sparse result in the handle.
  DenseView output;
  std::shared_ptr<HandleState> handle;
  std::chrono::steady_clock::time_point enqueued;
  // Device tensors: when the inputs are ready, and what the executor attached when it accepted
  // the entry (cuda/: the event it recorded on the framework's stream), freed with the entry.
  ReadySignal ready;
  std::shared_ptr<void> deviceState;
};

class TensorQueue {
 public:
  explicit TensorQueue(int rank) : rank_(rank) {}

  // Adds a group of entries at once (they reach the same cycle) or none of them: a name that
  // is already in flight on this rank (Horovod's duplicate-name error), a post after this rank
  // joined, or a closed queue (the status it was closed with) fails the whole group.
  Status add(std::vector<std::unique_ptr<TensorEntry>> entries);

  // Blocks until new entries arrive, interrupt() is called, or `until`.
  void waitForWork(std::chrono::steady_clock::time_point until);
  void interrupt();

  // Background thread: the entries added since the last call, in order of arrival.
  std::vector<TensorEntry*> takeNew();
  // Background thread: this rank's entry of `name` posted on process set `processSet`
  // (requestSetOf(response): an add's request is the job's), marked as taken. Null when this rank
  // holds none that no earlier response took: it joined instead of posting it (an entry of that
  // name still in an earlier bucket, in flight on an asynchronous executor, is that bucket's, not
  // this response's; one posted to another set is that set's).
  TensorEntry* take(const std::string& name, int32_t processSet);
  // Removes `entry`, queued as `name` (never a later entry of that name); null when it is gone.
  std::unique_ptr<TensorEntry> remove(const std::string& name, const TensorEntry* entry);
  // The join completed: this rank may post again.
  void joinCompleted();

  // Refuses every later add with `why` and hands back every pending entry.
  std::vector<std::unique_ptr<TensorEntry>> close(const Status& why);
  size_t pending() const;

 private:
  const int rank_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::unique_ptr<TensorEntry>> entries_;
  std::vector<TensorEntry*> fresh_;
  std::set<const TensorEntry*> taken_;  // by a response of the plan, until removed
  bool interrupted_ = false;
  bool joined_ = false;
  Status closed_;
};

}  // namespace zen
