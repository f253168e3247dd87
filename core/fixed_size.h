#pragma once

// withFixedSize<T, kSizes...>(value, fn): fn(std::integral_constant<T, k>) when value is one
// of kSizes, else fn(value) itself. Hot loops over rows of a run-time length then run with a
// compile-time length for the common sizes (moves inline instead of a memcpy call per row, a
// row loop the compiler unrolls), and stay correct for any other size.
#include <cstddef>
#include <type_traits>

namespace zen {

template <typename T, T kFirst, T... kRest, typename Fn>
void withFixedSize(T value, Fn&& fn) {
  if (value == kFirst) return fn(std::integral_constant<T, kFirst>{});
  if constexpr (sizeof...(kRest) > 0) {
    return withFixedSize<T, kRest...>(value, fn);
  } else {
    return fn(value);
  }
}

// fn(bytes) with `bytes` a std::integral_constant for the common small row sizes (one to
// eight 16- or 32-bit elements), else the size_t itself: a memcpy of a compile-time size is
// a few moves inline, of a run-time size a call per row. Algorithm 1's row moves and the
// decode's row copies use it.
inline constexpr size_t kLargestFixedRowBytes = 32;

template <typename Fn>
void withRowBytes(size_t rowBytes, Fn&& fn) {
  withFixedSize<size_t, 2, 4, 8, 16, kLargestFixedRowBytes>(rowBytes, fn);
}

}  // namespace zen
