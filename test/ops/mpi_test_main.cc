// main() of the test binaries that CTest starts under `mpirun -np N`: each process is one
// rank. The exit code is the maximum over ranks, so any rank's failure fails the run.
#include <gtest/gtest.h>
#include <mpi.h>

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
