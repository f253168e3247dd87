// The CUDA executor's bucket decisions (cuda/device_bucket.h).
#include "cuda/device_bucket.h"

#include <algorithm>

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
  if (dense == 0) return SparseOutput::kSparseToHost;
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

}  // namespace zen::cuda
