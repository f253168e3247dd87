// The backend-independent transport tests (transport_test.cc) under MPI: CTest starts this
// binary with `mpirun -np N` for N in {1, 2, 3, 4, 7}; each process is one rank and creates a
// fresh MPI transport per test (main: mpi_test_main.cc).
#include <gtest/gtest.h>

#include "test/ops/transport_harness.h"

namespace zen::ops::testing {
namespace {

INSTANTIATE_TEST_SUITE_P(Mpi,
                         TransportTest,
                         ::testing::Values(TransportParam{Backend::kMpi, 0}),
                         paramName);

}  // namespace
}  // namespace zen::ops::testing
