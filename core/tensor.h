#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/default_init_allocator.h"
#include "core/dtype.h"
#include "core/status.h"

namespace zen {

struct Device {
  enum class Kind : uint8_t { kCpu, kCuda };
  Kind kind = Kind::kCpu;
  int index = 0;

  static Device cpu() { return Device{}; }
  static Device cuda(int index) { return Device{Kind::kCuda, index}; }
  bool operator==(const Device& o) const { return kind == o.kind && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
  std::string toString() const;
};

// When a device tensor's contents are ready for the daemon (Horovod's ready event), as opaque
// CUDA handles that only cuda/ interprets: `event`, a cudaEvent_t recorded after the data was
// produced, or else `stream`, the framework's cudaStream_t producing it (the daemon records an
// event there when the tensor is enqueued). Both null: ready when enqueued.
struct ReadySignal {
  void* event = nullptr;
  void* stream = nullptr;
};

class TensorShape {
 public:
  TensorShape() = default;
  TensorShape(std::vector<int64_t> dims) : dims_(std::move(dims)) {}  // NOLINT
  TensorShape(std::initializer_list<int64_t> dims) : dims_(dims) {}

  const std::vector<int64_t>& dims() const { return dims_; }
  int rank() const { return static_cast<int>(dims_.size()); }
  int64_t dim(int i) const { return dims_[i]; }
  int64_t numElements() const;
  // Rows and elements per row when the first dimension indexes rows (an embedding table).
  int64_t numRows() const { return dims_.empty() ? 1 : dims_[0]; }
  int64_t rowSize() const;
  bool operator==(const TensorShape& o) const { return dims_ == o.dims_; }
  bool operator!=(const TensorShape& o) const { return dims_ != o.dims_; }
  std::string toString() const;

 private:
  std::vector<int64_t> dims_;
};

// A non-owning view of a dense tensor in framework memory, seen as [numRows x rowSize].
struct DenseView {
  void* data = nullptr;
  DataType dtype = DataType::kFloat32;
  TensorShape shape;
  Device device;

  int64_t numRows() const { return shape.numRows(); }
  int64_t rowSize() const { return shape.rowSize(); }
  size_t bytes() const { return static_cast<size_t>(shape.numElements()) * dataTypeSize(dtype); }
};

// A non-owning view of a row-sparse COO tensor: nnz row indices into [0, numRows) and
// values [nnz x rowSize]. Indices may repeat (torch sparse gradients are often uncoalesced);
// repeated rows are summed.
struct SparseView {
  const int64_t* indices = nullptr;
  const void* values = nullptr;
  int64_t nnz = 0;
  int64_t numRows = 0;  // |G|: the dense first dimension
  int64_t rowSize = 1;
  DataType dtype = DataType::kFloat32;
  Device device;

  size_t rowBytes() const { return static_cast<size_t>(rowSize) * dataTypeSize(dtype); }
  const std::byte* row(int64_t i) const {
    return static_cast<const std::byte*>(values) + static_cast<size_t>(i) * rowBytes();
  }
};

// Bytes of rows that their writer sizes and then fills completely (a decode's output):
// resize(n) leaves the new bytes unwritten instead of zeroing them first.
using RowBytes = std::vector<std::byte, DefaultInitAllocator<std::byte>>;

// Owning host row-sparse COO tensor: what the CPU algorithms return. Whoever resizes values
// writes every row it adds (RowBytes does not zero them).
struct SparseTensor {
  std::vector<int64_t> indices;
  RowBytes values;
  int64_t numRows = 0;
  int64_t rowSize = 1;
  DataType dtype = DataType::kFloat32;

  int64_t nnz() const { return static_cast<int64_t>(indices.size()); }
  size_t rowBytes() const { return static_cast<size_t>(rowSize) * dataTypeSize(dtype); }
  std::byte* row(int64_t i) { return values.data() + static_cast<size_t>(i) * rowBytes(); }
  SparseView view() const;
};

// Checks that every index lies in [0, numRows) and the sizes make sense.
Status validateSparse(const SparseView& t);

}  // namespace zen
