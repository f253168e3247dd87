// The alltoall's device layout (cuda/alltoall_plan.h).
#include "cuda/alltoall_plan.h"

#include <algorithm>

namespace zen::cuda {

Result<AlltoallPlan> planAlltoall(const Response& response,
                                  const std::vector<TensorEntry*>& entries,
                                  int ranks,
                                  int rank) {
  const TensorEntry* e = entries.size() == 1 ? entries.front() : nullptr;
  ZEN_CHECK_ARG(e != nullptr && response.shapes.size() == 1,
                "alltoall: {} tensors, {} posted here; expected one", entries.size(),
                entries.empty() || entries.front() == nullptr ? "none" : "some");
  const auto n = static_cast<size_t>(std::max(ranks, 0));
  ZEN_CHECK_ARG(ranks >= 1 && rank >= 0 && rank < ranks && response.splits.size() == n * n,
                "alltoall: {} splits for {} ranks", response.splits.size(), ranks);
  for (int64_t rows : response.splits) {
    ZEN_CHECK_ARG(rows >= 0, "alltoall: the plan holds a split of {} rows", rows);
  }
  const TensorShape& shape = response.shapes.front();
  ZEN_CHECK_ARG(shape.rank() >= 1 && e->input.shape.rank() >= 1,
                "alltoall: tensor '{}' has no first dimension", response.tensorNames.front());
  AlltoallPlan p;
  p.rowBytes = static_cast<size_t>(shape.rowSize()) * dataTypeSize(response.dtype);
  const auto me = static_cast<size_t>(rank);
  p.sendOffset.assign(n + 1, 0);
  p.recvOffset.assign(n + 1, 0);
  int64_t sent = 0;
  int64_t received = 0;
  for (size_t q = 0; q < n; ++q) {
    const int64_t out = response.splits[me * n + q];
    const int64_t in = response.splits[q * n + me];
    sent += out;
    received += in;
    p.sendOffset[q + 1] = p.sendOffset[q] + static_cast<size_t>(out) * p.rowBytes;
    p.recvOffset[q + 1] = p.recvOffset[q] + static_cast<size_t>(in) * p.rowBytes;
    p.receivedSplits.push_back(in);
  }
  ZEN_CHECK_ARG(sent == e->input.shape.dim(0), "alltoall: the plan sends {} rows, the input has {}",
                sent, e->input.shape.dim(0));
  std::vector<int64_t> dims = shape.dims();
  dims[0] = received;
  p.outputShape = TensorShape(std::move(dims));
  return p;
}

}  // namespace zen::cuda
