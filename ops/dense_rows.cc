// A dense result's rows in one block or in a fused bucket's tensors (ops/dense_rows.h).
#include "ops/dense_rows.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>

namespace zen::ops {

DenseRows::DenseRows(std::byte* data, int64_t numRows, size_t rowBytes)
    : DenseRows(std::vector<DensePiece>{DensePiece{0, numRows, data}}, rowBytes) {}

DenseRows::DenseRows(std::vector<DensePiece> pieces, size_t rowBytes)
    : pieces_(std::move(pieces)), rowBytes_(rowBytes) {
  for (const DensePiece& p : pieces_) {
    firstRows_.push_back(p.firstRow);
    bias_.push_back(reinterpret_cast<uintptr_t>(p.data) -
                    static_cast<uintptr_t>(p.firstRow) * rowBytes_);
  }
  firstRows_.push_back(std::numeric_limits<int64_t>::max());
  if (pieces_.size() <= 1) return;  // row() needs no lookup
  const int64_t numRows = pieces_.back().firstRow + pieces_.back().rows;
  while ((numRows >> chunkShift_) >= kMaxChunks) ++chunkShift_;
  // Each chunk's first row's piece: the last starting at or before it (an empty piece shares
  // its start with the next one, which the lookup's scan then reaches).
  size_t p = 0;
  for (int64_t first = 0; first < numRows; first += int64_t{1} << chunkShift_) {
    while (p + 1 < pieces_.size() && firstRows_[p + 1] <= first) ++p;
    chunkPiece_.push_back(static_cast<uint32_t>(p));
  }
}

void DenseRows::zero(ThreadPool* pool) const {
  writeSorted(nullptr, nullptr, 0, pool);
}

namespace {

// Large outputs are zeroed and written in parts of about this size, one task each: zeroing a
// large tensor (a top-k compressed layer's) is bandwidth that one core does not saturate.
constexpr size_t kPartBytes = size_t{1} << 20;

// Rows [begin, end) of writeSortedRows' tensor.
void writeRowRange(std::byte* dense,
                   int64_t begin,
                   int64_t end,
                   const int64_t* indices,
                   int64_t offset,
                   const std::byte* values,
                   size_t count,
                   size_t rowBytes) {
  if (end == begin) return;  // an empty tensor's memory may be null
  std::memset(dense + static_cast<size_t>(begin) * rowBytes, 0,
              static_cast<size_t>(end - begin) * rowBytes);
  if (count == 0) return;  // zeroing only (indices and values may be null)
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

void DenseRows::writeSorted(const int64_t* indices,
                            const std::byte* values,
                            size_t count,
                            ThreadPool* pool) const {
  for (const DensePiece& p : pieces_) {
    writeSortedRows(p.data, p.rows, p.firstRow, indices, values, count, rowBytes_, pool);
  }
}

void writeSortedRows(std::byte* dense,
                     int64_t rows,
                     int64_t offset,
                     const int64_t* indices,
                     const std::byte* values,
                     size_t count,
                     size_t rowBytes,
                     ThreadPool* pool) {
  const int64_t parts =
      pool == nullptr ? 1
                      : std::clamp<int64_t>(
                            static_cast<int64_t>(static_cast<size_t>(rows) * rowBytes / kPartBytes),
                            1, pool->size());
  const int64_t perPart = (rows + parts - 1) / parts;
  const auto writePart = [&](int64_t p) {
    writeRowRange(dense, p * perPart, std::min(rows, (p + 1) * perPart), indices, offset, values,
                  count, rowBytes);
  };
  if (parts == 1) {
    writePart(0);
  } else {
    pool->parallelFor(parts, writePart);
  }
}

void scatterToDense(const SparseTensor& t, const DenseRows& dense, ThreadPool* pool) {
  dense.writeSorted(t.indices.data(), t.values.data(), t.indices.size(), pool);
}

}  // namespace zen::ops
