// Elias-Fano code of an ascending list (core/elias_fano.h).
#include "core/elias_fano.h"

#include "core/bitmap_popcount.h"

namespace zen {

EliasFanoShape eliasFanoShape(uint64_t universe, uint64_t count) {
  EliasFanoShape s;
  if (count == 0) return s;
  // L = floor(log2(u / m)): the largest L with m 2^L <= u.
  const uint64_t ratio = universe / count;
  s.lowBits = ratio <= 1 ? 0 : 63 - __builtin_clzll(ratio);
  s.highBits = count + ((universe - 1) >> s.lowBits);
  s.lowBytes = static_cast<size_t>((count * static_cast<uint64_t>(s.lowBits) + 7) / 8);
  s.highBytes = static_cast<size_t>((s.highBits + 7) / 8);
  return s;
}

Status decodeEliasFano(const EliasFanoShape& shape,
                       const uint8_t* low,
                       const uint8_t* high,
                       uint64_t universe,
                       uint64_t count,
                       uint32_t* values) {
  ZEN_CHECK_ARG(universe <= (uint64_t{1} << 32), "Elias-Fano code of a universe of {} (> 2^32)",
                universe);
  const uint64_t set = bitmapPopcount(high, shape.highBytes);
  ZEN_CHECK_ARG(set == count, "Elias-Fano code has {} values in its bitvector, {} expected", set,
                count);
  ZEN_CHECK_ARG(shape.highBits % 8 == 0 || shape.highBytes == 0 ||
                    (high[shape.highBytes - 1] >> (shape.highBits % 8)) == 0,
                "Elias-Fano code has bits set past its {}-bit bitvector", shape.highBits);
  const uint64_t lowUsed = count * static_cast<uint64_t>(shape.lowBits);
  ZEN_CHECK_ARG(lowUsed % 8 == 0 || (low[shape.lowBytes - 1] >> (lowUsed % 8)) == 0,
                "Elias-Fano code has low bits set past its {} fields", count);
  EliasFanoReader reader(shape, low, high);
  uint64_t previous = 0;
  for (uint64_t k = 0; k < count; ++k) {
    const uint64_t value = reader.next();
    ZEN_CHECK_ARG(value < universe, "Elias-Fano code: value {} is {}, the universe {}", k, value,
                  universe);
    ZEN_CHECK_ARG(k == 0 || value > previous,
                  "Elias-Fano code: values not strictly ascending at {}", k);
    previous = value;
    if (values != nullptr) values[k] = static_cast<uint32_t>(value);
  }
  return Status::ok();
}

}  // namespace zen
