#pragma once

#include <cstdint>

#include "core/host_device.h"

namespace zen {

// MurmurHash3's 64-bit finalizer: a cheap, well-mixing bijection on 64-bit words.
ZEN_HOST_DEVICE uint64_t fmix64(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ULL;
  k ^= k >> 33;
  return k;
}

// Derives independent keys from one job seed (SplitMix64 step).
ZEN_HOST_DEVICE uint64_t deriveKey(uint64_t seed, uint64_t i) {
  return fmix64(seed + 0x9e3779b97f4a7c15ULL * (i + 1));
}

// Maps a 64-bit hash uniformly onto [0, range) without a division (Lemire's multiply-shift).
ZEN_HOST_DEVICE uint64_t reduceRange(uint64_t hash, uint64_t range) {
#if defined(__CUDA_ARCH__)
  return __umul64hi(hash, range);
#else
  return static_cast<uint64_t>((static_cast<unsigned __int128>(hash) * range) >> 64);
#endif
}

// The k level-2 probe functions of Algorithm 1: h_i(idx) in [0, slots), independent per i.
class HashFamily {
 public:
  static constexpr int kMaxFunctions = 8;

  HashFamily() = default;
  ZEN_HOST_DEVICE HashFamily(int count, uint64_t seed) : count_(count) {
    for (int i = 0; i < kMaxFunctions; ++i) keys_[i] = deriveKey(seed, 100 + i);
  }

  ZEN_HOST_DEVICE int count() const { return count_; }
  ZEN_HOST_DEVICE uint64_t probe(int i, uint64_t idx, uint64_t slots) const {
    return reduceRange(fmix64(idx ^ keys_[i]), slots);
  }

 private:
  int count_ = 0;
  uint64_t keys_[kMaxFunctions] = {};
};

}  // namespace zen
