// The reducescatter's device layout (cuda/reducescatter_plan.h).
#include "cuda/reducescatter_plan.h"

#include <algorithm>

#include "ops/exchange_checks.h"

namespace zen::cuda {

Result<ReducescatterPlan> planReducescatter(const Response& response,
                                            const std::vector<TensorEntry*>& entries,
                                            int ranks) {
  ZEN_CHECK_ARG(ranks >= 1, "reducescatter: {} ranks", ranks);
  ReducescatterPlan p;
  ZEN_ASSIGN_OR_RETURN(p.tensors, ops::checkReducescatter(response, entries));
  p.used = ops::scatterBlocks(p.tensors, ranks);
  p.blockElements = *std::max_element(p.used.begin(), p.used.end());
  p.direct =
      entries.size() == 1 && entries.front() != nullptr && p.tensors.front().rows % ranks == 0;
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
  for (size_t i = 0; i < plan.tensors.size(); ++i) {
    const TensorEntry* e = i < entries.size() ? entries[i] : nullptr;
    for (int q = 0; q < n; ++q) {
      const ops::ElementRange piece = ops::scatterPiece(plan.tensors[i], n, q);
      std::byte* slot = base + (static_cast<size_t>(q) * plan.blockElements + cursor[q]) * width;
      cursor[q] += piece.size();
      if (piece.size() == 0) continue;
      const size_t bytes = piece.size() * width;
      if (e == nullptr) {
        c.zeros.push_back(CopyJob{nullptr, slot, bytes});
        continue;
      }
      const size_t from = piece.begin * width;
      c.in.push_back(CopyJob{static_cast<const std::byte*>(e->input.data) + from, slot, bytes});
      if (q == rank) c.out.push_back(CopyJob{slot, e->output.data, bytes});
    }
  }
  return c;
}

}  // namespace zen::cuda
