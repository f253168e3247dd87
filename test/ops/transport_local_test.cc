// The backend-independent transport tests (transport_test.cc) for the backends that run as
// threads in this process: in-process and TCP over 127.0.0.1, at 1, 2, 3, 4 and 7 ranks.
#include <gtest/gtest.h>

#include "test/ops/transport_harness.h"

namespace zen::ops::testing {
namespace {

INSTANTIATE_TEST_SUITE_P(InProcess,
                         TransportTest,
                         ::testing::Values(TransportParam{Backend::kInProcess, 1},
                                           TransportParam{Backend::kInProcess, 2},
                                           TransportParam{Backend::kInProcess, 3},
                                           TransportParam{Backend::kInProcess, 4},
                                           TransportParam{Backend::kInProcess, 7}),
                         paramName);

INSTANTIATE_TEST_SUITE_P(Tcp,
                         TransportTest,
                         ::testing::Values(TransportParam{Backend::kTcp, 1},
                                           TransportParam{Backend::kTcp, 2},
                                           TransportParam{Backend::kTcp, 3},
                                           TransportParam{Backend::kTcp, 4},
                                           TransportParam{Backend::kTcp, 7}),
                         paramName);

}  // namespace
}  // namespace zen::ops::testing
