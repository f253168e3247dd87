#include "core/zeroed_pages.h"

#include <sys/mman.h>

#include <new>
#include <utility>

namespace zen {

ZeroedPages::~ZeroedPages() {
  if (data_ != nullptr) munmap(data_, size_);
}

ZeroedPages::ZeroedPages(ZeroedPages&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

ZeroedPages& ZeroedPages::operator=(ZeroedPages&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) munmap(data_, size_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void ZeroedPages::growZeroed(size_t bytes) {
  if (bytes <= size_) return;
  void* mapped = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapped == MAP_FAILED) throw std::bad_alloc();
  if (data_ != nullptr) munmap(data_, size_);
  data_ = static_cast<std::byte*>(mapped);
  size_ = bytes;
}

}  // namespace zen
