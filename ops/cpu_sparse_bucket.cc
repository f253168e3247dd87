// Concatenated index spaces of a sparse bucket (ops/cpu_sparse_bucket.h).
#include "ops/cpu_sparse_bucket.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "ops/dense_rows.h"

namespace zen::ops {

SparseView SparseBucket::fuse(const Response& response,
                              const std::vector<TensorEntry*>& entries,
                              std::string* badIndex) {
  badIndex->clear();
  SparseView fused;
  fused.numRows = response.totalRows;
  fused.rowSize = response.rowSize;
  fused.dtype = response.dtype;
  if (entries.size() == 1 && entries.front() != nullptr) {
    fused = entries.front()->sparseInput;
    return fused;  // offset 0: the tensor is the bucket
  }
  const size_t rowBytes = fused.rowBytes();
  int64_t nnz = 0;
  for (const TensorEntry* e : entries) nnz += e != nullptr ? e->sparseInput.nnz : 0;
  indices_.resize(static_cast<size_t>(nnz));
  values_.resize(static_cast<size_t>(nnz) * rowBytes);
  size_t at = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    const TensorEntry* e = entries[i];
    if (e == nullptr) continue;
    const SparseView& in = e->sparseInput;
    const int64_t offset = response.rowOffsets[i];
    const int64_t rows = response.shapes[i].numRows();
    for (int64_t k = 0; k < in.nnz; ++k) {
      const int64_t index = in.indices[k];
      const bool valid = index >= 0 && index < rows;
      if (!valid && badIndex->empty()) {
        *badIndex = fmt::format("tensor '{}': index {} at position {} is outside its {} rows",
                                response.tensorNames[i], index, k, rows);
      }
      indices_[at + static_cast<size_t>(k)] = valid ? index + offset : -1;
    }
    if (in.nnz > 0) {
      std::memcpy(values_.data() + at * rowBytes, in.values,
                  static_cast<size_t>(in.nnz) * rowBytes);
    }
    at += static_cast<size_t>(in.nnz);
  }
  fused.indices = indices_.data();
  fused.values = values_.data();
  fused.nnz = nnz;
  return fused;
}

void SparseBucket::split(const Response& response,
                         const std::vector<TensorEntry*>& entries,
                         const SparseTensor& result,
                         ThreadPool* pool) {
  const size_t rowBytes = result.rowBytes();
  for (size_t i = 0; i < entries.size(); ++i) {
    TensorEntry* e = entries[i];
    if (e == nullptr) continue;
    const int64_t offset = response.rowOffsets[i];
    const int64_t rows = response.shapes[i].numRows();
    const auto first = std::lower_bound(result.indices.begin(), result.indices.end(), offset);
    const auto last = std::lower_bound(first, result.indices.end(), offset + rows);
    const auto begin = static_cast<size_t>(first - result.indices.begin());
    const auto count = static_cast<size_t>(last - first);
    const std::byte* values = result.values.data() + begin * rowBytes;
    if (e->output.data != nullptr) {
      writeSortedRows(static_cast<std::byte*>(e->output.data), rows, offset,
                      result.indices.data() + begin, values, count, rowBytes, pool);
      continue;
    }
    SparseTensor& out = e->handle->result().sparse;
    out.numRows = rows;
    out.rowSize = result.rowSize;
    out.dtype = result.dtype;
    out.indices.resize(count);
    for (size_t k = 0; k < count; ++k) out.indices[k] = first[k] - offset;
    out.values.assign(values, values + count * rowBytes);
  }
}

}  // namespace zen::ops
