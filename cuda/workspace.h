#pragma once

// Scratch memory for the GPU algorithms: numbered device and pinned-host buffers, each
// allocated on first use, grown when a call needs more, reused across calls and freed with
// the workspace. One workspace serves one stream at a time (a later call may reuse a buffer
// an earlier call's kernels still read only because both are ordered on that stream).
#include <cstddef>
#include <cstdint>

#include "core/status.h"
#include "cuda/device_buffer.h"

namespace zen::cuda {

class Workspace {
 public:
  static constexpr int kDeviceSlots = 24;
  static constexpr int kPinnedSlots = 4;
  // Slot 0 is cub's temporary storage for every algorithm; each algorithm names the rest.
  static constexpr int kCubSlot = 0;

  // *out = a device buffer of at least count T's in slot `slot` (contents unspecified).
  template <typename T>
  Status device(int slot, int64_t count, T** out) {
    void* p = nullptr;
    ZEN_RETURN_IF_ERROR(deviceBytes(slot, static_cast<size_t>(count) * sizeof(T), &p));
    *out = static_cast<T*>(p);
    return Status::ok();
  }
  template <typename T>
  Status pinned(int slot, int64_t count, T** out) {
    void* p = nullptr;
    ZEN_RETURN_IF_ERROR(pinnedBytes(slot, static_cast<size_t>(count) * sizeof(T), &p));
    *out = static_cast<T*>(p);
    return Status::ok();
  }
  Status deviceBytes(int slot, size_t bytes, void** out);
  Status pinnedBytes(int slot, size_t bytes, void** out);

  // Multiprocessors of the current device, read once (launch shapes, gpu_plan.h).
  int smCount();
  // Device memory held, over all slots.
  size_t heldBytes() const;

  // The bound on each wait for the stream in the algorithms using this workspace
  // (stream_wait.h: kTimeout past it): the caller's timeoutSeconds (Config::timeoutSeconds).
  void setWaitTimeout(double seconds) { waitTimeoutSeconds_ = seconds; }
  double waitTimeoutSeconds() const { return waitTimeoutSeconds_; }

 private:
  DeviceBuffer device_[kDeviceSlots];
  PinnedBuffer pinned_[kPinnedSlots];
  int smCount_ = -1;
  double waitTimeoutSeconds_ = 30.0;  // Config::timeoutSeconds' default
};

}  // namespace zen::cuda
