#pragma once

// Shared by the control-plane fuzzers (request_list_fuzz.cc, response_list_fuzz.cc).

#include <cstddef>
#include <cstdint>

#include "core/tensor.h"

namespace zen::ops::fuzz {

// The decoder's promise to the coordinator and executors: a shape's element count and its
// row size (dims past the first), in bytes of up to 8, fit in int64. Computed here with
// checked arithmetic: TensorShape's own products are in zen_core, built without UBSan.
inline bool sizesFit(const TensorShape& shape) {
  for (size_t from : {size_t{0}, size_t{1}}) {
    int64_t n = 8;
    for (size_t i = from; i < shape.dims().size(); ++i) {
      if (__builtin_mul_overflow(n, shape.dims()[i], &n)) return false;
    }
  }
  return true;
}

}  // namespace zen::ops::fuzz
