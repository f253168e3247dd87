#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace zen {

// dst = rowAt(0) + rowAt(1) + ... + rowAt(count - 1), element-wise over rowSize elements,
// summed in the accumulator type (fp32 for 16-bit floats) and rounded once at the end, so a
// frequent index repeated many times on one rank keeps full precision.
template <typename RowAt>
void sumRows(DataType dtype, int64_t rowSize, int64_t count, RowAt rowAt, std::byte* dst) {
  dispatchDataType(dtype, [&](auto tag) {
    using T = decltype(tag);
    using Acc = AccumulatorT<T>;
    T* out = reinterpret_cast<T*>(dst);
    for (int64_t e = 0; e < rowSize; ++e) {
      Acc acc = 0;
      for (int64_t r = 0; r < count; ++r) {
        acc += toAccumulator<Acc>(reinterpret_cast<const T*>(rowAt(r))[e]);
      }
      out[e] = fromAccumulator<T>(acc);
    }
  });
}

}  // namespace zen
