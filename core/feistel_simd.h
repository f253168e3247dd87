#pragma once

// One pass of the Feistel network (core/feistel.h) over four 64-bit lanes at a time, for
// FeistelBatch (core/feistel_batch.h) on CPUs with AVX2. The scalar pass is a chain of 4
// dependent 64-bit multiplies per index, ~70 instructions with its walk; here one AVX2
// instruction stream carries four indices (the 64-bit multiply built from three 32-bit
// ones), about 4x fewer instructions per index. Same arithmetic modulo 2^64, so the results
// are bit-identical to the scalar definition shared with the GPU and the other ranks.
#include <cstddef>
#include <cstdint>

namespace zen {

// The network's parameters as FeistelBatch holds them.
struct FeistelRounds {
  int hi = 0;  // hi and lo widths of round 0's split (they alternate every round)
  int lo = 0;
  uint64_t maskHi = 0;
  uint64_t maskLo = 0;
  uint64_t keys[4] = {};
};

// A pass over in[0, count) into out (in == out allowed): forward (permuteOnce) or inverse
// (unpermuteOnce) rounds. Returns how many leading entries it did, a multiple of 4 (0 when
// the CPU has no AVX2 or off x86-64): the caller runs the scalar pass on the rest.
using FeistelPass = size_t (*)(const FeistelRounds& r,
                               const uint64_t* in,
                               uint64_t* out,
                               size_t count);

// The CPU's passes, chosen once per process; nullptr when it has no AVX2.
FeistelPass feistelForwardPass();
FeistelPass feistelInversePass();

}  // namespace zen
