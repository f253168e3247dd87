// A sparse bucket's result delivered on the device (cuda/sparse_result.h).
#include "cuda/sparse_result.h"

#include <cstddef>
#include <memory>

#include "core/handle.h"
#include "cuda/batched_copy.h"
#include "cuda/device_memory.h"
#include "cuda/sparse_result_kernels.h"
#include "cuda/sparse_result_plan.h"

namespace zen::cuda {

Status SparseResultDelivery::deliver(const Response& r,
                                     const std::vector<TensorEntry*>& entries,
                                     const SparseResultInput& in,
                                     bool* queued) {
  *queued = false;
  ZEN_ASSIGN_OR_RETURN(const std::vector<int64_t> cuts, sparseResultCuts(r));
  const size_t rowBytes = static_cast<size_t>(r.rowSize) * dataTypeSize(r.dtype);
  const SparseResultLayout layout = layoutSparseResult(in.nnz, rowBytes);
  std::shared_ptr<void> memory;
  ZEN_RETURN_IF_ERROR(ownedDeviceMemory(in.device, layout.bytes, &memory));
  auto* base = static_cast<std::byte*>(memory.get());
  auto* local = reinterpret_cast<int64_t*>(base);
  std::byte* rows = base == nullptr ? nullptr : base + layout.valuesOffset;
  SortedSplitArgs a;
  a.indices = in.indices;
  a.values = in.values;
  a.nnz = in.nnz;
  a.rowBytes = rowBytes;
  a.keyBits = sparseResultKeyBits(r.totalRows);
  a.cuts = &cuts;
  a.localIndices = local;
  a.sortedValues = rows;
  const int64_t* pinnedBounds = nullptr;
  ZEN_RETURN_IF_ERROR(sortAndSplitRows(a, &workspace_, in.stream, &pinnedBounds));
  if (in.nnz > 0) ZEN_RETURN_IF_ERROR(in.wait("sparse result's split"));
  const std::vector<int64_t> bounds(pinnedBounds, pinnedBounds + cuts.size());
  ZEN_ASSIGN_OR_RETURN(const SparseResultSplit split,
                       splitSparseResult(bounds, in.nnz, pinnedBounds[cuts.size()]));

  std::vector<CopyJob> zeros;  // dense outputs, zero-filled before their rows land
  for (size_t i = 0; i < entries.size(); ++i) {
    const TensorEntry* e = entries[i];
    if (e == nullptr || e->output.data == nullptr) continue;
    zeros.push_back(
        CopyJob{nullptr, e->output.data, static_cast<size_t>(r.shapes[i].numRows()) * rowBytes});
  }
  ZEN_RETURN_IF_ERROR(batchedCopy(zeros, in.stream));
  *queued = !zeros.empty();
  for (size_t i = 0; i < entries.size(); ++i) {
    TensorEntry* e = entries[i];
    if (e == nullptr) continue;
    const int64_t begin = split.begin[i];
    const int64_t count = split.count[i];
    std::byte* slice = rows == nullptr ? nullptr : rows + static_cast<size_t>(begin) * rowBytes;
    if (e->output.data != nullptr) {
      ZEN_RETURN_IF_ERROR(scatterRows(slice, local + begin, count, rowBytes, e->output.data,
                                      workspace_.smCount(), in.stream));
      continue;
    }
    OpResult& out = e->handle->result();
    out.sparse = SparseTensor{};
    out.sparse.numRows = r.shapes[i].numRows();
    out.sparse.rowSize = r.rowSize;
    out.sparse.dtype = r.dtype;
    out.sparseDevice = Device::cuda(in.device);
    out.sparseDeviceNnz = count;
    out.sparseIndicesOnDevice.reset();
    out.sparseValuesOnDevice.reset();
    if (count == 0) continue;
    // Slices sharing the bucket's allocation (shared_ptr's aliasing constructor).
    out.sparseIndicesOnDevice = std::shared_ptr<void>(memory, local + begin);
    out.sparseValuesOnDevice = std::shared_ptr<void>(memory, slice);
  }
  return Status::ok();
}

}  // namespace zen::cuda
