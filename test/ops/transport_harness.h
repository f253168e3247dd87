#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include "core/float16.h"
#include "ops/mpi_transport.h"
#include "ops/tcp_transport.h"
#include "ops/transport.h"

namespace zen::ops::testing {

enum class Backend { kInProcess, kTcp, kMpi };
const char* backendName(Backend backend);

// One instantiation of the transport tests: a backend and a world size. MPI runs as many
// ranks as mpirun started (ranks = 0).
struct TransportParam {
  Backend backend;
  int ranks;
};
void PrintTo(const TransportParam& param, std::ostream* out);  // NOLINT: gtest's name
std::string paramName(const ::testing::TestParamInfo<TransportParam>& info);

struct RankOptions {
  double timeoutSeconds = 20.0;  // every wait is bounded: a hang becomes a failure
  size_t mpiMaxChunkBytes = MpiOptions::kDefaultMaxChunkBytes;
};

// Runs fn(transport) on every rank: one thread per rank for in-process and TCP (over
// 127.0.0.1, rank 0 on an ephemeral port), this process's rank for MPI. The ranks meet before
// their transports are destroyed, so none leaves while another still talks to it.
void runRanks(const TransportParam& param,
              const RankOptions& options,
              const std::function<void(Transport&)>& fn);

// A forked process's end: exit code, or the signal that ended it.
struct ProcessEnd {
  int exitCode = -1;
  int signal = 0;
  bool killedByHarness = false;
};

// What a forked rank runs: `rendezvous` is rank 0's address on 127.0.0.1 (port 0 for rank 0
// itself, which passes its real port to reportPort once bound; the others are forked after
// that). The return value becomes the exit code.
using RankChild =
    std::function<int(int rank, const std::string& rendezvous, std::function<void(uint16_t)>)>;

// Forks n processes running child, rank 0 first. Processes still running after limitSeconds
// are killed with SIGKILL, and so is rank `lingering` (say, one that stopped itself) once
// every other rank has ended. Call before any MPI initialization.
std::vector<ProcessEnd> forkRanks(int n,
                                  double limitSeconds,
                                  const RankChild& child,
                                  int lingering = -1);

// forkRanks where each process joins a TCP job's transport and runs body over it (exit code
// 90: the transport could not be created).
std::vector<ProcessEnd> forkTcpRanks(int n,
                                     double timeoutSeconds,
                                     double limitSeconds,
                                     const std::function<int(Transport&)>& body,
                                     int lingering = -1);

// The fixture of the backend-independent tests (transport_test.cc); each test executable
// instantiates it for its backends.
class TransportTest : public ::testing::TestWithParam<TransportParam> {
 protected:
  void run(const std::function<void(Transport&)>& fn, const RankOptions& options = {}) {
    runRanks(GetParam(), options, fn);
  }
  Backend backend() const { return GetParam().backend; }
};

// A call that failed because another rank gave its transport up: kIoError carrying
// `told` ("rank 1 aborted after an error (why)"), as every backend words it.
inline void expectTold(const Status& s, const std::string& told, int rank) {
  EXPECT_EQ(s.code(), StatusCode::kIoError) << "rank " << rank << ": " << s.toString();
  EXPECT_NE(s.message().find(told), std::string::npos) << "rank " << rank << ": " << s.toString();
}

// Deterministic test bytes: what rank `from` sends rank `to`.
uint8_t patternByte(int from, int to, size_t i);

// Sum over ranks of every rank's value, gathered over the transport itself.
uint64_t sumOverRanks(Transport& t, uint64_t value);

// Rank r's element i for min, max and product: small integers and signed powers of two, exact
// in every dtype (bf16 included) and with an exact product whatever the order, so a
// closed-form reference over r is checked exactly.
inline double minMaxValue(int r, size_t i) {
  return static_cast<double>((i * 7 + static_cast<size_t>(r) * 5) % 11) - 5;  // [-5, 5]
}
inline double productValue(int r, size_t i, bool integral) {
  if (i % 17 == 3 && r == 0) return 0;  // a zero somewhere
  static constexpr double kFactors[] = {1, -1, 2, -2, 0.5, 1};
  const double f = kFactors[(i + static_cast<size_t>(r) * 2) % 6];
  return integral && f == 0.5 ? -1 : f;
}

// Test values in and out of every dtype the transports reduce (16-bit floats included).
template <typename T>
T fromDouble(double v) {
  if constexpr (std::is_same_v<T, Half>) {
    return toHalf(static_cast<float>(v));
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    return toBFloat16(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}

template <typename T>
double toDouble(T v) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    return static_cast<double>(toFloat(v));
  } else {
    return static_cast<double>(v);
  }
}

}  // namespace zen::ops::testing
