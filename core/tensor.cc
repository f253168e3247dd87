#include "core/tensor.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace zen {

std::string Device::toString() const {
  return kind == Kind::kCpu ? std::string("cpu") : fmt::format("cuda:{}", index);
}

int64_t TensorShape::numElements() const {
  int64_t n = 1;
  for (int64_t d : dims_) n *= d;
  return n;
}

int64_t TensorShape::rowSize() const {
  int64_t n = 1;
  for (size_t i = 1; i < dims_.size(); ++i) n *= dims_[i];
  return n;
}

std::string TensorShape::toString() const {
  return fmt::format("[{}]", fmt::join(dims_, ", "));
}

SparseView SparseTensor::view() const {
  SparseView v;
  v.indices = indices.data();
  v.values = values.data();
  v.nnz = nnz();
  v.numRows = numRows;
  v.rowSize = rowSize;
  v.dtype = dtype;
  return v;
}

Status validateSparse(const SparseView& t) {
  ZEN_CHECK_ARG(t.nnz >= 0, "negative nnz {}", t.nnz);
  ZEN_CHECK_ARG(t.numRows >= 0, "negative number of rows {}", t.numRows);
  ZEN_CHECK_ARG(t.rowSize >= 1, "row size must be at least 1, got {}", t.rowSize);
  ZEN_CHECK_ARG(t.nnz == 0 || (t.indices != nullptr && t.values != nullptr),
                "sparse tensor with {} non-zeros has no index or value buffer", t.nnz);
  for (int64_t i = 0; i < t.nnz; ++i) {
    const int64_t idx = t.indices[i];
    if (idx < 0 || idx >= t.numRows) {
      return ZEN_ERROR(StatusCode::kInvalidArgument,
                       "index {} at position {} is out of range [0, {})", idx, i, t.numRows);
    }
  }
  return Status::ok();
}

}  // namespace zen
