#pragma once

// Functions marked ZEN_HOST_DEVICE are compiled for both the CPU and the GPU, so the CPU tests
// exercise exactly the logic the kernels run (hashing, ownership, bitmap positions).
#if defined(__CUDACC__)
#define ZEN_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define ZEN_HOST_DEVICE inline
#endif
