#pragma once

// Test helpers shared by the core tests: random row-sparse inputs (uniform and Zipf-skewed,
// with overlapping and repeated indices) and a dense reference sum in double / int64 that
// the algorithms' results are checked against.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "core/tensor.h"

namespace zen {
namespace reference {

inline constexpr DataType kAllTypes[] = {DataType::kFloat32,  DataType::kFloat16,
                                         DataType::kBFloat16, DataType::kFloat64,
                                         DataType::kInt32,    DataType::kInt64};

inline bool isInteger(DataType dtype) {
  return dtype == DataType::kInt32 || dtype == DataType::kInt64;
}

inline double loadDouble(const void* data, DataType dtype, size_t i) {
  return dispatchDataType(dtype, [&](auto tag) {
    using T = decltype(tag);
    return static_cast<double>(toAccumulator<AccumulatorT<T>>(static_cast<const T*>(data)[i]));
  });
}

inline int64_t loadInt(const void* data, DataType dtype, size_t i) {
  return dtype == DataType::kInt32 ? static_cast<const int32_t*>(data)[i]
                                   : static_cast<const int64_t*>(data)[i];
}

// Stores v (exactly representable for the small integers the tests use) as dtype.
inline void storeDouble(void* data, DataType dtype, size_t i, double v) {
  dispatchDataType(dtype, [&](auto tag) {
    using T = decltype(tag);
    static_cast<T*>(data)[i] = fromAccumulator<T>(static_cast<AccumulatorT<T>>(v));
  });
}

// Rejection-inversion Zipf sampler (Hoermann & Derflinger) over ranks 1..n with P(k) ~ k^-s:
// rank 1 is the hottest, like token ids sorted by frequency.
class ZipfSampler {
 public:
  ZipfSampler(uint64_t n, double s) : n_(static_cast<double>(n)), s_(s) {
    hX1_ = hIntegral(1.5) - 1.0;
    hN_ = hIntegral(n_ + 0.5);
    threshold_ = 2.0 - hIntegralInverse(hIntegral(2.5) - h(2.0));
  }

  template <typename Rng>
  uint64_t operator()(Rng& rng) {
    std::uniform_real_distribution<double> uniform(0.0, 1.0);
    for (;;) {
      const double u = hN_ + uniform(rng) * (hX1_ - hN_);
      const double x = hIntegralInverse(u);
      double k = std::floor(x + 0.5);
      k = std::clamp(k, 1.0, n_);
      if (k - x <= threshold_ || u >= hIntegral(k + 0.5) - h(k)) {
        return static_cast<uint64_t>(k);
      }
    }
  }

 private:
  static double helper1(double x) { return std::abs(x) > 1e-8 ? std::log1p(x) / x : 1 - x / 2; }
  static double helper2(double x) { return std::abs(x) > 1e-8 ? std::expm1(x) / x : 1 + x / 2; }
  double h(double x) const { return std::exp(-s_ * std::log(x)); }
  double hIntegral(double x) const {
    const double lx = std::log(x);
    return helper2((1.0 - s_) * lx) * lx;
  }
  double hIntegralInverse(double x) const {
    double t = x * (1.0 - s_);
    if (t < -1.0) t = -1.0;
    return std::exp(helper1(t) * x);
  }

  double n_, s_, hX1_, hN_, threshold_;
};

// `unique` distinct indices of [0, numRows), uniformly at random, in random order.
inline std::vector<int64_t> uniformIndices(std::mt19937_64& rng, int64_t numRows, int64_t unique) {
  std::vector<int64_t> out;
  if (unique * 4 >= numRows) {
    out.resize(numRows);
    std::iota(out.begin(), out.end(), 0);
    std::shuffle(out.begin(), out.end(), rng);
    out.resize(unique);
    return out;
  }
  std::uniform_int_distribution<int64_t> pick(0, numRows - 1);
  while (static_cast<int64_t>(out.size()) < unique) {
    while (static_cast<int64_t>(out.size()) < unique) out.push_back(pick(rng));
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
  }
  std::shuffle(out.begin(), out.end(), rng);
  out.resize(unique);
  return out;
}

// Zipf(s) draws (index = rank - 1) until `unique` distinct indices were seen; repeated draws
// are kept, so the result is uncoalesced like a torch embedding gradient.
inline std::vector<int64_t> zipfIndices(std::mt19937_64& rng,
                                        int64_t numRows,
                                        int64_t unique,
                                        double s = 1.0) {
  ZipfSampler zipf(static_cast<uint64_t>(numRows), s);
  std::vector<uint8_t> seen(static_cast<size_t>(numRows), 0);
  std::vector<int64_t> out;
  int64_t distinct = 0;
  while (distinct < unique) {
    const auto idx = static_cast<int64_t>(zipf(rng) - 1);
    distinct += seen[idx] == 0;
    seen[idx] = 1;
    out.push_back(idx);
  }
  return out;
}

// A rank's tensor: the given indices with small random integer values in [-3, 3] (exact in
// every dtype, sums stay exact even in bfloat16 for the sizes the tests use).
inline SparseTensor makeRank(std::mt19937_64& rng,
                             std::vector<int64_t> indices,
                             int64_t numRows,
                             int64_t rowSize,
                             DataType dtype) {
  SparseTensor t;
  t.numRows = numRows;
  t.rowSize = rowSize;
  t.dtype = dtype;
  t.indices = std::move(indices);
  t.values.resize(t.indices.size() * t.rowBytes());
  std::uniform_int_distribution<int> value(-3, 3);
  for (size_t e = 0; e < t.indices.size() * static_cast<size_t>(rowSize); ++e) {
    storeDouble(t.values.data(), dtype, e, value(rng));
  }
  return t;
}

// Appends `extra` repeats of randomly chosen existing indices (duplicates within a rank).
inline void addDuplicates(std::mt19937_64& rng, std::vector<int64_t>* indices, int64_t extra) {
  if (indices->empty()) return;
  std::uniform_int_distribution<size_t> pick(0, indices->size() - 1);
  for (int64_t i = 0; i < extra; ++i) indices->push_back((*indices)[pick(rng)]);
}

inline std::vector<SparseView> views(const std::vector<SparseTensor>& ranks) {
  std::vector<SparseView> v;
  v.reserve(ranks.size());
  for (const auto& r : ranks) v.push_back(r.view());
  return v;
}

// The dense sum of the ranks, exact: double for float dtypes (the test values are small
// integers), int64 for integer dtypes. touched[r] = some rank sent row r.
struct DenseSum {
  int64_t numRows = 0;
  int64_t rowSize = 1;
  DataType dtype = DataType::kFloat32;
  std::vector<double> f;
  std::vector<int64_t> i;
  std::vector<uint8_t> touched;

  int64_t touchedRows() const { return std::count(touched.begin(), touched.end(), 1); }
};

inline DenseSum denseSum(const std::vector<SparseView>& ranks) {
  DenseSum ref;
  ref.numRows = ranks.at(0).numRows;
  ref.rowSize = ranks[0].rowSize;
  ref.dtype = ranks[0].dtype;
  const size_t elements = static_cast<size_t>(ref.numRows * ref.rowSize);
  ref.f.assign(elements, 0.0);
  ref.i.assign(elements, 0);
  ref.touched.assign(static_cast<size_t>(ref.numRows), 0);
  for (const SparseView& r : ranks) {
    for (int64_t k = 0; k < r.nnz; ++k) {
      const int64_t row = r.indices[k];
      ref.touched[row] = 1;
      for (int64_t e = 0; e < r.rowSize; ++e) {
        const size_t src = static_cast<size_t>(k * r.rowSize + e);
        const size_t dst = static_cast<size_t>(row * r.rowSize + e);
        if (isInteger(r.dtype)) {
          ref.i[dst] += loadInt(r.values, r.dtype, src);
        } else {
          ref.f[dst] += loadDouble(r.values, r.dtype, src);
        }
      }
    }
  }
  return ref;
}

// Element k of the reference divided by `divisor` (n for Average): integers truncate toward
// zero; floats are compared within relTol (0 = bit-exact).
inline ::testing::AssertionResult elementMatches(
    const DenseSum& ref, size_t k, const void* got, size_t gotIndex, int divisor, double relTol) {
  if (isInteger(ref.dtype)) {
    const int64_t want = ref.i[k] / divisor;
    const int64_t have = loadInt(got, ref.dtype, gotIndex);
    if (have == want) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure()
           << "element " << k << ": got " << have << ", want " << want;
  }
  const double want = ref.f[k] / divisor;
  const double have = loadDouble(got, ref.dtype, gotIndex);
  const bool ok =
      relTol == 0 ? have == want : std::abs(have - want) <= relTol * std::max(1.0, std::abs(want));
  if (ok) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "element " << k << ": got " << have << ", want " << want
                                       << " (relTol " << relTol << ")";
}

// A coalesced, index-sorted sparse result against the reference: exactly the touched rows.
inline ::testing::AssertionResult sparseMatches(const SparseTensor& out,
                                                const DenseSum& ref,
                                                int divisor = 1,
                                                double relTol = 0) {
  if (out.numRows != ref.numRows || out.rowSize != ref.rowSize || out.dtype != ref.dtype) {
    return ::testing::AssertionFailure() << "shape/dtype mismatch: " << out.numRows << "x"
                                         << out.rowSize << " " << dataTypeName(out.dtype);
  }
  if (out.nnz() != ref.touchedRows()) {
    return ::testing::AssertionFailure()
           << "output has " << out.nnz() << " rows, " << ref.touchedRows() << " were sent";
  }
  for (int64_t k = 0; k < out.nnz(); ++k) {
    const int64_t row = out.indices[k];
    if (row < 0 || row >= ref.numRows || !ref.touched[row]) {
      return ::testing::AssertionFailure() << "row " << row << " was never sent";
    }
    if (k > 0 && row <= out.indices[k - 1]) {
      return ::testing::AssertionFailure() << "indices not strictly ascending at " << k;
    }
    for (int64_t e = 0; e < ref.rowSize; ++e) {
      auto m = elementMatches(ref, static_cast<size_t>(row * ref.rowSize + e), out.values.data(),
                              static_cast<size_t>(k * ref.rowSize + e), divisor, relTol);
      if (!m) return m << " (row " << row << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

// A dense [numRows x rowSize] result of ref.dtype (untouched rows must be zero).
inline ::testing::AssertionResult denseMatches(const void* dense,
                                               const DenseSum& ref,
                                               int divisor = 1,
                                               double relTol = 0) {
  for (size_t k = 0; k < ref.f.size(); ++k) {
    auto m = elementMatches(ref, k, dense, k, divisor, relTol);
    if (!m) return m;
  }
  return ::testing::AssertionSuccess();
}

// Sorts a sparse tensor's (index, row) pairs by index.
inline void sortByIndex(SparseTensor* t) {
  std::vector<int64_t> order(t->indices.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](int64_t a, int64_t b) { return t->indices[a] < t->indices[b]; });
  SparseTensor sorted;
  sorted.numRows = t->numRows;
  sorted.rowSize = t->rowSize;
  sorted.dtype = t->dtype;
  sorted.indices.resize(order.size());
  sorted.values.resize(t->values.size());
  for (size_t k = 0; k < order.size(); ++k) {
    sorted.indices[k] = t->indices[order[k]];
    std::memcpy(sorted.row(static_cast<int64_t>(k)), t->row(order[k]), t->rowBytes());
  }
  *t = std::move(sorted);
}

// Tolerance of an Average (one rounding of sum * (1/n) in the accumulator, one to dtype).
inline double averageTolerance(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat16:
      return 1e-3;
    case DataType::kBFloat16:
      return 4e-3;
    case DataType::kFloat64:
      return 1e-12;
    case DataType::kFloat32:
      return 1e-6;
    default:
      return 0;
  }
}

}  // namespace reference
}  // namespace zen
