#pragma once

// Test and benchmark inputs: realistic sparse gradients (uniform or Zipf-skewed row indices,
// optionally repeated as in uncoalesced torch gradients) with integer-valued values, so sums
// are exact in every dtype and results can be compared bit for bit.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <unordered_set>
#include <vector>

#include "core/dtype.h"
#include "core/index_map.h"
#include "core/push_lists.h"
#include "core/tensor.h"

namespace zen::testing {

enum class Skew { kUniform, kZipf };

// A Zipf-like draw over [0, numRows): P(idx) ~ 1 / (idx + 1)^s, by inverting the continuous
// CDF, so low ids (frequent tokens) dominate as in real embedding gradients.
inline int64_t zipfDraw(int64_t numRows, double s, std::mt19937_64& rng) {
  const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
  const double top = std::pow(static_cast<double>(numRows) + 1.0, 1.0 - s);
  const double x = std::pow(1.0 + u * (top - 1.0), 1.0 / (1.0 - s)) - 1.0;
  return std::clamp<int64_t>(static_cast<int64_t>(x), 0, numRows - 1);
}

// `count` distinct row indices (count <= numRows), in random order.
inline std::vector<int64_t> distinctIndices(
    int64_t numRows, int64_t count, Skew skew, std::mt19937_64& rng, double zipfS = 1.1) {
  std::vector<int64_t> out;
  if (count >= numRows) {
    out.resize(numRows);
    for (int64_t i = 0; i < numRows; ++i) out[i] = i;
  } else {
    std::unordered_set<int64_t> seen;
    seen.reserve(count * 2);
    std::uniform_int_distribution<int64_t> uniform(0, numRows - 1);
    // Zipf's tail is thin: after many misses fall back to uniform so count is reached.
    int64_t misses = 0;
    while (static_cast<int64_t>(out.size()) < count) {
      const bool zipf = skew == Skew::kZipf && misses < 50 * count;
      const int64_t idx = zipf ? zipfDraw(numRows, zipfS, rng) : uniform(rng);
      if (seen.insert(idx).second) {
        out.push_back(idx);
      } else {
        ++misses;
      }
    }
  }
  std::shuffle(out.begin(), out.end(), rng);
  return out;
}

// A sparse tensor over the given indices with integer values in [-4, 4] (0 included: a row
// that is present but zero must still be synchronized).
inline SparseTensor makeSparse(std::vector<int64_t> indices,
                               int64_t numRows,
                               int64_t rowSize,
                               DataType dtype,
                               std::mt19937_64& rng) {
  SparseTensor t;
  t.numRows = numRows;
  t.rowSize = rowSize;
  t.dtype = dtype;
  t.indices = std::move(indices);
  t.values.resize(t.indices.size() * t.rowBytes());
  std::uniform_int_distribution<int> value(-4, 4);
  dispatchDataType(dtype, [&](auto tag) {
    using T = decltype(tag);
    auto* v = reinterpret_cast<T*>(t.values.data());
    for (size_t e = 0; e < t.indices.size() * rowSize; ++e) {
      v[e] = fromAccumulator<T>(static_cast<AccumulatorT<T>>(value(rng)));
    }
  });
  return t;
}

// Coalesced content of a tensor: index -> row summed in double. The dense reference.
using RowMap = std::map<int64_t, std::vector<double>>;

inline void addRow(RowMap& m, int64_t idx, const std::byte* row, int64_t rowSize, DataType dtype) {
  auto& acc = m[idx];
  acc.resize(rowSize, 0.0);
  dispatchDataType(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* r = reinterpret_cast<const T*>(row);
    for (int64_t e = 0; e < rowSize; ++e) {
      acc[e] += static_cast<double>(toAccumulator<AccumulatorT<T>>(r[e]));
    }
  });
}

inline RowMap coalesce(const SparseView& t) {
  RowMap m;
  for (int64_t i = 0; i < t.nnz; ++i) addRow(m, t.indices[i], t.row(i), t.rowSize, t.dtype);
  return m;
}

// The push lists mapped back to global indices; every index must appear once.
inline RowMap fromPushLists(const IndexMap& map, const PushLists& lists, int64_t* repeats) {
  RowMap m;
  *repeats = 0;
  for (int p = 0; p < lists.numParts(); ++p) {
    for (int64_t i = lists.offsets[p]; i < lists.offsets[p + 1]; ++i) {
      const auto idx = static_cast<int64_t>(map.indexOf(p, lists.positions[i]));
      *repeats += m.count(idx);
      addRow(m, idx, lists.row(i), lists.rowSize, lists.dtype);
    }
  }
  return m;
}

}  // namespace zen::testing
