#include "cuda/gpu_sparse_plan.h"

#include <algorithm>
#include <numeric>

#include "core/dtype.h"

namespace zen::cuda {

namespace {

std::string dtypeText(uint64_t v) {
  return v <= static_cast<uint64_t>(DataType::kInt64)
             ? std::string(dataTypeName(static_cast<DataType>(v)))
             : std::to_string(v);
}
std::string opText(uint64_t v) {
  return v <= static_cast<uint64_t>(ReduceOp::kAverage)
             ? std::string(reduceOpName(static_cast<ReduceOp>(v)))
             : std::to_string(v);
}
std::string schemeText(uint64_t v) {
  return v <= static_cast<uint64_t>(Scheme::kDense)
             ? std::string(schemeName(static_cast<Scheme>(v)))
             : std::to_string(v);
}

}  // namespace

Status checkGpuCallSummaries(const std::vector<GpuCallSummary>& all, uint64_t* totalNnz) {
  ZEN_CHECK_ARG(!all.empty(), "gpu sparse allreduce: no call summaries");
  for (size_t p = 0; p < all.size(); ++p) {
    if (all[p].badEntry != ~uint64_t{0}) {
      return ZEN_ERROR(StatusCode::kInvalidArgument,
                       "gpu sparse allreduce: rank {} passed index {} at entry {}, outside "
                       "[0, {})",
                       p, all[p].badIndex, all[p].badEntry, all[p].numRows);
    }
  }
  const GpuCallSummary& r0 = all[0];
  for (size_t p = 1; p < all.size(); ++p) {
    const GpuCallSummary& s = all[p];
    auto differ = [&](const char* what, const std::string& mine, const std::string& theirs) {
      return ZEN_ERROR(StatusCode::kInvalidArgument,
                       "gpu sparse allreduce: rank {} passed {} {}, rank 0 {}", p, what, mine,
                       theirs);
    };
    if (s.numRows != r0.numRows) {
      return differ("numRows", std::to_string(s.numRows), std::to_string(r0.numRows));
    }
    if (s.rowSize != r0.rowSize) {
      return differ("rowSize", std::to_string(s.rowSize), std::to_string(r0.rowSize));
    }
    if (s.dtype != r0.dtype) return differ("dtype", dtypeText(s.dtype), dtypeText(r0.dtype));
    if (s.op != r0.op) return differ("op", opText(s.op), opText(r0.op));
    if (s.scheme != r0.scheme) {
      return differ("scheme", schemeText(s.scheme), schemeText(r0.scheme));
    }
    if (s.seed != r0.seed) return differ("seed", std::to_string(s.seed), std::to_string(r0.seed));
  }
  uint64_t total = 0;
  for (const auto& s : all) total += s.nnz;
  *totalNnz = total;
  return Status::ok();
}

Result<Scheme> resolveGpuScheme(Scheme requested) {
  switch (requested) {
    case Scheme::kAuto:
    case Scheme::kZen:
      return Scheme::kZen;
    case Scheme::kAgSparse:
    case Scheme::kBlocks:
    case Scheme::kDense:
    case Scheme::kHc:
      return requested;
  }
  return ZEN_ERROR(StatusCode::kUnimplemented,
                   "scheme {} has no GPU implementation (zen, hc, agsparse, blocks and dense "
                   "do)",
                   static_cast<int>(requested));
}

std::vector<size_t> segmentOffsets(const std::vector<uint64_t>& counts, size_t unitBytes) {
  std::vector<size_t> offsets(counts.size() + 1, 0);
  for (size_t i = 0; i < counts.size(); ++i) {
    offsets[i + 1] = offsets[i] + static_cast<size_t>(counts[i]) * unitBytes;
  }
  return offsets;
}

double imbalanceOf(const std::vector<uint64_t>& counts) {
  if (counts.empty()) return 1.0;
  const uint64_t total = std::accumulate(counts.begin(), counts.end(), uint64_t{0});
  if (total == 0) return 1.0;
  const uint64_t most = *std::max_element(counts.begin(), counts.end());
  return static_cast<double>(most) * static_cast<double>(counts.size()) /
         static_cast<double>(total);
}

}  // namespace zen::cuda
