#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "core/float16.h"
#include "core/status.h"

namespace zen {

enum class DataType : uint8_t { kFloat32, kFloat16, kBFloat16, kFloat64, kInt32, kInt64 };

size_t dataTypeSize(DataType dtype);
const char* dataTypeName(DataType dtype);
Result<DataType> parseDataType(const std::string& name);

// The type sums are accumulated in: fp32 for 16-bit floats (never accumulate in bf16),
// fp64 for fp64, int64 for integers.
template <typename T>
struct Accumulator {
  using type = float;
};
template <>
struct Accumulator<double> {
  using type = double;
};
template <>
struct Accumulator<int32_t> {
  using type = int64_t;
};
template <>
struct Accumulator<int64_t> {
  using type = int64_t;
};
template <typename T>
using AccumulatorT = typename Accumulator<T>::type;

template <typename Acc, typename T>
ZEN_HOST_DEVICE Acc toAccumulator(T v) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    return toFloat(v);
  } else {
    return static_cast<Acc>(v);
  }
}

template <typename T, typename Acc>
ZEN_HOST_DEVICE T fromAccumulator(Acc v) {
  if constexpr (std::is_same_v<T, Half>) {
    return toHalf(v);
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    return toBFloat16(v);
  } else {
    return static_cast<T>(v);
  }
}

// Calls fn(T{}) with T the C++ type of dtype; one switch instead of one per kernel.
template <typename Fn>
decltype(auto) dispatchDataType(DataType dtype, Fn&& fn) {
  switch (dtype) {
    case DataType::kFloat16:
      return fn(Half{});
    case DataType::kBFloat16:
      return fn(BFloat16{});
    case DataType::kFloat64:
      return fn(double{});
    case DataType::kInt32:
      return fn(int32_t{});
    case DataType::kInt64:
      return fn(int64_t{});
    case DataType::kFloat32:
      break;
  }
  return fn(float{});
}

}  // namespace zen
