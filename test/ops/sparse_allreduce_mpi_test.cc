// The sparse allreduce contract (sparse_allreduce_test.cc) under MPI: CTest starts this
// binary with `mpirun -np N`; each process is one rank and creates a fresh MPI transport per
// test. Every scheme runs a subset of the case matrix. The exit code is the maximum over
// ranks, so any rank's failure fails the run.
#include <gtest/gtest.h>
#include <mpi.h>

#include "test/ops/sparse_allreduce_test.h"

namespace zen::ops::testing {
namespace {

INSTANTIATE_TEST_SUITE_P(
    Mpi,
    SparseAllreduceTest,
    ::testing::Values(SparseParam{{Backend::kMpi, 0}, Scheme::kZen, Coverage::kSubset},
                      SparseParam{{Backend::kMpi, 0}, Scheme::kAgSparse, Coverage::kSubset},
                      SparseParam{{Backend::kMpi, 0}, Scheme::kDense, Coverage::kSubset},
                      SparseParam{{Backend::kMpi, 0}, Scheme::kHc, Coverage::kSubset},
                      SparseParam{{Backend::kMpi, 0}, Scheme::kBlocks, Coverage::kSubset}),
    sparseParamName);

}  // namespace
}  // namespace zen::ops::testing

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  ::testing::InitGoogleTest(&argc, argv);
  // Rank 0 prints the full report; the others only their failures.
  if (rank != 0) GTEST_FLAG_SET(brief, true);
  int failed = RUN_ALL_TESTS();
  int anyFailed = 0;
  MPI_Allreduce(&failed, &anyFailed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return anyFailed;
}
