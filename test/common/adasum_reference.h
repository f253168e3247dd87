#pragma once

// The reference the Adasum tests check against: adasum(a, b) of ALGORITHMS.md / ops/adasum.h
// in double, straight from the formula, and the binary tree over the ranks' vectors.

#include <cstddef>
#include <vector>

namespace zen::testing {

inline std::vector<double> adasumPair(const std::vector<double>& a, const std::vector<double>& b) {
  double dot = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    dot += a[i] * b[i];
    aa += a[i] * a[i];
    bb += b[i] * b[i];
  }
  const double ca = aa == 0 ? 1 : 1 - dot / (2 * aa);
  const double cb = bb == 0 ? 1 : 1 - dot / (2 * bb);
  std::vector<double> out(a.size());
  for (size_t i = 0; i < a.size(); ++i) out[i] = ca * a[i] + cb * b[i];
  return out;
}

// One tensor's vectors, one per rank (a power of two of them): ranks (0,1), (2,3), ...
// combined, then those results pairwise, and so on.
inline std::vector<double> adasumTree(std::vector<std::vector<double>> v) {
  for (size_t d = 1; d < v.size(); d *= 2) {
    for (size_t r = 0; r < v.size(); r += 2 * d) v[r] = adasumPair(v[r], v[r + d]);
  }
  return v.front();
}

}  // namespace zen::testing
