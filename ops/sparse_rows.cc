// Local coalescing and densification (see sparse_rows.h). Nothing here touches the wire.
#include "ops/sparse_rows.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "core/radix_sort.h"

namespace zen::ops {

Status coalesceRows(const std::vector<SparseView>& inputs,
                    int divisor,
                    SparseTensor* out,
                    CoalesceScratch* scratch) {
  ZEN_CHECK_ARG(!inputs.empty(), "coalesceRows needs at least one input");
  ZEN_CHECK_ARG(divisor >= 1, "divisor must be at least 1, got {}", divisor);
  const SparseView& first = inputs[0];
  int64_t total = 0;
  for (const SparseView& in : inputs) {
    ZEN_CHECK_ARG(
        in.numRows == first.numRows && in.rowSize == first.rowSize && in.dtype == first.dtype,
        "coalesceRows: inputs of {} x {} {} and {} x {} {}", in.numRows, in.rowSize,
        dataTypeName(in.dtype), first.numRows, first.rowSize, dataTypeName(first.dtype));
    total += in.nnz;
  }
  // (index, row address), sorted stably by index: rows of an index stay in input, then entry
  // order, which is what makes the sum deterministic. Indices are validated non-negative.
  CoalesceScratch local;
  CoalesceScratch& mem = scratch != nullptr ? *scratch : local;
  std::vector<KeyValue>& order = mem.order;
  order.clear();
  order.reserve(static_cast<size_t>(total));
  for (const SparseView& in : inputs) {
    for (int64_t k = 0; k < in.nnz; ++k) {
      order.push_back(
          KeyValue{static_cast<uint64_t>(in.indices[k]), reinterpret_cast<uintptr_t>(in.row(k))});
    }
  }
  radixSortByKey(&order, &mem.sorted);
  int64_t unique = 0;
  for (size_t k = 0; k < order.size(); ++k) {
    unique += (k == 0 || order[k].key != order[k - 1].key) ? 1 : 0;
  }
  out->numRows = first.numRows;
  out->rowSize = first.rowSize;
  out->dtype = first.dtype;
  out->indices.resize(static_cast<size_t>(unique));
  out->values.resize(static_cast<size_t>(unique) * first.rowBytes());
  dispatchDataType(first.dtype, [&](auto tag) {
    using T = decltype(tag);
    using Acc = AccumulatorT<T>;
    const int64_t rowSize = first.rowSize;
    std::vector<Acc> acc(static_cast<size_t>(rowSize));
    T* dst = reinterpret_cast<T*>(out->values.data());
    int64_t written = 0;
    for (size_t k = 0; k < order.size();) {
      std::fill(acc.begin(), acc.end(), Acc(0));
      const uint64_t idx = order[k].key;
      for (; k < order.size() && order[k].key == idx; ++k) {
        const T* src = reinterpret_cast<const T*>(order[k].value);
        for (int64_t e = 0; e < rowSize; ++e) acc[e] += toAccumulator<Acc>(src[e]);
      }
      out->indices[written] = static_cast<int64_t>(idx);
      finishRow<T>(acc.data(), rowSize, divisor, dst + written * rowSize);
      ++written;
    }
  });
  return Status::ok();
}

SparseTensor emptyLike(const SparseView& in) {
  SparseTensor t;
  t.numRows = in.numRows;
  t.rowSize = in.rowSize;
  t.dtype = in.dtype;
  return t;
}

void divideInPlace(void* data, size_t count, DataType dtype, int divisor) {
  if (divisor == 1) return;
  dispatchDataType(dtype, [&](auto tag) {
    using T = decltype(tag);
    using Acc = AccumulatorT<T>;
    T* v = static_cast<T*>(data);
    for (size_t i = 0; i < count; ++i) {
      const Acc a = toAccumulator<Acc>(v[i]);
      finishRow<T>(&a, 1, divisor, v + i);
    }
  });
}

}  // namespace zen::ops
