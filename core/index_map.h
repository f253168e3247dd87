#pragma once

#include <cstdint>

#include "core/feistel.h"
#include "core/host_device.h"

namespace zen {

// Where an index of G lives in Balanced Parallelism: its owner (the server that aggregates
// it, Algorithm 1's level 1) and its local position inside the owner's set I_owner (the bit
// of the owner's hash bitmap, Algorithm 2). This is the ONE definition used by Push, by the
// server's aggregation, and by the bitmap encode/decode, on CPU and GPU alike.
//
// Both come from a keyed permutation pi of [0, |G|): owner = pi(idx) / chunk,
// local_pos = pi(idx) % chunk, with chunk = ceil(|G| / n) rounded up to a multiple of 8.
// Data-independent (balance holds for any index distribution), every |I_j| is chunk except
// the tail, so the n bitmaps together are exactly ceil(|G| / 8) bytes, and decoding a bit is
// pi^-1(owner * chunk + pos) with no table.
class IndexMap {
 public:
  struct Place {
    uint32_t owner;
    uint64_t pos;
  };

  IndexMap() = default;
  ZEN_HOST_DEVICE IndexMap(uint64_t numRows, int numParts, uint64_t seed)
      : perm_(numRows, seed), numRows_(numRows), numParts_(numParts) {
    uint64_t chunk = (numRows + numParts - 1) / numParts;
    chunk = (chunk + 7) / 8 * 8;
    chunk_ = chunk == 0 ? 8 : chunk;
  }

  ZEN_HOST_DEVICE uint64_t numRows() const { return numRows_; }
  ZEN_HOST_DEVICE int numParts() const { return numParts_; }
  ZEN_HOST_DEVICE uint64_t chunk() const { return chunk_; }
  ZEN_HOST_DEVICE const FeistelPermutation& permutation() const { return perm_; }

  ZEN_HOST_DEVICE Place place(uint64_t idx) const {
    const uint64_t p = perm_.forward(idx);
    return Place{static_cast<uint32_t>(p / chunk_), p % chunk_};
  }
  ZEN_HOST_DEVICE uint32_t owner(uint64_t idx) const { return place(idx).owner; }
  ZEN_HOST_DEVICE uint64_t localPos(uint64_t idx) const { return place(idx).pos; }

  // |I_j|: how many indices part j owns.
  ZEN_HOST_DEVICE uint64_t partSize(int part) const {
    const uint64_t begin = static_cast<uint64_t>(part) * chunk_;
    if (begin >= numRows_) return 0;
    const uint64_t rest = numRows_ - begin;
    return rest < chunk_ ? rest : chunk_;
  }

  // The inverse of place(): the index at local position pos of part `part`.
  ZEN_HOST_DEVICE uint64_t indexOf(uint32_t part, uint64_t pos) const {
    return perm_.inverse(static_cast<uint64_t>(part) * chunk_ + pos);
  }

 private:
  FeistelPermutation perm_;
  uint64_t numRows_ = 0;
  int numParts_ = 1;
  uint64_t chunk_ = 8;
};

}  // namespace zen
