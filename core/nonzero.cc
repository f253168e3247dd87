// Nonzero extraction on the CPU: one pass over the dense rows, a row is kept when any of its
// elements compares unequal to zero (so -0.0 is zero and NaN is kept: it is not lost).
#include "core/nonzero.h"

#include <cstring>

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
  dispatchDataType(dense.dtype, [&](auto tag) {
    using T = decltype(tag);
    using Acc = AccumulatorT<T>;
    for (int64_t r = 0; r < rows; ++r) {
      const T* row = reinterpret_cast<const T*>(base + r * rowBytes);
      bool nonzero = false;
      for (int64_t e = 0; e < rowSize && !nonzero; ++e) {
        nonzero = !(toAccumulator<Acc>(row[e]) == Acc(0));
      }
      if (!nonzero) continue;
      out->indices.push_back(r);
      const auto* bytes = reinterpret_cast<const std::byte*>(row);
      out->values.insert(out->values.end(), bytes, bytes + rowBytes);
    }
  });
  return Status::ok();
}

}  // namespace zen
