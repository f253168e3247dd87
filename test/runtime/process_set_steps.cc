// The process-set steps of the runtime tests (test/runtime/process_set_steps.h).
#include "test/runtime/process_set_steps.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <numeric>

#include "test/runtime/fake_device.h"
#include "test/runtime/runtime_test_util.h"

namespace zen::testing {
Result<int32_t> addSet(Runtime& rt, std::vector<int32_t> ranks) {
  ZEN_ASSIGN_OR_RETURN(Handle h, rt.enqueue(TensorOp::addProcessSet(std::move(ranks))));
  ZEN_RETURN_IF_ERROR(h.wait(kWaitSeconds));
  return h.result().processSet;
}

Status removeSet(Runtime& rt, int32_t id) {
  ZEN_ASSIGN_OR_RETURN(Handle h, rt.enqueue(TensorOp::removeProcessSet(id)));
  return h.wait(kWaitSeconds);
}

namespace {

// Element e of job rank r's dense input at `step`: a small integer, exact in fp32 sums.
float denseValue(int r, int step, int64_t e) {
  return static_cast<float>((r + 1) * 3 + step * 5 + e % 7 - 4);
}

SparseInput sparseInput(int r, int step) {
  return makeSparse(1000 + static_cast<uint64_t>(r * 10 + step), 40, 3, 0.3);
}

// Rows set rank s sends set rank d in the alltoall of `step`.
int64_t a2aRows(int s, int d, int step) {
  return (s + d + step) % 3;
}

float a2aValue(int s, int d, int64_t k) {
  return static_cast<float>(s * 100 + d * 10 + k);
}

Failure mismatch(const char* what,
                 int step,
                 const std::vector<float>& got,
                 const std::vector<float>& want) {
  if (got == want) return {};
  return fmt::format("{} at step {}: got [{}], want [{}]", what, step, fmt::join(got, " "),
                     fmt::join(want, " "));
}

// An allgather's or alltoall's rows, wherever they are: on the fake device they must be there
// only (as the GPU path delivers them).
Result<std::vector<float>> rowsOf(const OpResult& r, bool fakeDevice) {
  const void* data = r.gathered.data();
  size_t bytes = r.gathered.size();
  if (fakeDevice) {
    if (!(r.gatheredDevice == Device::cuda(0)) || !r.gathered.empty()) {
      return ZEN_ERROR(StatusCode::kInternal, "rows on {}, {} B on the host",
                       r.gatheredDevice.toString(), r.gathered.size());
    }
    data = fromFakeDevice(r.gatheredOnDevice.get());
    bytes = r.gatheredDeviceBytes;
  }
  std::vector<float> rows(bytes / sizeof(float));
  if (bytes > 0) std::memcpy(rows.data(), data, bytes);
  return rows;
}

// A sparse result, wherever it is (the fake device's: only there).
Result<SparseTensor> sparseOf(const OpResult& r, bool fakeDevice) {
  if (!fakeDevice) return r.sparse;
  if (!(r.sparseDevice == Device::cuda(0)) || !r.sparse.indices.empty()) {
    return ZEN_ERROR(StatusCode::kInternal, "sparse result on {}, {} rows on the host",
                     r.sparseDevice.toString(), r.sparse.indices.size());
  }
  SparseTensor t = r.sparse;
  const size_t nnz = static_cast<size_t>(r.sparseDeviceNnz);
  t.indices.resize(nnz);
  t.values.resize(nnz * t.rowBytes());
  if (nnz > 0) {
    std::memcpy(t.indices.data(), fromFakeDevice(r.sparseIndicesOnDevice.get()),
                nnz * sizeof(int64_t));
    std::memcpy(t.values.data(), fromFakeDevice(r.sparseValuesOnDevice.get()), t.values.size());
  }
  return t;
}

// One step of every collective, on rank `me` of four: pair = {0, 1} or {2, 3} (the same names
// in both), trio = {1, 2, 3}, and the job. The sets' tensors on the fake device when asked.
Failure step(Runtime& rt, int me, int32_t pair, int32_t trio, int s, bool fakeDevice) {
  const auto place = [&](auto view) { return fakeDevice ? onDevice(view) : view; };
  const std::vector<int32_t> pairRanks = rt.processSetRanks(pair);
  const std::vector<int32_t> trioRanks = {1, 2, 3};
  const bool inTrio = me != 0;
  const int trioRank = me - 1;
  constexpr int64_t kLen = 6;

  std::vector<Handle> handles;
  auto post = [&](TensorOp op) -> Failure {
    Result<Handle> h = rt.enqueue(std::move(op));
    if (!h.isOk()) return h.status().toString();
    handles.push_back(h.value());
    return {};
  };
  std::vector<float> mine(kLen), pairSum(kLen), jobSum(kLen), trioSum(kLen, 0.0f);
  for (int64_t e = 0; e < kLen; ++e) mine[static_cast<size_t>(e)] = denseValue(me, s, e);
  std::vector<float> pairOut(kLen), jobOut(kLen), trioOut(kLen);
  Failure f;
  if (!(f = post(TensorOp::allreduce("g", place(denseView(mine, TensorShape({kLen}))),
                                     place(denseView(pairOut, TensorShape({kLen}))), ReduceOp::kSum)
                     .inProcessSet(pair)))
           .empty()) {
    return f;
  }
  if (!(f = post(TensorOp::allreduce("g.job", denseView(mine, TensorShape({kLen})),
                                     denseView(jobOut, TensorShape({kLen})), ReduceOp::kSum)))
           .empty()) {
    return f;
  }
  // The pair's sparse gradient, reduced to a sparse result.
  const SparseInput sparse = sparseInput(me, s);
  if (!(f = post(TensorOp::sparseAllreduce("emb", place(sparse.view()), ReduceOp::kSum)
                     .inProcessSet(pair)))
           .empty()) {
    return f;
  }
  // Broadcast from the pair's set rank 1.
  std::vector<float> bcast = mine;
  if (!(f = post(TensorOp::broadcast("bc", place(denseView(bcast, TensorShape({kLen}))), 1)
                     .inProcessSet(pair)))
           .empty()) {
    return f;
  }
  // The trio: an average, an allgather of trioRank + 1 rows, an alltoall, a reducescatter.
  std::vector<float> gatherIn, a2aIn, rsIn(9), rsOut;
  std::vector<int64_t> splits;
  if (inTrio) {
    if (!(f = post(TensorOp::allreduce("c", place(denseView(mine, TensorShape({kLen}))),
                                       place(denseView(trioOut, TensorShape({kLen}))),
                                       ReduceOp::kAverage)
                       .inProcessSet(trio)))
             .empty()) {
      return f;
    }
    for (int k = 0; k <= trioRank; ++k) gatherIn.push_back(static_cast<float>(me * 10 + k + s));
    if (!(f = post(TensorOp::allgather(
                       "ag", place(denseView(gatherIn, TensorShape({trioRank + 1, int64_t{1}}))))
                       .inProcessSet(trio)))
             .empty()) {
      return f;
    }
    for (int d = 0; d < 3; ++d) {
      splits.push_back(a2aRows(trioRank, d, s));
      for (int64_t k = 0; k < splits.back(); ++k) a2aIn.push_back(a2aValue(trioRank, d, k));
    }
    const int64_t a2aTotal = std::accumulate(splits.begin(), splits.end(), int64_t{0});
    if (!(f = post(
              TensorOp::alltoall("a2a", place(denseView(a2aIn, TensorShape({a2aTotal}))), splits)
                  .inProcessSet(trio)))
             .empty()) {
      return f;
    }
    for (size_t i = 0; i < rsIn.size(); ++i) rsIn[i] = static_cast<float>(me + i + s);
    rsOut.resize(static_cast<size_t>(scatterRows(9, 3, trioRank)));
    if (!(f = post(TensorOp::reducescatter(
                       "rs", place(denseView(rsIn, TensorShape({9}))),
                       place(denseView(rsOut, TensorShape({static_cast<int64_t>(rsOut.size())}))),
                       ReduceOp::kSum)
                       .inProcessSet(trio)))
             .empty()) {
      return f;
    }
  }
  for (const Handle& h : handles) {
    const Status st = h.wait(kWaitSeconds);
    if (!st.isOk()) return fmt::format("step {}: {}", s, st.toString());
  }

  // References from every member's input.
  for (int64_t e = 0; e < kLen; ++e) {
    const size_t i = static_cast<size_t>(e);
    for (int r : pairRanks) pairSum[i] += denseValue(r, s, e);
    for (int r = 0; r < 4; ++r) jobSum[i] += denseValue(r, s, e);
    for (int r : trioRanks) trioSum[i] += denseValue(r, s, e);
    trioSum[i] /= 3.0f;  // as the daemon averages: the exact sum, divided once
  }
  if (!(f = mismatch("pair allreduce", s, pairOut, pairSum)).empty()) return f;
  if (!(f = mismatch("job allreduce", s, jobOut, jobSum)).empty()) return f;
  std::vector<float> root(kLen);
  for (int64_t e = 0; e < kLen; ++e) root[static_cast<size_t>(e)] = denseValue(pairRanks[1], s, e);
  if (!(f = mismatch("pair broadcast", s, bcast, root)).empty()) return f;
  std::vector<SparseInput> members;
  for (int r : pairRanks) members.push_back(sparseInput(r, s));
  const Result<SparseTensor> sparseSum = sparseOf(handles[2].result(), fakeDevice);
  if (!sparseSum.isOk()) return sparseSum.status().toString();
  if (!(f = mismatch("pair sparse allreduce", s, densify(sparseSum.value()), denseSum(members)))
           .empty()) {
    return f;
  }
  if (!inTrio) return {};

  if (!(f = mismatch("trio average", s, trioOut, trioSum)).empty()) return f;
  const Result<std::vector<float>> gathered = rowsOf(handles[5].result(), fakeDevice);
  if (!gathered.isOk()) return gathered.status().toString();
  std::vector<float> gatheredWant;
  for (int t = 0; t < 3; ++t) {
    for (int k = 0; k <= t; ++k) gatheredWant.push_back(static_cast<float>((t + 1) * 10 + k + s));
  }
  if (!(f = mismatch("trio allgather", s, gathered.value(), gatheredWant)).empty()) return f;
  const OpResult& a2a = handles[6].result();
  const Result<std::vector<float>> received = rowsOf(a2a, fakeDevice);
  if (!received.isOk()) return received.status().toString();
  std::vector<float> receivedWant;
  std::vector<int64_t> splitsWant;
  for (int src = 0; src < 3; ++src) {
    splitsWant.push_back(a2aRows(src, trioRank, s));
    for (int64_t k = 0; k < splitsWant.back(); ++k)
      receivedWant.push_back(a2aValue(src, trioRank, k));
  }
  if (!(f = mismatch("trio alltoall", s, received.value(), receivedWant)).empty()) return f;
  if (a2a.receivedSplits != splitsWant) return fmt::format("trio alltoall splits at step {}", s);
  std::vector<float> rsWant(rsOut.size());
  const int64_t offset = scatterOffset(9, 3, trioRank);
  for (size_t i = 0; i < rsWant.size(); ++i) {
    for (int r : trioRanks)
      rsWant[i] += static_cast<float>(r + (static_cast<size_t>(offset) + i) + s);
  }
  return mismatch("trio reducescatter", s, rsOut, rsWant);
}

}  // namespace

Failure processSetSteps(Runtime& rt, bool fakeDevice) {
  if (rt.size() != 4) return "needs 4 ranks";
  const int me = rt.rank();
  Result<int32_t> low = addSet(rt, {1, 0});
  Result<int32_t> high = addSet(rt, {3, 2});
  Result<int32_t> trio = addSet(rt, {2, 3, 1});
  for (const auto* id : {&low, &high, &trio}) {
    if (!id->isOk()) return "add_process_set: " + id->status().toString();
  }
  if (low.value() != 1 || high.value() != 2 || trio.value() != 3) {
    return fmt::format("set ids {} {} {}, want 1 2 3", low.value(), high.value(), trio.value());
  }
  if (rt.processSetRanks(trio.value()) != std::vector<int32_t>{1, 2, 3}) return "trio's ranks";
  const int32_t pair = me < 2 ? low.value() : high.value();
  for (int s = 0; s < 3; ++s) {
    const Failure f = step(rt, me, pair, trio.value(), s, fakeDevice);
    if (!f.empty()) return f;
  }
  for (int32_t id : {low.value(), high.value()}) {
    const Status st = removeSet(rt, id);
    if (!st.isOk()) return "remove_process_set: " + st.toString();
  }
  if (!rt.processSetRanks(low.value()).empty()) return "set 1 still known after its removal";
  std::vector<float> x(2, 1.0f);
  Result<Handle> late = rt.enqueue(
      TensorOp::allreduce("late", denseView(x, TensorShape({2})), denseView(x, TensorShape({2})))
          .inProcessSet(low.value()));
  if (late.isOk()) return "a removed set took a tensor";
  return {};
}

}  // namespace zen::testing
