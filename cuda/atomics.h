#pragma once

// 64-bit atomics that compile for the GPU (CUDA atomics) and the CPU (GCC __atomic
// builtins), so the per-thread steps of hash_partition_steps.h run unchanged in the CPU
// tests, claim races included.
#include "core/host_device.h"

namespace zen::cuda {

// Returns the old value; stores desired when it equalled expected.
ZEN_HOST_DEVICE unsigned long long atomicCasU64(unsigned long long* p,
                                                unsigned long long expected,
                                                unsigned long long desired) {
#if defined(__CUDA_ARCH__)
  return atomicCAS(p, expected, desired);
#else
  __atomic_compare_exchange_n(p, &expected, desired, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
  return expected;
#endif
}

ZEN_HOST_DEVICE unsigned long long atomicAddU64(unsigned long long* p, unsigned long long v) {
#if defined(__CUDA_ARCH__)
  return atomicAdd(p, v);
#else
  return __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
#endif
}

ZEN_HOST_DEVICE unsigned long long atomicOrU64(unsigned long long* p, unsigned long long v) {
#if defined(__CUDA_ARCH__)
  return atomicOr(p, v);
#else
  return __atomic_fetch_or(p, v, __ATOMIC_ACQ_REL);
#endif
}

ZEN_HOST_DEVICE void atomicMinU64(unsigned long long* p, unsigned long long v) {
#if defined(__CUDA_ARCH__)
  atomicMin(p, v);
#else
  unsigned long long seen = __atomic_load_n(p, __ATOMIC_RELAXED);
  while (v < seen &&
         !__atomic_compare_exchange_n(p, &seen, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
#endif
}

}  // namespace zen::cuda
