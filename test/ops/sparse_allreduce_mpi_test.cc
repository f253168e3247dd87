// The sparse allreduce contract (sparse_allreduce_test.cc) under MPI: CTest starts this
// binary with `mpirun -np N`; each process is one rank and creates a fresh MPI transport per
// test. Every scheme runs a subset of the case matrix (main: mpi_test_main.cc).
#include <gtest/gtest.h>

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
