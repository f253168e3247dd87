// The alltoall's and reducescatter's plan checks (ops/exchange_checks.h).
#include "ops/exchange_checks.h"

#include <algorithm>
#include <utility>

namespace zen::ops {

Result<AlltoallRows> checkAlltoall(const Response& response,
                                   const std::vector<TensorEntry*>& entries,
                                   int ranks,
                                   int rank) {
  const auto posted = std::count_if(entries.begin(), entries.end(),
                                    [](const TensorEntry* e) { return e != nullptr; });
  ZEN_CHECK_ARG(entries.size() == 1 && posted == 1 && response.shapes.size() == 1,
                "alltoall: {} tensors, {} posted here; expected one", entries.size(), posted);
  const TensorEntry& e = *entries.front();
  const auto n = static_cast<size_t>(std::max(ranks, 0));
  ZEN_CHECK_ARG(ranks >= 1 && rank >= 0 && rank < ranks && response.splits.size() == n * n,
                "alltoall: {} splits for {} ranks", response.splits.size(), ranks);
  for (int64_t rows : response.splits) {
    ZEN_CHECK_ARG(rows >= 0, "alltoall: the plan holds a split of {} rows", rows);
  }
  const TensorShape& shape = response.shapes.front();
  ZEN_CHECK_ARG(shape.rank() >= 1 && e.input.shape.rank() >= 1,
                "alltoall: tensor '{}' has no first dimension", response.tensorNames.front());
  AlltoallRows a;
  a.rowBytes = static_cast<size_t>(shape.rowSize()) * dataTypeSize(response.dtype);
  const auto me = static_cast<size_t>(rank);
  int64_t sent = 0;
  int64_t received = 0;
  for (size_t q = 0; q < n; ++q) {
    a.sendRows.push_back(response.splits[me * n + q]);
    a.recvRows.push_back(response.splits[q * n + me]);
    sent += a.sendRows.back();
    received += a.recvRows.back();
  }
  ZEN_CHECK_ARG(sent == e.input.shape.dim(0), "alltoall: the plan sends {} rows, the input has {}",
                sent, e.input.shape.dim(0));
  std::vector<int64_t> dims = shape.dims();
  dims[0] = received;
  a.outputShape = TensorShape(std::move(dims));
  return a;
}

Result<std::vector<ReducescatterTensor>> checkReducescatter(
    const Response& response, const std::vector<TensorEntry*>& entries) {
  ZEN_CHECK_ARG(entries.size() == response.shapes.size(), "reducescatter: {} entries for {} shapes",
                entries.size(), response.shapes.size());
  std::vector<ReducescatterTensor> tensors;
  for (size_t i = 0; i < entries.size(); ++i) {
    const TensorShape& shape = response.shapes[i];
    ZEN_CHECK_ARG(shape.rank() >= 1, "reducescatter: tensor {} is a scalar", i);
    ReducescatterTensor x;
    x.rows = shape.dim(0);
    x.rowElements = shape.rowSize();
    if (entries[i] != nullptr) {
      x.input = entries[i]->input.data;
      x.output = entries[i]->output.data;
    }
    tensors.push_back(x);
  }
  return tensors;
}

}  // namespace zen::ops
