// AVX2 passes of the Feistel network (see feistel_simd.h).
//
// Per round, on four lanes: c = the kept half (a shift or a mask), F(c, key) = x ^ (x >> 32)
// with x = (c ^ key) * K (the low 64 bits of the product: lo(x)lo(K) + (hi(x)lo(K) +
// lo(x)hi(K)) << 32, three 32 x 32 -> 64 multiplies), then the halves recombined, exactly as
// FeistelBatch::permuteOnce / unpermuteOnce do per index. The functions carry
// target("avx2") and are only called when the CPU reports AVX2.
#include "core/feistel_simd.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace zen {

#if defined(__x86_64__)
namespace {

#define ZEN_TARGET_AVX2 __attribute__((target("avx2")))

constexpr uint64_t kMultiplier = 0x9e3779b97f4a7c15ULL;  // FeistelPermutation::round's

// Round constants broadcast once per call.
struct Lanes {
  __m128i hi;  // shift counts
  __m128i lo;
  __m256i maskHi;
  __m256i maskLo;
  __m256i keys[4];
  __m256i mulLo;  // low and high 32 bits of kMultiplier
  __m256i mulHi;
};

ZEN_TARGET_AVX2 inline Lanes lanesOf(const FeistelRounds& r) {
  Lanes l;
  l.hi = _mm_cvtsi32_si128(r.hi);
  l.lo = _mm_cvtsi32_si128(r.lo);
  l.maskHi = _mm256_set1_epi64x(static_cast<long long>(r.maskHi));
  l.maskLo = _mm256_set1_epi64x(static_cast<long long>(r.maskLo));
  for (int i = 0; i < 4; ++i) l.keys[i] = _mm256_set1_epi64x(static_cast<long long>(r.keys[i]));
  l.mulLo = _mm256_set1_epi64x(static_cast<long long>(kMultiplier & 0xffffffffULL));
  l.mulHi = _mm256_set1_epi64x(static_cast<long long>(kMultiplier >> 32));
  return l;
}

// FeistelPermutation::round on four lanes.
ZEN_TARGET_AVX2 inline __m256i roundF(__m256i c, __m256i key, const Lanes& l) {
  const __m256i a = _mm256_xor_si256(c, key);
  const __m256i low = _mm256_mul_epu32(a, l.mulLo);
  const __m256i cross = _mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(a, 32), l.mulLo),
                                         _mm256_mul_epu32(a, l.mulHi));
  const __m256i x = _mm256_add_epi64(low, _mm256_slli_epi64(cross, 32));
  return _mm256_xor_si256(x, _mm256_srli_epi64(x, 32));
}

// One forward round with split (hi: a, lo: c): x = (c << hi) | ((a ^ F(c)) & maskHi).
ZEN_TARGET_AVX2 inline __m256i forwardRound(__m256i x,
                                            __m128i hi,
                                            __m128i lo,
                                            __m256i maskHi,
                                            __m256i maskLo,
                                            __m256i key,
                                            const Lanes& l) {
  const __m256i c = _mm256_and_si256(x, maskLo);
  const __m256i a = _mm256_srl_epi64(x, lo);
  return _mm256_or_si256(_mm256_sll_epi64(c, hi),
                         _mm256_and_si256(_mm256_xor_si256(a, roundF(c, key, l)), maskHi));
}

// Undoes a round with split (hi, lo): c = y >> hi, y = (((y ^ F(c)) & maskLo) << lo) | c, in
// FeistelBatch::unpermuteOnce's naming (there the masked half is the round's hi width).
ZEN_TARGET_AVX2 inline __m256i inverseRound(
    __m256i y, __m128i shiftC, __m128i shiftA, __m256i maskA, __m256i key, const Lanes& l) {
  const __m256i c = _mm256_srl_epi64(y, shiftC);
  const __m256i a = _mm256_and_si256(_mm256_xor_si256(y, roundF(c, key, l)), maskA);
  return _mm256_or_si256(_mm256_sll_epi64(a, shiftA), c);
}

// The four forward rounds: the (hi, lo) split alternates (H, L), (L, H), (H, L), (L, H), as
// in permuteOnce.
struct ForwardRounds {
  ZEN_TARGET_AVX2 __m256i operator()(__m256i x, const Lanes& l) const {
    x = forwardRound(x, l.hi, l.lo, l.maskHi, l.maskLo, l.keys[0], l);
    x = forwardRound(x, l.lo, l.hi, l.maskLo, l.maskHi, l.keys[1], l);
    x = forwardRound(x, l.hi, l.lo, l.maskHi, l.maskLo, l.keys[2], l);
    return forwardRound(x, l.lo, l.hi, l.maskLo, l.maskHi, l.keys[3], l);
  }
};

// FeistelBatch::unpermuteOnce, rounds 3 to 0.
struct InverseRounds {
  ZEN_TARGET_AVX2 __m256i operator()(__m256i y, const Lanes& l) const {
    y = inverseRound(y, l.lo, l.hi, l.maskLo, l.keys[3], l);
    y = inverseRound(y, l.hi, l.lo, l.maskHi, l.keys[2], l);
    y = inverseRound(y, l.lo, l.hi, l.maskLo, l.keys[1], l);
    return inverseRound(y, l.hi, l.lo, l.maskHi, l.keys[0], l);
  }
};

// Rounds over in[0, count) four lanes at a time; returns how many it did (count rounded down
// to 4).
template <typename Rounds>
ZEN_TARGET_AVX2 size_t
passAvx2(const FeistelRounds& r, const uint64_t* in, uint64_t* out, size_t count) {
  const Lanes l = lanesOf(r);
  const size_t whole = count / 4 * 4;
  for (size_t i = 0; i < whole; i += 4) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), Rounds{}(x, l));
  }
  return whole;
}

bool cpuHasAvx2() {
  return __builtin_cpu_supports("avx2");
}

}  // namespace

FeistelPass feistelForwardPass() {
  static const FeistelPass pass = cpuHasAvx2() ? passAvx2<ForwardRounds> : nullptr;
  return pass;
}

FeistelPass feistelInversePass() {
  static const FeistelPass pass = cpuHasAvx2() ? passAvx2<InverseRounds> : nullptr;
  return pass;
}

#else

FeistelPass feistelForwardPass() {
  return nullptr;
}

FeistelPass feistelInversePass() {
  return nullptr;
}

#endif

}  // namespace zen
