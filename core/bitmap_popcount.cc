// Set bits of a bitmap (see bitmap_popcount.h).
//
// Steps: one count per whole 64-bit word (loaded by memcpy: the wire's bitmaps need not be
// 8-byte aligned), the last bytes % 8 bytes gathered into one word and counted. The loop is
// compiled twice, with the software count and with popcnt (core/popcount.h), and the
// process's choice is made once, in a function-local static: the CPU does not change.
#include "core/bitmap_popcount.h"

#include <cstring>

#include "core/popcount.h"

namespace zen {
namespace {

template <typename Popcount>
inline __attribute__((always_inline)) uint64_t countBits(const uint8_t* bitmap, size_t bytes) {
  uint64_t n = 0;
  const size_t full = bytes / 8;
  for (size_t w = 0; w < full; ++w) {
    uint64_t word;
    std::memcpy(&word, bitmap + w * 8, sizeof(word));
    n += Popcount::count(word);
  }
  uint64_t last = 0;
  for (size_t b = full * 8; b < bytes; ++b) last |= uint64_t{bitmap[b]} << (8 * (b - full * 8));
  return n + Popcount::count(last);
}

uint64_t countSoftware(const uint8_t* bitmap, size_t bytes) {
  return countBits<SoftwarePopcount>(bitmap, bytes);
}

ZEN_TARGET_POPCNT uint64_t countHardware(const uint8_t* bitmap, size_t bytes) {
  return countBits<HardwarePopcount>(bitmap, bytes);
}

}  // namespace

uint64_t bitmapPopcount(const void* bitmap, size_t bytes) {
  using Count = uint64_t (*)(const uint8_t*, size_t);
  static const Count count = cpuHasPopcount() ? countHardware : countSoftware;
  return count(static_cast<const uint8_t*>(bitmap), bytes);
}

uint64_t bitmapPopcount(const void* bitmap, size_t bytes, bool hardware) {
  const auto* p = static_cast<const uint8_t*>(bitmap);
  return hardware ? countHardware(p, bytes) : countSoftware(p, bytes);
}

}  // namespace zen
