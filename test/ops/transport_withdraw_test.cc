// A collective that one rank enters alone, part of the Transport contract. It lives in a file
// of its own because under MPI it must end its process: an MPI collective that timed out stays
// posted (it cannot be withdrawn, see mpi_transport.h), and Open MPI 4.1 then hangs creating
// the next test's communicator. So zen_ops_mpi_withdraw_test holds only this test (CTest
// entries ops.mpi.withdraw.np*), and the process finalizes with the barrier still posted, as a
// failed job does. In-process and TCP ranks run it in zen_ops_test with the rest.
#include <gtest/gtest.h>

#include <chrono>

#include "test/ops/transport_harness.h"

namespace zen::ops::testing {
namespace {

// Only rank 0 enters the barrier: it times out within the bound, and the transport refuses
// later calls.
TEST_P(TransportTest, CollectiveWithAMissingRankTimesOut) {
  RankOptions options;
  options.timeoutSeconds = 0.5;
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
      options);
}

}  // namespace
}  // namespace zen::ops::testing
