#pragma once

#include <cstdint>
#include <vector>

namespace zen {

// A key and what travels with it (an entry number, a row address as uintptr_t).
struct KeyValue {
  uint64_t key;
  uint64_t value;
};

// Sorts *items by key, stably: items with equal keys keep their order, so the result equals
// std::stable_sort by key (and std::sort of (key, value) pairs when the values ascend in
// input order). Least-significant-digit radix sort, 8 bits per pass, only over the digits
// below the highest set bit of any key, skipping a digit every key shares: 3 passes for
// row indices below 2^24, whatever the count. Each pass scatters into `scratch` and swaps
// it with *items, so the two vectors may trade buffers; keep both across calls to reuse their
// memory.
void radixSortByKey(std::vector<KeyValue>* items, std::vector<KeyValue>* scratch);

}  // namespace zen
