#pragma once

// Bit counts for loops that must run on the baseline x86-64 ISA, which has no popcnt
// instruction (__builtin_popcountll is a libgcc call there), yet should use the instruction
// on the CPUs that have it (all x86-64 since ~2008): the loop's body is a template over one
// of the two counters below, instantiated once in a plain function and once in a
// ZEN_TARGET_POPCNT one, and the caller picks between them once, by cpuHasPopcount().
// HardwarePopcount only becomes the instruction when inlined into a ZEN_TARGET_POPCNT
// function (elsewhere it is the libgcc call).
#include <cstdint>

namespace zen {

#if defined(__x86_64__) || defined(__i386__)
#define ZEN_TARGET_POPCNT __attribute__((target("popcnt")))
#else
#define ZEN_TARGET_POPCNT
#endif

// A branch-free bit count in plain integer arithmetic.
struct SoftwarePopcount {
  static uint64_t count(uint64_t x) {
    x = x - ((x >> 1) & 0x5555555555555555ULL);
    x = (x & 0x3333333333333333ULL) + ((x >> 2) & 0x3333333333333333ULL);
    x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0fULL;
    return (x * 0x0101010101010101ULL) >> 56;
  }
};

struct HardwarePopcount {
  static uint64_t count(uint64_t x) { return static_cast<uint64_t>(__builtin_popcountll(x)); }
};

// True when this CPU executes popcnt (always true off x86, where the builtin needs no check).
inline bool cpuHasPopcount() {
#if defined(__x86_64__) || defined(__i386__)
  return __builtin_cpu_supports("popcnt");
#else
  return true;
#endif
}

}  // namespace zen
