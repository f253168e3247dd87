// Concatenated index spaces of a sparse bucket (ops/cpu_sparse_bucket.h).
#include "ops/cpu_sparse_bucket.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "core/fixed_size.h"

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

namespace {

// A dense output is written in pieces of about this size, one task each: zeroing a large
// tensor (a top-k compressed layer's) is bandwidth that one core does not saturate.
constexpr size_t kPieceBytes = size_t{1} << 20;

// Rows [begin, end) of a dense output: zeros, then those of the result's `count` rows (bucket
// indices ascending, `offset` the tensor's first; values back to back) that fall among them.
void writeDenseRows(std::byte* dense,
                    int64_t begin,
                    int64_t end,
                    const int64_t* indices,
                    int64_t offset,
                    const std::byte* values,
                    size_t count,
                    size_t rowBytes) {
  std::memset(dense + static_cast<size_t>(begin) * rowBytes, 0,
              static_cast<size_t>(end - begin) * rowBytes);
  const int64_t* first = std::lower_bound(indices, indices + count, offset + begin);
  const int64_t* last = std::lower_bound(first, indices + count, offset + end);
  const std::byte* row = values + static_cast<size_t>(first - indices) * rowBytes;
  withRowBytes(rowBytes, [&](auto bytes) {
    for (const int64_t* k = first; k != last; ++k, row += bytes) {
      std::memcpy(dense + static_cast<size_t>(*k - offset) * bytes, row, bytes);
    }
  });
}

}  // namespace

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
      auto* dense = static_cast<std::byte*>(e->output.data);
      const int64_t pieces =
          pool == nullptr
              ? 1
              : std::clamp<int64_t>(
                    static_cast<int64_t>(static_cast<size_t>(rows) * rowBytes / kPieceBytes), 1,
                    pool->size());
      const int64_t perPiece = (rows + pieces - 1) / pieces;
      const auto writePiece = [&](int64_t p) {
        writeDenseRows(dense, p * perPiece, std::min(rows, (p + 1) * perPiece),
                       result.indices.data() + begin, offset, values, count, rowBytes);
      };
      if (pieces == 1) {
        writePiece(0);
      } else {
        pool->parallelFor(pieces, writePiece);
      }
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
