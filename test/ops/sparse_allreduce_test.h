#pragma once

// The sparse allreduce contract (sparse_allreduce_test.cc), written once and instantiated per
// backend: sparse_allreduce_local_test.cc for in-process and TCP ranks as threads,
// sparse_allreduce_mpi_test.cc under mpirun.

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <string>

#include "core/config.h"
#include "core/tensor.h"
#include "ops/sparse_allreduce.h"
#include "test/ops/transport_harness.h"

namespace zen::ops::testing {

// How much of the case matrix (dtype x rowSize x op x output x pattern x skew) a run covers:
// all of it, or every 7th case (7 is coprime to every dimension, so each value still occurs).
enum class Coverage { kFull, kSubset };

struct SparseParam {
  TransportParam transport;
  Scheme scheme;
  Coverage coverage;
};
void PrintTo(const SparseParam& param, std::ostream* out);
std::string sparseParamName(const ::testing::TestParamInfo<SparseParam>& info);

// A call of `scheme` on `input` over t, every other option at its default.
inline SparseAllreduceOptions optionsFor(Transport& t, const SparseTensor& input, Scheme scheme) {
  SparseAllreduceOptions o;
  o.transport = &t;
  o.input = input.view();
  o.scheme = scheme;
  return o;
}

// sparseAllreduce(o, result), and how long it took in *seconds (an error must come in bounded
// time, not at the transport's timeout).
inline Status timedSparseAllreduce(const SparseAllreduceOptions& o,
                                   SparseAllreduceResult* result,
                                   double* seconds) {
  const auto start = std::chrono::steady_clock::now();
  Status s = sparseAllreduce(o, result);
  *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return s;
}

class SparseAllreduceTest : public ::testing::TestWithParam<SparseParam> {
 protected:
  void run(const std::function<void(Transport&)>& fn) {
    RankOptions options;
    options.timeoutSeconds = 20.0;
    runRanks(GetParam().transport, options, fn);
  }
  Scheme scheme() const { return GetParam().scheme; }
};

}  // namespace zen::ops::testing
