#pragma once

// A rank's float32 row-sparse input owned by a test: indices, values [nnz x rowSize], and the
// view the runtime and the C API take. Shared by the runtime and bindings tests.

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace zen::testing {

struct Float32Rows {
  std::vector<int64_t> indices;
  std::vector<float> values;
  int64_t numRows = 0;
  int64_t rowSize = 1;

  SparseView view() const {
    SparseView v;
    v.indices = indices.data();
    v.values = values.data();
    v.nnz = static_cast<int64_t>(indices.size());
    v.numRows = numRows;
    v.rowSize = rowSize;
    v.dtype = DataType::kFloat32;
    return v;
  }
};

}  // namespace zen::testing
