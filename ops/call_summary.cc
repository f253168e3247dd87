// The call summary's verdict and the first exchange that carries it (rules in the header).
#include "ops/call_summary.h"

#include <fmt/format.h>

#include <string>
#include <utility>

namespace zen::ops {

Scheme resolveScheme(Scheme scheme) {
  return scheme == Scheme::kAuto ? Scheme::kZen : scheme;
}

CallInfo describeCall(const SparseAllreduceOptions& o, int rank, const Status& local) {
  CallInfo info;
  info.rank = rank;
  info.op = o.op;
  info.scheme = o.scheme;
  info.denseOutput = o.denseOutput;
  info.dtype = o.input.dtype;
  info.rowSize = o.input.rowSize;
  info.numRows = o.input.numRows;
  info.nnz = o.input.nnz;
  info.seed = o.seed;
  if (!local.isOk()) failCall(local, &info);
  return info;
}

void failCall(const Status& why, CallInfo* info) {
  info->failed = true;
  info->message = why.message();
  // Garbage the summary cannot carry only travels in a failed one.
  if (info->op > ReduceOp::kAverage) info->op = ReduceOp::kSum;
  if (info->scheme > Scheme::kDense) info->scheme = Scheme::kAuto;
}

Status checkCallInfos(const std::vector<CallInfo>& infos, int64_t* totalNnz) {
  std::string failures;
  for (const CallInfo& info : infos) {
    if (info.failed) {
      failures +=
          fmt::format("{}rank {}: {}", failures.empty() ? "" : "; ", info.rank, info.message);
    }
  }
  if (!failures.empty()) {
    return ZEN_ERROR(StatusCode::kInvalidArgument, "sparse allreduce: {}", failures);
  }
  const CallInfo& first = infos[0];
  *totalNnz = 0;
  for (const CallInfo& info : infos) {
    const int p = info.rank;
    ZEN_CHECK_ARG(info.numRows == first.numRows && info.rowSize == first.rowSize,
                  "sparse allreduce: rank {} passed {} rows x {}, rank 0 {} rows x {}", p,
                  info.numRows, info.rowSize, first.numRows, first.rowSize);
    ZEN_CHECK_ARG(info.dtype == first.dtype, "sparse allreduce: rank {} passed dtype {}, rank 0 {}",
                  p, dataTypeName(info.dtype), dataTypeName(first.dtype));
    ZEN_CHECK_ARG(info.op == first.op, "sparse allreduce: rank {} asked for {}, rank 0 for {}", p,
                  reduceOpName(info.op), reduceOpName(first.op));
    ZEN_CHECK_ARG(info.scheme == first.scheme,
                  "sparse allreduce: rank {} asked for scheme {}, rank 0 for {}", p,
                  schemeName(info.scheme), schemeName(first.scheme));
    ZEN_CHECK_ARG(resolveScheme(first.scheme) != Scheme::kZen || info.seed == first.seed,
                  "sparse allreduce: rank {} uses zen seed {:#x}, rank 0 {:#x}", p, info.seed,
                  first.seed);
    *totalNnz += info.nnz;
  }
  return Status::ok();
}

Status exchangeSummaries(Transport& t,
                         const std::vector<ConstBytes>& sends,
                         std::vector<ByteVector>* received,
                         std::vector<ConstBytes>* payloads,
                         int64_t* totalNnz) {
  ZEN_RETURN_IF_ERROR(t.alltoallv(sends, received));
  const int n = t.size();
  std::vector<SummarizedView> views;
  views.reserve(n);
  std::vector<CallInfo> infos;
  infos.reserve(n);
  for (int p = 0; p < n; ++p) {
    Result<SummarizedView> view = decodeSummarized((*received)[p].data(), (*received)[p].size(), p);
    if (!view.isOk()) {
      return ZEN_ERROR(StatusCode::kIoError, "sparse allreduce: call summary from rank {}: {}", p,
                       view.status().message());
    }
    infos.push_back(view.value().info);
    views.push_back(std::move(view).value());
  }
  ZEN_RETURN_IF_ERROR(checkCallInfos(infos, totalNnz));
  payloads->assign(n, ConstBytes{});
  for (int p = 0; p < n; ++p) {
    const SummarizedView& v = views[p];
    if (v.info.nnz == 0 && v.payloadBytes != 0) {
      return ZEN_ERROR(StatusCode::kIoError,
                       "sparse allreduce: rank {} has no rows but sent {} bytes after its call "
                       "summary",
                       p, v.payloadBytes);
    }
    (*payloads)[p] = ConstBytes{v.payload, v.payloadBytes};
  }
  return Status::ok();
}

Status agreeOnCall(Transport& t, const CallInfo& mine, int64_t* totalNnz) {
  ByteVector summary;
  startSummarized(mine, &summary);
  const std::vector<ConstBytes> sends(t.size(), ConstBytes{summary.data(), summary.size()});
  std::vector<ByteVector> received;
  std::vector<ConstBytes> payloads;
  return exchangeSummaries(t, sends, &received, &payloads, totalNnz);
}

}  // namespace zen::ops
