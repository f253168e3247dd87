#pragma once

// CPU-only batched evaluation of IndexMap::place and IndexMap::indexOf, bit-identical to the
// scalar (host/device) definitions in core/index_map.h and core/feistel.h, which stay the one
// definition shared with the GPU kernels and between ranks.
//
// Why: the scalar forward() is a chain of 4 dependent multiply rounds inside a
// data-dependent cycle-walking loop, followed by a 64-bit division by the chunk; evaluated
// one index at a time the CPU waits on that chain (20-60 ns per index measured). Here every
// index of a batch goes through one permutation pass in a plain loop of independent
// iterations (the out-of-order core overlaps them), the few that walk out of the domain are
// collected and walked again together, the round masks are precomputed, and the division
// by the chunk is a multiply by a precomputed reciprocal with one exact correction step.
// Where the CPU has AVX2 the passes run four indices at a time (core/feistel_simd.h), the
// walk's second and later passes too (the indices still outside are gathered for it).
#include <cstddef>
#include <cstdint>

#include "core/feistel_simd.h"
#include "core/index_map.h"

namespace zen {

class FeistelBatch {
 public:
  // Largest batch one call processes at a time (longer inputs are walked in pieces).
  static constexpr size_t kBatch = 256;

  // simd false keeps to the scalar passes (tests compare the two).
  explicit FeistelBatch(const FeistelPermutation& perm, bool simd = true) : domain_(perm.domain()) {
    rounds_.hi = perm.hiBits();
    rounds_.lo = perm.loBits();
    rounds_.maskHi = mask(rounds_.hi);
    rounds_.maskLo = mask(rounds_.lo);
    for (int i = 0; i < FeistelPermutation::kRounds; ++i) rounds_.keys[i] = perm.key(i);
    forwardPass_ = simd ? feistelForwardPass() : nullptr;
    inversePass_ = simd ? feistelInversePass() : nullptr;
  }

  // out[i] = perm.forward(in[i]) for i < count; every in[i] must be < domain. in == out is
  // allowed.
  void forward(const uint64_t* in, uint64_t* out, size_t count) const {
    walk(in, out, count, forwardPass_, [this](uint64_t x) { return permuteOnce(x); });
  }

  // out[i] = perm.inverse(in[i]) for i < count; every in[i] must be < domain.
  void inverse(const uint64_t* in, uint64_t* out, size_t count) const {
    walk(in, out, count, inversePass_, [this](uint64_t y) { return unpermuteOnce(y); });
  }

 private:
  static uint64_t mask(int bits) { return bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1; }

  // The same rounds as FeistelPermutation::permuteOnce, unrolled with fixed masks (4 rounds:
  // the (hi, lo) split alternates (H, L), (L, H), (H, L), (L, H)).
  uint64_t permuteOnce(uint64_t x) const {
    static_assert(FeistelPermutation::kRounds == 4, "unrolled for 4 rounds");
    const FeistelRounds& r = rounds_;
    x = ((x & r.maskLo) << r.hi) | (((x >> r.lo) ^ F(x & r.maskLo, r.keys[0])) & r.maskHi);
    x = ((x & r.maskHi) << r.lo) | (((x >> r.hi) ^ F(x & r.maskHi, r.keys[1])) & r.maskLo);
    x = ((x & r.maskLo) << r.hi) | (((x >> r.lo) ^ F(x & r.maskLo, r.keys[2])) & r.maskHi);
    x = ((x & r.maskHi) << r.lo) | (((x >> r.hi) ^ F(x & r.maskHi, r.keys[3])) & r.maskLo);
    return x;
  }

  // FeistelPermutation::unpermuteOnce: round i's split is (H, L) for even i, (L, H) for odd.
  uint64_t unpermuteOnce(uint64_t y) const {
    const FeistelRounds& r = rounds_;
    uint64_t c = y >> r.lo;  // round 3: hi = L, lo = H
    y = ((((y ^ F(c, r.keys[3])) & r.maskLo)) << r.hi) | c;
    c = y >> r.hi;  // round 2: hi = H, lo = L
    y = ((((y ^ F(c, r.keys[2])) & r.maskHi)) << r.lo) | c;
    c = y >> r.lo;  // round 1
    y = ((((y ^ F(c, r.keys[1])) & r.maskLo)) << r.hi) | c;
    c = y >> r.hi;  // round 0
    y = ((((y ^ F(c, r.keys[0])) & r.maskHi)) << r.lo) | c;
    return y;
  }

  static uint64_t F(uint64_t c, uint64_t key) { return FeistelPermutation::roundFunction(c, key); }

  // dst[i] = once(src[i]) for i < n: the SIMD pass where there is one, scalar for the rest.
  template <typename Once>
  static void pass(const FeistelRounds& r,
                   FeistelPass simd,
                   const uint64_t* src,
                   uint64_t* dst,
                   size_t n,
                   Once once) {
    const size_t done = simd != nullptr ? simd(r, src, dst, n) : 0;
    for (size_t i = done; i < n; ++i) dst[i] = once(src[i]);
  }

  // Cycle walking, batched: one pass over all, then repeated passes over those still outside
  // (gathered, so that they too go through the SIMD pass, and scattered back).
  template <typename Once>
  void walk(const uint64_t* in, uint64_t* out, size_t count, FeistelPass simd, Once once) const {
    uint32_t pending[kBatch];
    uint64_t outside[kBatch];
    for (size_t start = 0; start < count; start += kBatch) {
      const size_t n = count - start < kBatch ? count - start : kBatch;
      const uint64_t* src = in + start;
      uint64_t* dst = out + start;
      pass(rounds_, simd, src, dst, n, once);
      size_t m = 0;
      for (size_t i = 0; i < n; ++i) {
        pending[m] = static_cast<uint32_t>(i);
        m += dst[i] >= domain_;
      }
      while (m > 0) {
        for (size_t j = 0; j < m; ++j) outside[j] = dst[pending[j]];
        pass(rounds_, simd, outside, outside, m, once);
        size_t left = 0;
        for (size_t j = 0; j < m; ++j) {
          dst[pending[j]] = outside[j];
          pending[left] = pending[j];
          left += outside[j] >= domain_;
        }
        m = left;
      }
    }
  }

  uint64_t domain_;
  FeistelRounds rounds_;  // the network's parameters, as the SIMD passes take them
  FeistelPass forwardPass_ = nullptr;
  FeistelPass inversePass_ = nullptr;
};

// IndexMap::place over a batch: the Feistel pass above and the split p -> (p / chunk,
// p % chunk) by a precomputed reciprocal: q = floor(p * floor(2^64 / chunk) / 2^64) is
// floor(p / chunk) or one less (p < 2^64), and one compare fixes it, so the result is exact.
class IndexMapBatch {
 public:
  explicit IndexMapBatch(const IndexMap& map, bool simd = true)
      : map_(map),
        feistel_(map.permutation(), simd),
        chunk_(map.chunk()),
        reciprocal_(~uint64_t{0} / map.chunk()) {}

  const IndexMap& map() const { return map_; }

  // p / chunk and p % chunk, exactly.
  void split(uint64_t p, uint64_t* owner, uint64_t* pos) const {
    uint64_t q = static_cast<uint64_t>((static_cast<unsigned __int128>(p) * reciprocal_) >> 64);
    uint64_t r = p - q * chunk_;
    if (r >= chunk_) {
      ++q;
      r -= chunk_;
    }
    *owner = q;
    *pos = r;
  }

  // perm[i] = the permuted index of idx[i] (< numRows each), whose split() is place(idx[i]).
  void permute(const uint64_t* idx, uint64_t* perm, size_t count) const {
    feistel_.forward(idx, perm, count);
  }

  // out[i] = map.indexOf(part, pos[i]) for i < count (every pos[i] < partSize(part)).
  void indexOf(uint32_t part, const uint64_t* pos, uint64_t* out, size_t count) const {
    const uint64_t base = static_cast<uint64_t>(part) * chunk_;
    for (size_t i = 0; i < count; ++i) out[i] = base + pos[i];
    feistel_.inverse(out, out, count);
  }

 private:
  IndexMap map_;
  FeistelBatch feistel_;
  uint64_t chunk_;
  uint64_t reciprocal_;
};

}  // namespace zen
