// Nonzero extraction on the CPU: a pass over the dense rows finds the kept ones, a row being
// kept when any of its elements compares unequal to zero (so -0.0 is zero and NaN is kept: it
// is not lost); a second pass copies them.
#include "core/nonzero.h"

#include <cstring>

#include "core/fixed_size.h"

namespace zen {

Status extractNonzeroRows(const DenseView& dense, SparseTensor* out) {
  ZEN_CHECK_ARG(dense.device.kind == Device::Kind::kCpu,
                "nonzero extraction on the CPU got a tensor on {}", dense.device.toString());
  ZEN_CHECK_ARG(dense.shape.rank() >= 1, "a dense gradient needs at least one dimension");
  ZEN_CHECK_ARG(dense.numRows() == 0 || dense.data != nullptr, "dense tensor has no data");
  const int64_t rows = dense.numRows();
  const int64_t rowSize = dense.rowSize();
  const size_t rowBytes = static_cast<size_t>(rowSize) * dataTypeSize(dense.dtype);
  out->indices.clear();
  out->values.clear();
  out->numRows = rows;
  out->rowSize = rowSize;
  out->dtype = dense.dtype;
  const auto* base = static_cast<const std::byte*>(dense.data);
  // Two passes: the rows kept, then their bytes into a buffer sized once (appending row by row
  // cost a call and a capacity check per row, more than the test itself at one element).
  dispatchDataType(dense.dtype, [&](auto tag) {
    using T = decltype(tag);
    using Acc = AccumulatorT<T>;
    for (int64_t r = 0; r < rows; ++r) {
      const T* row = reinterpret_cast<const T*>(base + r * rowBytes);
      bool nonzero = false;
      for (int64_t e = 0; e < rowSize && !nonzero; ++e) {
        nonzero = !(toAccumulator<Acc>(row[e]) == Acc(0));
      }
      if (nonzero) out->indices.push_back(r);
    }
  });
  out->values.resize(out->indices.size() * rowBytes);
  const int64_t* const kept = out->indices.data();
  const size_t count = out->indices.size();
  std::byte* const values = out->values.data();
  withRowBytes(rowBytes, [=](auto bytes) {
    for (size_t k = 0; k < count; ++k) {
      std::memcpy(values + k * bytes, base + static_cast<size_t>(kept[k]) * bytes, bytes);
    }
  });
  return Status::ok();
}

}  // namespace zen
