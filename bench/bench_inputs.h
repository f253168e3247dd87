#pragma once

// Benchmark inputs: nnz distinct row indices of a |G| = nnz / density tensor, drawn as the
// first nnz outputs of a random permutation (O(nnz), no hash set), with float32 values.
// Cached per (nnz, density) because generating 10^7 indices costs more than partitioning them.

#include <cstdint>
#include <map>
#include <memory>
#include <utility>

#include "core/feistel.h"
#include "core/tensor.h"

namespace zen::bench {

inline const SparseTensor& sparseInput(int64_t nnz, double density) {
  static std::map<std::pair<int64_t, double>, std::unique_ptr<SparseTensor>> cache;
  auto& slot = cache[{nnz, density}];
  if (!slot) {
    slot = std::make_unique<SparseTensor>();
    slot->numRows = static_cast<int64_t>(static_cast<double>(nnz) / density);
    slot->rowSize = 1;
    slot->dtype = DataType::kFloat32;
    const FeistelPermutation perm(slot->numRows, 1234);
    slot->indices.resize(nnz);
    slot->values.resize(nnz * sizeof(float));
    auto* v = reinterpret_cast<float*>(slot->values.data());
    for (int64_t i = 0; i < nnz; ++i) {
      slot->indices[i] = static_cast<int64_t>(perm.forward(i));
      v[i] = static_cast<float>(i % 7) - 3.0f;
    }
  }
  return *slot;
}

}  // namespace zen::bench
