// main() of the test binaries that CTest starts under `mpirun -np N`: each process is one
// rank. The exit code is the maximum over ranks, so any rank's failure fails the run, and so
// does a run that selected no test.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  ::testing::InitGoogleTest(&argc, argv);
  // Rank 0 prints the full report; the others only their failures.
  if (rank != 0) GTEST_FLAG_SET(brief, true);
  int failed = RUN_ALL_TESTS();
  // A filter that selects nothing (a CTest entry's --gtest_filter gone stale) is a failure,
  // not a pass.
  if (::testing::UnitTest::GetInstance()->test_to_run_count() == 0) {
    if (rank == 0) std::fprintf(stderr, "no test selected\n");
    failed = 1;
  }
  int anyFailed = 0;
  MPI_Allreduce(&failed, &anyFailed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return anyFailed;
}
