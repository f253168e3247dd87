#include "test/gpu/spin_kernel.h"

namespace zen::cuda::testing {
namespace {

__device__ unsigned long long globalTimerNs() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void spinUntilReleasedKernel(int* flags, unsigned long long capNs) {
  const volatile int* release = flags;
  const unsigned long long start = globalTimerNs();
  int outcome = kSpinReleased;
  while (*release == 0) {
    if (globalTimerNs() - start > capNs) {
      outcome = kSpinCapped;
      break;
    }
    __nanosleep(1000);
  }
  *static_cast<volatile int*>(flags + 1) = outcome;
  __threadfence_system();
}

}  // namespace

cudaError_t launchSpinUntilReleased(int* deviceFlags, double capSeconds, cudaStream_t stream) {
  spinUntilReleasedKernel<<<1, 1, 0, stream>>>(deviceFlags,
                                               static_cast<unsigned long long>(capSeconds * 1e9));
  return cudaGetLastError();
}

}  // namespace zen::cuda::testing
