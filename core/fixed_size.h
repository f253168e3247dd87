#pragma once

// withFixedSize<T, kSizes...>(value, fn): fn(std::integral_constant<T, k>) when value is one
// of kSizes, else fn(value) itself. Hot loops over rows of a run-time length then run with a
// compile-time length for the common sizes (moves inline instead of a memcpy call per row, a
// row loop the compiler unrolls), and stay correct for any other size.
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

}  // namespace zen
