#pragma once

#include <memory>
#include <new>
#include <type_traits>
#include <utility>

namespace zen {

// std::allocator whose construct() without arguments default-initializes instead of
// value-initializing: resize(n) of a std::vector of bytes leaves the new elements unwritten
// instead of zeroing them. For output buffers whose every byte is written right after the
// resize (a decode's rows), where the zero fill would be pure overhead. resize(n, value),
// assign and insert still write what they are given.
template <typename T>
class DefaultInitAllocator : public std::allocator<T> {
 public:
  template <typename U>
  struct rebind {
    using other = DefaultInitAllocator<U>;
  };

  DefaultInitAllocator() noexcept = default;
  template <typename U>
  DefaultInitAllocator(const DefaultInitAllocator<U>& other) noexcept  // NOLINT
      : std::allocator<T>(other) {}

  template <typename U>
  void construct(U* p) noexcept(std::is_nothrow_default_constructible_v<U>) {
    ::new (static_cast<void*>(p)) U;
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

}  // namespace zen
