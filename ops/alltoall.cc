// Alltoall over Transport::alltoallv (ops/alltoall.h).
#include "ops/alltoall.h"

#include <cstring>

namespace zen::ops {
namespace {

Status checkRows(const std::vector<int64_t>& rows, int size, const char* what) {
  ZEN_CHECK_ARG(rows.size() == static_cast<size_t>(size), "alltoall: {} {} for {} ranks",
                rows.size(), what, size);
  for (int64_t r : rows) ZEN_CHECK_ARG(r >= 0, "alltoall: {} holds {} rows", what, r);
  return Status::ok();
}

}  // namespace

Status alltoall(const AlltoallOptions& o, std::vector<std::byte>* output) {
  ZEN_CHECK_ARG(o.transport != nullptr && output != nullptr, "alltoall: no transport or output");
  Transport& t = *o.transport;
  const int n = t.size();
  const int me = t.rank();
  ZEN_RETURN_IF_ERROR(checkRows(o.sendRows, n, "send rows"));
  ZEN_RETURN_IF_ERROR(checkRows(o.recvRows, n, "receive rows"));
  std::vector<ConstBytes> sends(static_cast<size_t>(n));
  size_t at = 0;
  for (int d = 0; d < n; ++d) {
    const size_t bytes = static_cast<size_t>(o.sendRows[d]) * o.rowBytes;
    sends[d] = ConstBytes{static_cast<const std::byte*>(o.input) + at, bytes};
    at += bytes;
  }
  ZEN_CHECK_ARG(o.input != nullptr || at == 0, "alltoall: null input of {} bytes", at);
  ZEN_CHECK_ARG(o.sendRows[me] == o.recvRows[me],
                "alltoall: rank {} sends itself {} rows but expects {}", me, o.sendRows[me],
                o.recvRows[me]);

  auto start = Clock::now();
  std::vector<ByteVector> received;
  if (n == 1) {
    received.emplace_back(static_cast<const uint8_t*>(sends[0].data),
                          static_cast<const uint8_t*>(sends[0].data) + sends[0].size);
  } else {
    ZEN_RETURN_IF_ERROR(t.alltoallv(sends, &received));
  }
  if (o.phases) o.phases->push_back({wirePhaseName(t, "alltoall"), start, Clock::now()});

  start = Clock::now();
  size_t total = 0;
  for (int s = 0; s < n; ++s) {
    const size_t expected = static_cast<size_t>(o.recvRows[s]) * o.rowBytes;
    if (received[s].size() != expected) {
      return ZEN_ERROR(StatusCode::kIoError,
                       "alltoall: rank {} sent {} bytes, the plan says {} rows of {} bytes", s,
                       received[s].size(), o.recvRows[s], o.rowBytes);
    }
    total += expected;
  }
  output->resize(total);
  at = 0;
  for (const ByteVector& part : received) {
    if (!part.empty()) std::memcpy(output->data() + at, part.data(), part.size());
    at += part.size();
  }
  if (o.phases) o.phases->push_back({"UNFUSE", start, Clock::now()});
  return Status::ok();
}

}  // namespace zen::ops
