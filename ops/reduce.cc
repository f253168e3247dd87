// Element-wise reductions (sum, min, max, product) for allreduce and the ring's chunk arithmetic,
// shared by every backend so they agree on results and on the byte counts they report. No
// communication here.
#include "ops/reduce.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <type_traits>

namespace zen::ops {
namespace {

template <typename T>
void sumTyped(void* acc, const void* in, size_t count) {
  T* a = static_cast<T*>(acc);
  const T* b = static_cast<const T*>(in);
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;  // unsigned arithmetic wraps without UB
    for (size_t i = 0; i < count; ++i) {
      a[i] = static_cast<T>(static_cast<U>(a[i]) + static_cast<U>(b[i]));
    }
  } else {
    for (size_t i = 0; i < count; ++i) a[i] += b[i];
  }
}

template <typename T>
void minTyped(void* acc, const void* in, size_t count) {
  T* a = static_cast<T*>(acc);
  const T* b = static_cast<const T*>(in);
  for (size_t i = 0; i < count; ++i) {
    if (b[i] < a[i]) a[i] = b[i];
  }
}

template <typename T>
void maxTyped(void* acc, const void* in, size_t count) {
  T* a = static_cast<T*>(acc);
  const T* b = static_cast<const T*>(in);
  for (size_t i = 0; i < count; ++i) {
    if (a[i] < b[i]) a[i] = b[i];
  }
}

template <typename T>
void productTyped(void* acc, const void* in, size_t count) {
  T* a = static_cast<T*>(acc);
  const T* b = static_cast<const T*>(in);
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;  // unsigned arithmetic wraps without UB
    for (size_t i = 0; i < count; ++i) {
      a[i] = static_cast<T>(static_cast<U>(a[i]) * static_cast<U>(b[i]));
    }
  } else {
    for (size_t i = 0; i < count; ++i) a[i] *= b[i];
  }
}

// Calls kernel<T> for a wire dtype; 16-bit floats are reduced as fp32 (wireDataType).
template <template <typename> class Kernel>
void dispatch(void* acc, const void* in, size_t count, DataType dtype) {
  switch (dtype) {
    case DataType::kFloat64:
      return Kernel<double>::run(acc, in, count);
    case DataType::kInt32:
      return Kernel<int32_t>::run(acc, in, count);
    case DataType::kInt64:
      return Kernel<int64_t>::run(acc, in, count);
    case DataType::kFloat32:
    case DataType::kFloat16:  // callers widen 16-bit floats first (wireDataType)
    case DataType::kBFloat16:
      return Kernel<float>::run(acc, in, count);
  }
}

template <typename T>
struct Min {
  static void run(void* a, const void* b, size_t n) { minTyped<T>(a, b, n); }
};
template <typename T>
struct Max {
  static void run(void* a, const void* b, size_t n) { maxTyped<T>(a, b, n); }
};
template <typename T>
struct Product {
  static void run(void* a, const void* b, size_t n) { productTyped<T>(a, b, n); }
};

template <typename T>
void fillTyped(void* data, size_t count, T value) {
  T* d = static_cast<T*>(data);
  for (size_t i = 0; i < count; ++i) d[i] = value;
}

// op's identity as a double for the float dtypes: exact in every one of them.
double floatIdentity(ReduceOp op) {
  switch (op) {
    case ReduceOp::kMin:
      return std::numeric_limits<double>::infinity();
    case ReduceOp::kMax:
      return -std::numeric_limits<double>::infinity();
    case ReduceOp::kProduct:
      return 1.0;
    case ReduceOp::kSum:
    case ReduceOp::kAverage:
    case ReduceOp::kAdasum:  // adasum(a, 0) = a
      break;
  }
  return 0.0;
}

template <typename T>
T intIdentity(ReduceOp op) {
  switch (op) {
    case ReduceOp::kMin:
      return std::numeric_limits<T>::max();
    case ReduceOp::kMax:
      return std::numeric_limits<T>::lowest();
    case ReduceOp::kProduct:
      return T{1};
    case ReduceOp::kSum:
    case ReduceOp::kAverage:
    case ReduceOp::kAdasum:  // adasum(a, 0) = a
      break;
  }
  return T{0};
}

}  // namespace

void minInto(void* acc, const void* in, size_t count, DataType dtype) {
  dispatch<Min>(acc, in, count, dtype);
}

void maxInto(void* acc, const void* in, size_t count, DataType dtype) {
  dispatch<Max>(acc, in, count, dtype);
}

void productInto(void* acc, const void* in, size_t count, DataType dtype) {
  dispatch<Product>(acc, in, count, dtype);
}

void reduceInto(void* acc, const void* in, size_t count, DataType dtype, ReduceOp op) {
  switch (op) {
    case ReduceOp::kMin:
      return minInto(acc, in, count, dtype);
    case ReduceOp::kMax:
      return maxInto(acc, in, count, dtype);
    case ReduceOp::kProduct:
      return productInto(acc, in, count, dtype);
    case ReduceOp::kSum:
    case ReduceOp::kAverage:
    case ReduceOp::kAdasum:  // not element-wise: ops/adasum.h; the transports refuse it
      break;
  }
  sumInto(acc, in, count, dtype);
}

void fillIdentity(void* data, size_t count, DataType dtype, ReduceOp op) {
  const double f = floatIdentity(op);
  switch (dtype) {
    case DataType::kFloat32:
      return fillTyped<float>(data, count, static_cast<float>(f));
    case DataType::kFloat64:
      return fillTyped<double>(data, count, f);
    case DataType::kFloat16:
      return fillTyped<uint16_t>(data, count, toHalf(static_cast<float>(f)).bits);
    case DataType::kBFloat16:
      return fillTyped<uint16_t>(data, count, toBFloat16(static_cast<float>(f)).bits);
    case DataType::kInt32:
      return fillTyped<int32_t>(data, count, intIdentity<int32_t>(op));
    case DataType::kInt64:
      return fillTyped<int64_t>(data, count, intIdentity<int64_t>(op));
  }
}

DataType wireDataType(DataType dtype) {
  return dtype == DataType::kFloat16 || dtype == DataType::kBFloat16 ? DataType::kFloat32 : dtype;
}

void sumInto(void* acc, const void* in, size_t count, DataType dtype) {
  switch (dtype) {
    case DataType::kFloat64:
      return sumTyped<double>(acc, in, count);
    case DataType::kInt32:
      return sumTyped<int32_t>(acc, in, count);
    case DataType::kInt64:
      return sumTyped<int64_t>(acc, in, count);
    case DataType::kFloat32:
    case DataType::kFloat16:  // callers widen 16-bit floats first (wireDataType)
    case DataType::kBFloat16:
      return sumTyped<float>(acc, in, count);
  }
}

WireBuffer::WireBuffer(void* data, size_t count, DataType dtype)
    : original_(data),
      dtype_(dtype),
      wire_(wireDataType(dtype)),
      buffer_(static_cast<uint8_t*>(data)) {
  if (wire_ == dtype_) return;
  wide_.resize(count);
  const auto* bits = static_cast<const uint16_t*>(data);
  for (size_t i = 0; i < count; ++i) {
    wide_[i] = dtype == DataType::kFloat16 ? toFloat(Half{bits[i]}) : toFloat(BFloat16{bits[i]});
  }
  buffer_ = reinterpret_cast<uint8_t*>(wide_.data());
}

void WireBuffer::narrow() {
  if (wire_ == dtype_) return;
  auto* bits = static_cast<uint16_t*>(original_);
  for (size_t i = 0; i < wide_.size(); ++i) {
    bits[i] = dtype_ == DataType::kFloat16 ? toHalf(wide_[i]).bits : toBFloat16(wide_[i]).bits;
  }
}

ElementRange ringChunk(size_t count, int n, int i) {
  const auto total = static_cast<int64_t>(count);
  ElementRange r;
  r.begin = static_cast<size_t>(scatterOffset(total, n, i));
  r.end = r.begin + static_cast<size_t>(scatterRows(total, n, i));
  return r;
}

uint64_t ringReducescatterBytesSent(const std::vector<size_t>& counts,
                                    size_t elementSize,
                                    int rank) {
  if (counts.size() <= 1) return 0;
  uint64_t elements = 0;
  for (size_t c : counts) elements += c;
  return (elements - counts[static_cast<size_t>(rank)]) * elementSize;
}

uint64_t ringAllreduceBytesSent(size_t count, size_t elementSize, int n, int rank) {
  if (n <= 1) return 0;
  uint64_t bytes = 0;
  for (int s = 0; s + 1 < n; ++s) {
    bytes += ringChunk(count, n, (rank - s - 1 + n) % n).size();  // reduce-scatter
    bytes += ringChunk(count, n, (rank - s + n) % n).size();      // allgather
  }
  return bytes * elementSize;
}

}  // namespace zen::ops
