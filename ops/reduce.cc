// Element-wise sums for allreduce and the ring's chunk arithmetic, shared by every backend so
// they agree on results and on the byte counts they report. No communication here.
#include "ops/reduce.h"

#include <algorithm>
#include <cstring>
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

}  // namespace

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

std::vector<float> widenToFloat(const void* data, size_t count, DataType dtype) {
  std::vector<float> wide(count);
  const auto* bits = static_cast<const uint16_t*>(data);
  for (size_t i = 0; i < count; ++i) {
    wide[i] = dtype == DataType::kFloat16 ? toFloat(Half{bits[i]}) : toFloat(BFloat16{bits[i]});
  }
  return wide;
}

void narrowFromFloat(const std::vector<float>& wide, void* data, DataType dtype) {
  auto* bits = static_cast<uint16_t*>(data);
  for (size_t i = 0; i < wide.size(); ++i) {
    bits[i] = dtype == DataType::kFloat16 ? toHalf(wide[i]).bits : toBFloat16(wide[i]).bits;
  }
}

ElementRange ringChunk(size_t count, int n, int i) {
  const size_t base = count / n;
  const size_t extra = count % n;
  const size_t k = static_cast<size_t>(i);
  ElementRange r;
  r.begin = base * k + std::min(k, extra);
  r.end = r.begin + base + (k < extra ? 1 : 0);
  return r;
}

uint64_t ringAllreduceBytesSent(size_t count, size_t elementSize, int n, int rank) {
  if (n <= 1) return 0;
  uint64_t bytes = 0;
  for (int s = 0; s + 1 < n; ++s) {
    bytes += ringChunk(count, n, (rank - s + n) % n).size();      // reduce-scatter
    bytes += ringChunk(count, n, (rank + 1 - s + n) % n).size();  // allgather
  }
  return bytes * elementSize;
}

}  // namespace zen::ops
