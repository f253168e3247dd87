#pragma once

// The number of set bits of a bitmap, the check every hash-bitmap and dense-set decoder runs
// against its row count: with the popcnt instruction where the CPU has it (core/popcount.h),
// chosen once per process, since without it the count is a libgcc call per 64-bit word.
#include <cstddef>
#include <cstdint>

namespace zen {

// Set bits of bitmap[0, bytes): whole 64-bit words, then a last partial word of bytes % 8
// bytes. Any alignment; byte order does not change a count.
uint64_t bitmapPopcount(const void* bitmap, size_t bytes);

// The same with the counter named: hardware true runs the popcnt version and needs
// cpuHasPopcount() (tests compare the two).
uint64_t bitmapPopcount(const void* bitmap, size_t bytes, bool hardware);

}  // namespace zen
