// The CUDA executor's bucket decisions (cuda/device_bucket.h).
#include "cuda/device_bucket.h"

#include <algorithm>

#include <fmt/format.h>

namespace zen::cuda {

bool runsOnDevice(const Response& response, int rank) {
  if (rank < 0 || static_cast<size_t>(rank) >= response.devices.size()) return false;
  return response.devices[static_cast<size_t>(rank)].kind == Device::Kind::kCuda;
}

DenseFusionPlan planDenseFusion(const Response& response,
                                const std::vector<TensorEntry*>& entries) {
  DenseFusionPlan p;
  const size_t elementSize = dataTypeSize(response.dtype);
  for (const TensorShape& shape : response.shapes) {
    const size_t bytes = static_cast<size_t>(shape.numElements()) * elementSize;
    p.offset.push_back(p.totalBytes);
    p.bytes.push_back(bytes);
    p.totalBytes += bytes;
    p.count += static_cast<size_t>(shape.numElements());
  }
  p.inPlace = entries.size() == 1 && entries.front() != nullptr;
  return p;
}

std::vector<std::vector<CopyJob>> batchCopies(const std::vector<CopyJob>& jobs,
                                              size_t maxPerLaunch) {
  std::vector<std::vector<CopyJob>> launches;
  maxPerLaunch = std::max<size_t>(maxPerLaunch, 1);
  for (const CopyJob& job : jobs) {
    if (job.bytes == 0) continue;
    if (launches.empty() || launches.back().size() == maxPerLaunch) launches.emplace_back();
    launches.back().push_back(job);
  }
  return launches;
}

DenseFusionCopies fusionCopies(const DenseFusionPlan& plan,
                               const std::vector<TensorEntry*>& entries,
                               void* fusion) {
  DenseFusionCopies c;
  auto* base = static_cast<std::byte*>(fusion);
  for (size_t i = 0; i < entries.size() && i < plan.offset.size(); ++i) {
    std::byte* slot = base + plan.offset[i];
    if (entries[i] == nullptr) {
      c.zeros.push_back(CopyJob{nullptr, slot, plan.bytes[i]});
      continue;
    }
    c.in.push_back(CopyJob{entries[i]->input.data, slot, plan.bytes[i]});
    c.out.push_back(CopyJob{slot, entries[i]->output.data, plan.bytes[i]});
  }
  return c;
}

SparseOutput sparseOutputOf(const std::vector<TensorEntry*>& entries) {
  size_t present = 0;
  size_t dense = 0;
  for (const TensorEntry* e : entries) {
    if (e == nullptr) continue;
    ++present;
    if (e->output.data != nullptr) ++dense;
  }
  if (present == 0) return SparseOutput::kNone;
  if (dense == 0) return SparseOutput::kSparse;
  if (dense != present) return SparseOutput::kMixed;
  return entries.size() == 1 ? SparseOutput::kDenseInPlace : SparseOutput::kDenseFused;
}

SparseFusionPlan planSparseFusion(const Response& response,
                                  const std::vector<TensorEntry*>& entries) {
  SparseFusionPlan p;
  for (size_t i = 0; i < response.tensorNames.size(); ++i) {
    p.firstEntry.push_back(p.nnz);
    if (i < entries.size() && entries[i] != nullptr) p.nnz += entries[i]->sparseInput.nnz;
  }
  return p;
}

Result<GatherPlan> planGather(const Response& response, int ranks) {
  const size_t tensors = response.shapes.size();
  const auto n = static_cast<size_t>(std::max(ranks, 0));
  ZEN_CHECK_ARG(ranks >= 1 && response.gatherRows.size() == tensors * n,
                "allgather: {} row counts for {} tensors of {} ranks", response.gatherRows.size(),
                tensors, ranks);
  GatherPlan p;
  p.segmentOffset.assign(n + 1, 0);
  std::vector<size_t> segmentBytes(n, 0);
  const size_t elementSize = dataTypeSize(response.dtype);
  for (size_t i = 0; i < tensors; ++i) {
    const TensorShape& shape = response.shapes[i];
    ZEN_CHECK_ARG(shape.rank() >= 1, "allgather: tensor {} has no first dimension", i);
    const size_t rowBytes = static_cast<size_t>(shape.rowSize()) * elementSize;
    int64_t rows = 0;
    for (size_t q = 0; q < n; ++q) {
      const int64_t mine = response.gatherRows[i * n + q];
      ZEN_CHECK_ARG(mine >= 0, "allgather: rank {} gives {} rows of tensor {}", q, mine, i);
      rows += mine;
      segmentBytes[q] += static_cast<size_t>(mine) * rowBytes;
    }
    ZEN_CHECK_ARG(rows == shape.numRows(),
                  "allgather: tensor {} gathers {} rows, its shape {} says {}", i, rows,
                  shape.toString(), shape.numRows());
    p.rowBytes.push_back(rowBytes);
    p.outputBytes.push_back(static_cast<size_t>(rows) * rowBytes);
  }
  for (size_t q = 0; q < n; ++q) p.segmentOffset[q + 1] = p.segmentOffset[q] + segmentBytes[q];
  return p;
}

std::vector<CopyJob> gatherInCopies(const GatherPlan& plan,
                                    const Response& response,
                                    const std::vector<TensorEntry*>& entries,
                                    int rank,
                                    void* recv) {
  std::vector<CopyJob> jobs;
  const size_t n = plan.segmentOffset.size() - 1;
  const auto me = static_cast<size_t>(rank);
  std::byte* at = static_cast<std::byte*>(recv) + plan.segmentOffset[me];
  for (size_t i = 0; i < plan.rowBytes.size(); ++i) {
    const size_t bytes = static_cast<size_t>(response.gatherRows[i * n + me]) * plan.rowBytes[i];
    if (i < entries.size() && entries[i] != nullptr && bytes > 0) {
      jobs.push_back(CopyJob{entries[i]->input.data, at, bytes});
    }
    at += bytes;
  }
  return jobs;
}

std::vector<CopyJob> gatherOutCopies(const GatherPlan& plan,
                                     const Response& response,
                                     const void* recv,
                                     const std::vector<void*>& outputs) {
  std::vector<CopyJob> jobs;
  const size_t n = plan.segmentOffset.size() - 1;
  const auto* base = static_cast<const std::byte*>(recv);
  std::vector<size_t> cursor(plan.segmentOffset.begin(), plan.segmentOffset.end() - 1);
  for (size_t i = 0; i < plan.rowBytes.size(); ++i) {
    auto* out = i < outputs.size() ? static_cast<std::byte*>(outputs[i]) : nullptr;
    size_t written = 0;
    for (size_t q = 0; q < n; ++q) {
      const size_t bytes = static_cast<size_t>(response.gatherRows[i * n + q]) * plan.rowBytes[i];
      if (out != nullptr && bytes > 0)
        jobs.push_back(CopyJob{base + cursor[q], out + written, bytes});
      written += bytes;
      cursor[q] += bytes;
    }
  }
  return jobs;
}

}  // namespace zen::cuda
