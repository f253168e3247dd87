#pragma once

#include <cstdint>

#include "core/hash.h"
#include "core/host_device.h"

namespace zen {

// A keyed pseudo-random bijection of [0, domain): a 4-round unbalanced Feistel network on the
// smallest power of two >= domain, with cycle walking back into the domain (at most 2x the
// domain, so under 2 rounds of walking on average). Needs no table, so it runs the same on
// the CPU and the GPU and costs no memory per index.
class FeistelPermutation {
 public:
  static constexpr int kRounds = 4;

  FeistelPermutation() = default;
  ZEN_HOST_DEVICE FeistelPermutation(uint64_t domain, uint64_t seed) : domain_(domain) {
    int bits = 0;
    while (bits < 63 && (uint64_t{1} << bits) < domain) ++bits;
    hiBits_ = bits / 2;
    loBits_ = bits - hiBits_;
    for (int i = 0; i < kRounds; ++i) keys_[i] = deriveKey(seed, i);
  }

  ZEN_HOST_DEVICE uint64_t domain() const { return domain_; }
  // The network's parameters, for the CPU's batched evaluation (core/feistel_batch.h).
  ZEN_HOST_DEVICE int hiBits() const { return hiBits_; }
  ZEN_HOST_DEVICE int loBits() const { return loBits_; }
  ZEN_HOST_DEVICE uint64_t key(int round) const { return keys_[round]; }
  static ZEN_HOST_DEVICE uint64_t roundFunction(uint64_t c, uint64_t key) { return round(c, key); }

  ZEN_HOST_DEVICE uint64_t forward(uint64_t x) const {
    do {
      x = permuteOnce(x);
    } while (x >= domain_);
    return x;
  }

  ZEN_HOST_DEVICE uint64_t inverse(uint64_t y) const {
    do {
      y = unpermuteOnce(y);
    } while (y >= domain_);
    return y;
  }

 private:
  // The round function: one multiply, and a fold of the product's high half into the low
  // bits that the round keeps. Four rounds of it pass the balance tests; a full fmix64 per
  // round cost 2x more and bought nothing measurable.
  static ZEN_HOST_DEVICE uint64_t round(uint64_t c, uint64_t key) {
    const uint64_t x = (c ^ key) * 0x9e3779b97f4a7c15ULL;
    return x ^ (x >> 32);
  }

  static ZEN_HOST_DEVICE uint64_t mask(int bits) {
    return bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
  }

  // Round i splits x into (a: hi bits, c: lo bits) and returns (c, a ^ F_i(c)); the halves'
  // widths swap every round, so an even round count restores the original split.
  ZEN_HOST_DEVICE uint64_t permuteOnce(uint64_t x) const {
    int hi = hiBits_, lo = loBits_;
    for (int i = 0; i < kRounds; ++i) {
      const uint64_t a = x >> lo;
      const uint64_t c = x & mask(lo);
      x = (c << hi) | ((a ^ round(c, keys_[i])) & mask(hi));
      const int t = hi;
      hi = lo;
      lo = t;
    }
    return x;
  }

  ZEN_HOST_DEVICE uint64_t unpermuteOnce(uint64_t y) const {
    // After kRounds (even) swaps the split is (hiBits_, loBits_) again; undo from the last.
    for (int i = kRounds - 1; i >= 0; --i) {
      const int hi = (i % 2 == 0) ? hiBits_ : loBits_;  // round i's hi width
      const int lo = (i % 2 == 0) ? loBits_ : hiBits_;
      const uint64_t c = y >> hi;
      const uint64_t a = (y ^ round(c, keys_[i])) & mask(hi);
      y = (a << lo) | c;
    }
    return y;
  }

  uint64_t domain_ = 0;
  int hiBits_ = 0;
  int loBits_ = 0;
  uint64_t keys_[kRounds] = {};
};

}  // namespace zen
