#pragma once

// Elias-Fano code of a strictly ascending list of m values below a universe u (Elias 1974,
// Fano 1971): each value splits into its low L = floor(log2(u / m)) bits, stored as m packed
// L-bit fields, and its high part h, stored in unary as bit h + k of a bitvector (k the
// value's rank). That is at most m (L + 3) bits, for sparse sets within 0.6 bits per value of
// the log2(C(u, m)) any code of such a set needs; zen's Pull sends a sparse part's positions so
// (ops/wire_format.h kEliasFano) where a bitmap would take u bits and 4-byte positions 32 m.
// Both arrays are little-endian bytes, LSB first; decoding walks the bitvector's set bits
// with ctz, one 64-bit word at a time.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/bitmap_walk.h"
#include "core/status.h"

namespace zen {

// The code's layout for m values below u (m <= u).
struct EliasFanoShape {
  int lowBits = 0;        // L
  uint64_t highBits = 0;  // bitvector length: m + ((u - 1) >> L), 0 when m = 0
  size_t lowBytes = 0;    // ceil(m L / 8)
  size_t highBytes = 0;   // ceil(highBits / 8)
};
EliasFanoShape eliasFanoShape(uint64_t universe, uint64_t count);

// Writes the values one at a time into zeroed arrays of the shape's sizes; finish() after
// the last. The low fields go through a 64-bit buffer, stored a word at a time.
class EliasFanoWriter {
 public:
  EliasFanoWriter(const EliasFanoShape& shape, uint8_t* low, uint8_t* high)
      : low_(low), high_(high), lowBits_(shape.lowBits) {}
  void push(uint64_t value) {
    if (lowBits_ > 0) {
      const uint64_t bits = value & ((uint64_t{1} << lowBits_) - 1);
      buffer_ |= bits << buffered_;
      buffered_ += lowBits_;
      if (buffered_ >= 64) {
        std::memcpy(low_, &buffer_, 8);
        low_ += 8;
        buffered_ -= 64;
        buffer_ = buffered_ == 0 ? 0 : bits >> (lowBits_ - buffered_);
      }
    }
    const uint64_t at = (value >> lowBits_) + count_++;
    high_[at / 8] |= static_cast<uint8_t>(1u << (at % 8));
  }
  void finish() {
    if (buffered_ == 0) return;  // nothing left (an empty code's arrays may be null)
    std::memcpy(low_, &buffer_, static_cast<size_t>(buffered_ + 7) / 8);
    buffered_ = 0;
  }

 private:
  uint8_t* low_;
  uint8_t* high_;
  int lowBits_;
  uint64_t buffer_ = 0;
  int buffered_ = 0;  // bits of buffer_ not stored yet
  uint64_t count_ = 0;
};

// Reads the values back in order: next() the k-th on its k-th call (at most count calls).
class EliasFanoReader {
 public:
  EliasFanoReader(const EliasFanoShape& shape, const uint8_t* low, const uint8_t* high)
      : low_(low),
        lowBytes_(shape.lowBytes),
        high_(high),
        highBytes_(shape.highBytes),
        lowBits_(shape.lowBits),
        lowMask_(lowBits_ == 0 ? 0 : (uint64_t{1} << lowBits_) - 1) {}
  uint64_t next() {
    while (word_ == 0) word_ = loadWord(high_, highBytes_, ++wordIndex_);
    const uint64_t at =
        static_cast<uint64_t>(wordIndex_) * 64 + static_cast<uint64_t>(__builtin_ctzll(word_));
    word_ &= word_ - 1;
    const uint64_t high = at - count_++;
    if (lowBits_ == 0) return high;
    uint64_t low = buffer_;
    if (buffered_ >= lowBits_) {
      buffer_ >>= lowBits_;
      buffered_ -= lowBits_;
    } else {  // the field continues in the next word
      const uint64_t word = loadWord(low_, lowBytes_, lowWord_++);
      low |= buffered_ == 0 ? word : word << buffered_;
      buffer_ = lowBits_ - buffered_ == 64 ? 0 : word >> (lowBits_ - buffered_);
      buffered_ += 64 - lowBits_;
    }
    return (high << lowBits_) | (low & lowMask_);
  }

 private:
  // Word w of `bytes` bytes, little-endian, zeros past the end.
  static uint64_t loadWord(const uint8_t* p, size_t bytes, int64_t w) {
    const size_t at = static_cast<size_t>(w) * 8;
    if (at + 8 <= bytes) return load64le(p + at);
    uint64_t v = 0;
    for (size_t b = at; b < bytes; ++b) v |= uint64_t{p[b]} << (8 * (b - at));
    return v;
  }

  const uint8_t* low_;
  size_t lowBytes_;
  const uint8_t* high_;
  size_t highBytes_;
  int lowBits_;
  uint64_t lowMask_;
  int64_t wordIndex_ = -1;
  uint64_t word_ = 0;
  int64_t lowWord_ = 0;
  uint64_t buffer_ = 0;  // low bits read ahead, the next field's first
  int buffered_ = 0;
  uint64_t count_ = 0;
};

// Checks untrusted arrays of the shape: exactly `count` bits set in the bitvector, none past
// highBits, no low bit past m L, and the values strictly ascending and below the universe
// (at most 2^32); kInvalidArgument naming what is wrong. With `values`, writes the count
// values there as it goes (one pass: a receiver reads them from there, not the code again).
Status decodeEliasFano(const EliasFanoShape& shape,
                       const uint8_t* low,
                       const uint8_t* high,
                       uint64_t universe,
                       uint64_t count,
                       uint32_t* values = nullptr);

}  // namespace zen
