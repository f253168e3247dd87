#pragma once

#include <cstdint>
#include <cstring>

#include "core/host_device.h"

namespace zen {

// IEEE 754 binary16 and bfloat16 as plain 16-bit storage types. Arithmetic always goes
// through float (accumulation in fp32 is a correctness requirement, ALGORITHMS.md §8).
struct Half {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};

ZEN_HOST_DEVICE uint32_t floatBits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof(u));
  return u;
}

ZEN_HOST_DEVICE float bitsToFloat(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof(f));
  return f;
}

ZEN_HOST_DEVICE float toFloat(BFloat16 h) {
  return bitsToFloat(static_cast<uint32_t>(h.bits) << 16);
}

// Round to nearest even; NaN stays a (quiet) NaN.
ZEN_HOST_DEVICE BFloat16 toBFloat16(float f) {
  uint32_t u = floatBits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return BFloat16{static_cast<uint16_t>((u >> 16) | 0x40u)};
  u += 0x7fffu + ((u >> 16) & 1u);
  return BFloat16{static_cast<uint16_t>(u >> 16)};
}

ZEN_HOST_DEVICE float toFloat(Half h) {
  const uint32_t sign = static_cast<uint32_t>(h.bits & 0x8000u) << 16;
  const uint32_t exponent = (h.bits >> 10) & 0x1fu;
  uint32_t mantissa = h.bits & 0x3ffu;
  if (exponent == 0x1f) return bitsToFloat(sign | 0x7f800000u | (mantissa << 13));
  if (exponent == 0) {
    if (mantissa == 0) return bitsToFloat(sign);
    // Subnormal: value = mantissa * 2^-24, exact in float.
    const float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
    return sign != 0 ? -magnitude : magnitude;
  }
  return bitsToFloat(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

// Round to nearest even, overflow to infinity, NaN preserved.
ZEN_HOST_DEVICE Half toHalf(float f) {
  const uint32_t u = floatBits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return Half{static_cast<uint16_t>(sign | 0x7e00u)};
  if (abs >= 0x477ff000u) return Half{static_cast<uint16_t>(sign | 0x7c00u)};  // >= 65520
  if (abs < 0x38800000u) {  // below the smallest normal half: subnormal or zero
    const float magnitude = bitsToFloat(abs);
    // 2^24 * x rounded to nearest even integer is the subnormal's mantissa.
    const float scaled = magnitude * 16777216.0f;
    uint32_t m = static_cast<uint32_t>(scaled);
    const float rest = scaled - static_cast<float>(m);
    if (rest > 0.5f || (rest == 0.5f && (m & 1u))) ++m;
    return Half{static_cast<uint16_t>(sign | m)};
  }
  uint32_t mantissa = abs & 0x7fffffu;
  uint32_t exponent = (abs >> 23) - 112u;
  uint32_t half = (exponent << 10) | (mantissa >> 13);
  const uint32_t rest = mantissa & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;  // may carry into exponent
  return Half{static_cast<uint16_t>(sign | half)};
}

}  // namespace zen
