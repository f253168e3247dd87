#pragma once

#include <cstddef>

namespace zen {

// A buffer whose pages the kernel fills with zeros when they are first touched (an anonymous
// private mapping). A large array of which a step may use a few rows (an aggregator's |I_j|
// accumulators during compact steps) then costs address space, not a fill at first use or
// resident memory, until rows are written.
class ZeroedPages {
 public:
  ZeroedPages() = default;
  ~ZeroedPages();
  ZeroedPages(ZeroedPages&& other) noexcept;
  ZeroedPages& operator=(ZeroedPages&& other) noexcept;
  ZeroedPages(const ZeroedPages&) = delete;
  ZeroedPages& operator=(const ZeroedPages&) = delete;

  // At least `bytes`, every byte zero. The caller must have zeroed what it wrote: the mapping
  // is kept when large enough, else replaced by a larger one (nothing copied). Throws
  // std::bad_alloc when the kernel refuses the mapping, as a std::vector would.
  void growZeroed(size_t bytes);

  std::byte* data() { return data_; }
  const std::byte* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace zen
