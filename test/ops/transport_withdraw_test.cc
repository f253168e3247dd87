// Collectives that one rank enters alone, part of the Transport contract. They live in a file
// of its own because under MPI it must end its process: an MPI collective that timed out stays
// posted (it cannot be withdrawn, see mpi_transport.h), and Open MPI 4.1 then hangs creating
// the next test's communicator. So zen_ops_mpi_withdraw_test holds only these tests, each
// run alone (CTest entries ops.mpi.withdraw.<test>.np*), and the process finalizes with the
// call still posted, as a failed job does. In-process and TCP ranks run them in zen_ops_test.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "test/ops/transport_harness.h"

namespace zen::ops::testing {
namespace {

RankOptions halfSecondTimeout() {
  RankOptions options;
  options.timeoutSeconds = 0.5;
  return options;
}

// Only rank 0 enters the barrier: it times out within the bound, and the transport refuses
// later calls.
TEST_P(TransportTest, CollectiveWithAMissingRankTimesOut) {
  run(
      [&](Transport& t) {
        if (t.size() < 2 || t.rank() != 0) return;
        const auto start = std::chrono::steady_clock::now();
        const Status s = t.barrier();
        EXPECT_EQ(s.code(), StatusCode::kTimeout) << s.toString();
        EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
        float v = 1;
        EXPECT_EQ(t.allreduce(&v, 1, DataType::kFloat32).code(), StatusCode::kAborted);
      },
      halfSecondTimeout());
}

// The same for the v-collectives (pairwise sends under MPI): rank 0's wait is bounded and the
// error names the call. One test each: under MPI a process makes no transport after a failed
// one (a CI run once hung with two in one process; the runtime never does this).
std::function<void(Transport&)> loneVCollective(bool gather) {
  return [gather](Transport& t) {
    if (t.size() < 2 || t.rank() != 0) return;
    const ByteVector mine(100, uint8_t{7});
    const std::vector<ConstBytes> sends(t.size(), ConstBytes{mine.data(), mine.size()});
    std::vector<ByteVector> received;
    const auto start = std::chrono::steady_clock::now();
    const Status s =
        gather ? t.allgatherv(mine.data(), mine.size(), &received) : t.alltoallv(sends, &received);
    EXPECT_EQ(s.code(), StatusCode::kTimeout) << s.toString();
    EXPECT_NE(s.message().find(gather ? "allgatherv" : "alltoallv"), std::string::npos)
        << s.toString();
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  };
}

TEST_P(TransportTest, AnAlltoallvWithAMissingRankTimesOut) {
  run(loneVCollective(false), halfSecondTimeout());
}

TEST_P(TransportTest, AnAllgathervWithAMissingRankTimesOut) {
  run(loneVCollective(true), halfSecondTimeout());
}

}  // namespace
}  // namespace zen::ops::testing
