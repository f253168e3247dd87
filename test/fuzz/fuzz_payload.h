#pragma once

// Shared by the decoder fuzzers (one per decoder of untrusted bytes; tools/fuzz runs them). An
// input is either a raw payload or edits to a valid one, so the fuzzer reaches past the header
// checks from the first second:
//   byte 0 even: bytes 1.. are the payload, decoded as they are.
//   byte 0 odd:  a valid payload from the target's encoder, resized by (int8) byte 1, then
//                patched with (offset, value) byte pairs from byte 2 on.
// Decoded views are read to their last byte, so ASan reports any view past the buffer; a
// decoder that accepts what its contract rejects is a trap.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "core/status.h"

namespace zen::ops::fuzz {

inline std::vector<uint8_t> makePayload(const uint8_t* data,
                                        size_t size,
                                        const std::vector<uint8_t>& valid) {
  if ((data[0] & 1) == 0) return std::vector<uint8_t>(data + 1, data + size);
  std::vector<uint8_t> p = valid;
  if (size > 1) {
    const auto delta = static_cast<int8_t>(data[1]);
    const auto newSize = static_cast<std::ptrdiff_t>(p.size()) + delta;
    p.resize(static_cast<size_t>(newSize < 0 ? 0 : newSize), 0);
  }
  for (size_t i = 2; i + 1 < size && !p.empty(); i += 2) p[data[i] % p.size()] = data[i + 1];
  return p;
}

// Reads every byte of [p, p + bytes) (into a volatile, so the loads stay): out-of-bounds
// views become ASan reports.
inline void touch(const void* p, size_t bytes) {
  uint8_t x = 0;
  const auto* b = static_cast<const uint8_t*>(p);
  for (size_t i = 0; i < bytes; ++i) x ^= b[i];
  volatile uint8_t sink = x;
  (void)sink;
}

inline void require(bool ok) {
  if (!ok) __builtin_trap();
}

// A decoder's result: ok, or kInvalidArgument; nothing else.
inline void requireCleanError(const Status& s) {
  require(s.isOk() || s.code() == StatusCode::kInvalidArgument);
}

}  // namespace zen::ops::fuzz
