// Packing and unpacking of the per-cycle cache bit vector (controller/cache_bits.h).

#include "controller/cache_bits.h"

namespace zen::controller {
namespace {

constexpr int kStatusBits = 4;

void setBit(BitVector* v, int bit) {
  (*v)[static_cast<size_t>(bit) / 64] |= uint64_t{1} << (bit % 64);
}
void clearBit(BitVector* v, int bit) {
  (*v)[static_cast<size_t>(bit) / 64] &= ~(uint64_t{1} << (bit % 64));
}
bool testBit(const BitVector& v, int bit) {
  return (v[static_cast<size_t>(bit) / 64] >> (bit % 64)) & 1U;
}

}  // namespace

size_t cacheBitWords(int numBits) {
  return (static_cast<size_t>(kStatusBits + 2 * numBits) + 63) / 64;
}

BitVector encodeCacheBits(const LocalCacheBits& local, int numBits) {
  BitVector v(cacheBitWords(numBits), 0);
  if (!local.shutdown) setBit(&v, 0);
  if (!local.uncachedInQueue) setBit(&v, 1);
  if (!local.invalidInQueue) setBit(&v, 2);
  if (!local.joined) setBit(&v, 3);
  for (int b : local.hits) {
    if (b >= 0 && b < numBits) setBit(&v, kStatusBits + b);
  }
  for (int b = 0; b < numBits; ++b) setBit(&v, kStatusBits + numBits + b);
  for (int b : local.invalid) {
    if (b >= 0 && b < numBits) clearBit(&v, kStatusBits + numBits + b);
  }
  return v;
}

Result<GlobalCacheBits> decodeCacheBits(const BitVector& anded, int numBits) {
  ZEN_CHECK_ARG(anded.size() == cacheBitWords(numBits),
                "cache bit vector has {} words, {} cache bits need {}: the ranks' response "
                "caches diverged",
                anded.size(), numBits, cacheBitWords(numBits));
  GlobalCacheBits g;
  g.shutdown = !testBit(anded, 0);
  g.uncachedInQueue = !testBit(anded, 1);
  g.invalidInQueue = !testBit(anded, 2);
  g.someoneJoined = !testBit(anded, 3);
  for (int b = 0; b < numBits; ++b) {
    const bool stale = !testBit(anded, kStatusBits + numBits + b);
    if (stale) {
      g.invalid.push_back(b);
    } else if (testBit(anded, kStatusBits + b)) {
      g.commonHits.push_back(b);
    }
  }
  return g;
}

void andInto(BitVector* acc, const BitVector& other) {
  if (acc->size() < other.size()) acc->resize(other.size(), ~uint64_t{0});
  for (size_t i = 0; i < other.size(); ++i) (*acc)[i] &= other[i];
}

}  // namespace zen::controller
