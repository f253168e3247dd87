#pragma once

// Unaligned reads and appends for the scheme-local payload encodings (HC's sets, the blocks
// scheme's parts): received buffers are byte vectors whose arrays need not be aligned for
// the element type, so elements are copied out rather than cast to.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace zen::ops {

// Element i of an array of V starting at p.
template <typename V>
V loadAt(const uint8_t* p, size_t i) {
  V v;
  std::memcpy(&v, p + i * sizeof(V), sizeof(V));
  return v;
}

// Appends the bytes of `count` objects of V.
template <typename V>
void appendBytes(std::vector<uint8_t>* out, const V* data, size_t count) {
  const auto* p = reinterpret_cast<const uint8_t*>(data);
  out->insert(out->end(), p, p + count * sizeof(V));
}

}  // namespace zen::ops
