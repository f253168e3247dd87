#pragma once

// Where a sparse allreduce's dense result goes (ops/sparse_allreduce.h): the rows of a
// [numRows x rowSize] tensor, in one block of memory or in consecutive pieces, the tensors of
// a fused bucket (piece i holds rows [firstRow_i, firstRow_i + rows_i)), which the schemes
// then write in place.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/bitmap_walk.h"
#include "core/tensor.h"
#include "core/thread_pool.h"

namespace zen::ops {

struct DensePiece {
  int64_t firstRow = 0;
  int64_t rows = 0;
  std::byte* data = nullptr;
};

class DenseRows {
 public:
  DenseRows() = default;
  // One block of numRows rows.
  DenseRows(std::byte* data, int64_t numRows, size_t rowBytes);
  // Pieces in row order, each starting where the one before ends, the first at row 0.
  DenseRows(std::vector<DensePiece> pieces, size_t rowBytes);

  size_t rowBytes() const { return rowBytes_; }
  const std::vector<DensePiece>& pieces() const { return pieces_; }
  // The memory of row `index`.
  std::byte* row(int64_t index) const {
    if (pieces_.size() == 1) return pieces_.front().data + static_cast<size_t>(index) * rowBytes_;
    return address(pieceOf(index), index);
  }
  // Row idx[i] = row i of `rows` (back to back), for i < n.
  void copyRows(const uint64_t* idx, const std::byte* rows, size_t n) const {
    if (pieces_.size() == 1) return copyRowsTo(pieces_.front().data, idx, rows, n, rowBytes_);
    withRowBytes(rowBytes_, [&](auto bytes) {
      for (size_t i = 0; i < n; ++i) {
        const auto index = static_cast<int64_t>(idx[i]);
        std::memcpy(address(pieceOf(index), index), rows + i * bytes, bytes);
      }
    });
  }
  // Zeroes every row: large pieces in parts of about 1 MiB on `pool` (when given).
  void zero(ThreadPool* pool) const;
  // Zeroes every row and writes `count` rows in (indices ascending, values back to back), as
  // writeSortedRows does for each piece.
  void writeSorted(const int64_t* indices,
                   const std::byte* values,
                   size_t count,
                   ThreadPool* pool) const;

 private:
  // The piece holding row `index`. Rows arrive in hash order, where a search's branches would
  // mostly miss: a table gives the piece of each chunk's first row (at most kMaxChunks chunks
  // of 2^chunkShift_ rows: it stays in cache), and only a chunk that holds a piece's start
  // looks further.
  static constexpr int64_t kMaxChunks = 4096;
  size_t pieceOf(int64_t index) const {
    size_t p = chunkPiece_[static_cast<size_t>(index >> chunkShift_)];
    while (index >= firstRows_[p + 1]) ++p;
    return p;
  }
  // Row index's address from its piece's: bias_ holds data - firstRow x rowBytes as an integer
  // (as a pointer it could point outside any object).
  std::byte* address(size_t piece, int64_t index) const {
    return reinterpret_cast<std::byte*>(bias_[piece] + static_cast<uintptr_t>(index) * rowBytes_);
  }

  std::vector<DensePiece> pieces_;
  std::vector<int64_t> firstRows_;  // pieces_[i].firstRow, then INT64_MAX
  std::vector<uintptr_t> bias_;
  std::vector<uint32_t> chunkPiece_;
  int chunkShift_ = 0;
  size_t rowBytes_ = 0;
};

// Writes the `rows` rows of `dense`: zeros, and the rows among `count` (indices ascending, a
// bucket's, `offset` the tensor's first row; values back to back) that fall in the tensor.
// Part by part, about 1 MiB each, on `pool` when given (one core does not saturate the memory
// bandwidth that zeroing a large tensor takes): each part's rows are written while its zeros
// are in cache.
void writeSortedRows(std::byte* dense,
                     int64_t rows,
                     int64_t offset,
                     const int64_t* indices,
                     const std::byte* values,
                     size_t count,
                     size_t rowBytes,
                     ThreadPool* pool);

// Zeroes `dense` and writes a coalesced tensor's rows (indices ascending) in.
void scatterToDense(const SparseTensor& t, const DenseRows& dense, ThreadPool* pool = nullptr);

}  // namespace zen::ops
