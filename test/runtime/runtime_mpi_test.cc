// The runtime under mpirun (CTest runs `mpirun -np N` for N in 2..4): the factory sees the MPI
// launcher's environment and builds the runtime over two MPI communicators; steps of every op
// are checked against a reference. With --dead-peer=R the binary instead runs a job in which
// rank R kills itself: Open MPI then kills the whole job (docs/architecture.md "Failure
// semantics"), which runtime_mpi_dead_peer_test.cc checks from outside.
#include <gtest/gtest.h>
#include <mpi.h>
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>

#include "test/runtime/process_set_steps.h"
#include "test/runtime/runtime_test_util.h"

extern char** environ;

namespace zen::testing {
namespace {

// The MPI launcher's placement from the environment and nothing else: the job under test must
// not depend on whatever ZEN_* variables the caller's shell holds (ZEN_BUILD_DIR, say).
Result<Config> placementConfig() {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    const size_t eq = entry.find('=');
    const std::string name = entry.substr(0, eq);
    if (eq != std::string::npos &&
        (name.rfind("OMPI_COMM_WORLD_", 0) == 0 || name.rfind("PMI_", 0) == 0)) {
      env[name] = entry.substr(eq + 1);
    }
  }
  env["ZEN_TIMEOUT"] = std::to_string(30 * kSlowdown);
  return Config::parse(env);
}

std::unique_ptr<Runtime> mpiRuntime() {
  auto config = placementConfig();
  EXPECT_TRUE(config.isOk()) << config.status().toString();
  if (!config.isOk()) return nullptr;
  EXPECT_EQ(bindings::backendFor(config.value()), bindings::Backend::kMpi);
  auto rt = bindings::createRuntime(config.value());
  EXPECT_TRUE(rt.isOk()) << rt.status().toString();
  return rt.isOk() ? std::move(rt).value() : nullptr;
}

TEST(MpiRuntime, StepsOfEveryOpAgainstAReference) {
  auto rt = mpiRuntime();
  ASSERT_TRUE(rt);
  const int n = rt->size();
  const int r = rt->rank();
  int worldSize = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &worldSize);
  ASSERT_EQ(n, worldSize);
  for (int s = 0; s < 30; ++s) {
    std::vector<SparseInput> in;
    for (int p = 0; p < n; ++p) in.push_back(makeSparse(s * 31 + p, 700, 3, 0.04));
    std::vector<float> dense(10, float(r + s)), gathered(2, float(r)), root(3, float(r));
    std::vector<TensorOp> ops;
    ops.push_back(TensorOp::sparseAllreduce("emb", in[r].view(), ReduceOp::kSum));
    ops.push_back(
        TensorOp::allreduce("fc", denseView(dense, {10}), denseView(dense, {10}), ReduceOp::kSum));
    ops.push_back(TensorOp::allgather("ids", denseView(gathered, {1, 2})));
    ops.push_back(TensorOp::broadcast("root", denseView(root, {3}), n - 1));
    auto hs = rt->enqueueGroup(std::move(ops));
    ASSERT_TRUE(hs.isOk()) << hs.status().toString();
    for (const Handle& h : hs.value()) ASSERT_TRUE(waitFor(h).isOk()) << "step " << s;
    EXPECT_EQ(densify(hs.value()[0].result().sparse), denseSum(in));
    for (float x : dense) EXPECT_EQ(x, float(n * (n - 1) / 2 + n * s));
    EXPECT_EQ(hs.value()[2].result().gatheredShape, TensorShape({n, 2}));
    for (float x : root) EXPECT_EQ(x, float(n - 1));
  }
  const RuntimeStats stats = rt->stats();
  EXPECT_GE(stats.cacheHits, 29u * 3);  // the broadcast is never cached
  auto barrier = rt->enqueue(TensorOp::barrier());
  ASSERT_TRUE(barrier.isOk());
  EXPECT_TRUE(waitFor(barrier.value()).isOk());
}

// Alltoall (rank r sends (r + 2d) % 3 rows of [r, d, k] to rank d: uneven, some empty) and
// reducescatter (2n + 1 rows: uneven pieces; every reduce op) over MPI_Ialltoallv and
// MPI_Ireduce_scatter, several steps (the second on from the response cache).
TEST(MpiRuntime, AlltoallAndReducescatterAgainstAReference) {
  auto rt = mpiRuntime();
  ASSERT_TRUE(rt);
  const int n = rt->size();
  const int r = rt->rank();
  auto rowsFrom = [](int s, int d) { return static_cast<int64_t>((s + 2 * d) % 3); };
  const int64_t rows = 2 * n + 1;
  for (int step = 0; step < 4; ++step) {
    std::vector<int64_t> splits;
    std::vector<int32_t> sent;
    for (int d = 0; d < n; ++d) {
      splits.push_back(rowsFrom(r, d));
      for (int64_t k = 0; k < rowsFrom(r, d); ++k) {
        sent.insert(sent.end(), {r, d, static_cast<int32_t>(k + step)});
      }
    }
    const int64_t sentRows = static_cast<int64_t>(sent.size() / 3);
    DenseView a{sent.data(), DataType::kInt32, TensorShape({sentRows, 3}), Device::cpu()};
    std::vector<TensorOp> ops;
    ops.push_back(TensorOp::alltoall("a2a", a, splits));
    std::vector<std::vector<double>> in, out;
    for (ReduceOp op :
         {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct}) {
      in.emplace_back(static_cast<size_t>(rows * 2));
      for (size_t e = 0; e < in.back().size(); ++e) {
        in.back()[e] = op == ReduceOp::kProduct ? ((e + r) % 2 ? 2.0 : -1.0)
                                                : static_cast<double>((r * 3 + e + step) % 7);
      }
      out.emplace_back(static_cast<size_t>(scatterRows(rows, n, r) * 2));
      DenseView x{in.back().data(), DataType::kFloat64, TensorShape({rows, 2}), Device::cpu()};
      DenseView y{out.back().data(), DataType::kFloat64, TensorShape({scatterRows(rows, n, r), 2}),
                  Device::cpu()};
      ops.push_back(TensorOp::reducescatter(fmt::format("rs.{}", reduceOpName(op)), x, y, op));
    }
    auto hs = rt->enqueueGroup(std::move(ops));
    ASSERT_TRUE(hs.isOk()) << hs.status().toString();
    for (const Handle& h : hs.value()) ASSERT_TRUE(waitFor(h).isOk()) << "step " << step;
    const OpResult& got = hs.value()[0].result();
    const auto* v = reinterpret_cast<const int32_t*>(got.gathered.data());
    size_t at = 0;
    for (int s = 0; s < n; ++s) {
      ASSERT_EQ(got.receivedSplits[s], rowsFrom(s, r));
      for (int64_t k = 0; k < rowsFrom(s, r); ++k, at += 3) {
        ASSERT_EQ(v[at], s);
        ASSERT_EQ(v[at + 1], r);
        ASSERT_EQ(v[at + 2], k + step);
      }
    }
    ASSERT_EQ(at, got.gathered.size() / sizeof(int32_t));
    const int64_t first = scatterOffset(rows, n, r) * 2;
    int which = 0;
    for (ReduceOp op :
         {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct}) {
      for (size_t i = 0; i < out[which].size(); ++i) {
        const size_t e = static_cast<size_t>(first) + i;
        double want = op == ReduceOp::kProduct ? 1 : 0;
        for (int p = 0; p < n; ++p) {
          const double x = op == ReduceOp::kProduct ? ((e + p) % 2 ? 2.0 : -1.0)
                                                    : static_cast<double>((p * 3 + e + step) % 7);
          if (op == ReduceOp::kMin) want = p == 0 ? x : std::min(want, x);
          if (op == ReduceOp::kMax) want = p == 0 ? x : std::max(want, x);
          if (op == ReduceOp::kProduct) want *= x;
          if (op == ReduceOp::kSum || op == ReduceOp::kAverage) want += x;
        }
        if (op == ReduceOp::kAverage) want /= n;
        ASSERT_NEAR(out[which][i], want, 1e-12) << reduceOpName(op) << " element " << e;
      }
      ++which;
    }
  }
}

// Sets over MPI: each is a communicator the members create (MPI_Comm_create_group) when the
// plan registers it. CTest runs this alone, at 4 ranks (runtime.mpi.process_sets).
TEST(MpiRuntime, ProcessSetsEveryCollectiveAgainstAReference) {
  auto rt = mpiRuntime();
  ASSERT_TRUE(rt);
  EXPECT_EQ(processSetSteps(*rt), "") << "rank " << rt->rank();
}

TEST(MpiRuntime, ShutdownByOneRankStopsAll) {
  auto rt = mpiRuntime();
  ASSERT_TRUE(rt);
  if (rt->rank() == rt->size() - 1) {
    EXPECT_TRUE(rt->shutdown().isOk());
    return;
  }
  std::vector<float> x(4, 1.0f);
  auto h = rt->enqueue(TensorOp::allreduce("x.only.here", denseView(x, {4}), denseView(x, {4})));
  const std::string cause = fmt::format("shut down by rank {} at user request", rt->size() - 1);
  if (!h.isOk()) {
    // The last rank's shutdown reached this rank before its enqueue (a TSan CI run saw it):
    // the enqueue is refused with the same cause.
    EXPECT_NE(h.status().message().find(cause), std::string::npos) << h.status().toString();
    return;
  }
  const Status s = waitFor(h.value());
  EXPECT_EQ(s.message(), "zen shut down: " + cause);
}

// --dead-peer=R: steps until rank R kills itself, then every other rank waits on a pending
// handle. Under Open MPI nobody returns: mpirun kills the job. "survived" would mean a rank saw
// an error instead (a fault-tolerant MPI).
int deadPeer(int victim) {
  auto config = placementConfig();
  if (!config.isOk()) return 3;
  auto rt = bindings::createRuntime(config.value());
  if (!rt.isOk()) return 4;
  Runtime& runtime = *rt.value();
  std::vector<float> x(1024, 1.0f);
  for (int s = 0;; ++s) {
    if (s == 5 && runtime.rank() == victim) {
      std::printf("rank %d: killing myself at step %d\n", runtime.rank(), s);
      std::fflush(stdout);
      raise(SIGKILL);
    }
    auto h = runtime.enqueue(
        TensorOp::allreduce("x", denseView(x, {1024}), denseView(x, {1024}), ReduceOp::kSum));
    const Status st = h.isOk() ? h.value().wait(120) : h.status();
    if (!st.isOk()) {
      std::printf("rank %d: survived with: %s\n", runtime.rank(), st.toString().c_str());
      std::fflush(stdout);
      return 5;
    }
  }
}

}  // namespace
}  // namespace zen::testing

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--dead-peer=", 12) == 0) {
      const int code = zen::testing::deadPeer(std::atoi(argv[i] + 12));
      MPI_Finalize();
      return code;
    }
  }
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  ::testing::InitGoogleTest(&argc, argv);
  if (rank != 0) GTEST_FLAG_SET(brief, true);
  const int failed = RUN_ALL_TESTS();
  int anyFailed = 0;
  MPI_Allreduce(&failed, &anyFailed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return anyFailed;
}
