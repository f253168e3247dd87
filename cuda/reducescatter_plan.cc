// The reducescatter's device layout (cuda/reducescatter_plan.h).
#include "cuda/reducescatter_plan.h"

#include <algorithm>

namespace zen::cuda {

Result<ReducescatterPlan> planReducescatter(const Response& response,
                                            const std::vector<TensorEntry*>& entries,
                                            int ranks) {
  ZEN_CHECK_ARG(ranks >= 1, "reducescatter: {} ranks", ranks);
  ZEN_CHECK_ARG(entries.size() == response.shapes.size(), "reducescatter: {} entries for {} shapes",
                entries.size(), response.shapes.size());
  ReducescatterPlan p;
  p.used.assign(static_cast<size_t>(ranks), 0);
  for (size_t i = 0; i < response.shapes.size(); ++i) {
    const TensorShape& shape = response.shapes[i];
    ZEN_CHECK_ARG(shape.rank() >= 1, "reducescatter: tensor {} is a scalar", i);
    p.rows.push_back(shape.dim(0));
    p.rowElements.push_back(shape.rowSize());
    for (int q = 0; q < ranks; ++q) {
      p.used[q] += static_cast<size_t>(scatterRows(shape.dim(0), ranks, q) * shape.rowSize());
    }
  }
  p.blockElements = *std::max_element(p.used.begin(), p.used.end());
  p.direct = entries.size() == 1 && entries.front() != nullptr && p.rows.front() % ranks == 0;
  return p;
}

DenseFusionCopies reducescatterCopies(const ReducescatterPlan& plan,
                                      const Response& response,
                                      const std::vector<TensorEntry*>& entries,
                                      int rank,
                                      void* staging) {
  DenseFusionCopies c;
  const int n = static_cast<int>(plan.used.size());
  const size_t width = dataTypeSize(response.dtype);
  auto* base = static_cast<std::byte*>(staging);
  std::vector<size_t> cursor(plan.used.size(), 0);  // elements into each block
  for (size_t i = 0; i < plan.rows.size(); ++i) {
    const TensorEntry* e = i < entries.size() ? entries[i] : nullptr;
    for (int q = 0; q < n; ++q) {
      const auto elements =
          static_cast<size_t>(scatterRows(plan.rows[i], n, q) * plan.rowElements[i]);
      std::byte* slot = base + (static_cast<size_t>(q) * plan.blockElements + cursor[q]) * width;
      cursor[q] += elements;
      if (elements == 0) continue;
      const size_t bytes = elements * width;
      if (e == nullptr) {
        c.zeros.push_back(CopyJob{nullptr, slot, bytes});
        continue;
      }
      const auto from =
          static_cast<size_t>(scatterOffset(plan.rows[i], n, q) * plan.rowElements[i]) * width;
      c.in.push_back(CopyJob{static_cast<const std::byte*>(e->input.data) + from, slot, bytes});
      if (q == rank) c.out.push_back(CopyJob{slot, e->output.data, bytes});
    }
  }
  return c;
}

}  // namespace zen::cuda
