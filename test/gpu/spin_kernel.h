#pragma once

// A kernel that blocks a stream until the host releases it: the stand-in for a hung NCCL
// kernel in the bounded-wait tests (stream_wait_gpu_test.cc).
#include <cuda_runtime.h>

namespace zen::cuda::testing {

// What the spinning kernel saw, written to flags[1].
inline constexpr int kSpinRunning = 0;   // not ended yet
inline constexpr int kSpinReleased = 1;  // the host set flags[0]
inline constexpr int kSpinCapped = 2;    // capSeconds passed first: the release never arrived

// Launches one thread on `stream` that spins until flags[0] != 0, reading it through a
// volatile pointer (flags: cudaHostAllocMapped memory, `deviceFlags` its device pointer), then
// writes the outcome to flags[1]. It also ends after capSeconds (the GPU's global timer), so a
// broken release cannot wedge the device for the rest of the run. Returns the launch's error.
cudaError_t launchSpinUntilReleased(int* deviceFlags, double capSeconds, cudaStream_t stream);

}  // namespace zen::cuda::testing
