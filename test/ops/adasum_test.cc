// ops::adasum on every backend against a reference: the binary tree of adasum(a, b) computed
// in double on the host from every rank's inputs (which every rank can regenerate), per tensor.
// A fused bucket of tensors of different sizes (empty, one element, odd lengths, larger than
// the halving's depth), zero vectors on some or all ranks, a joined rank's missing tensor, every
// float dtype; every rank must end with identical bits. Non-power-of-two worlds are refused on
// every rank. Linked into zen_ops_test (in-process and TCP ranks as threads, 8 in-process
// ranks below) and zen_ops_mpi_test (mpirun).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "core/float16.h"
#include "ops/adasum.h"
#include "test/common/adasum_reference.h"
#include "test/ops/transport_harness.h"

namespace zen::ops::testing {
namespace {

constexpr size_t kCounts[] = {0, 1, 7, 1000, 4099, 0, 3, 129};
constexpr size_t kTensors = sizeof(kCounts) / sizeof(kCounts[0]);
constexpr size_t kAllZero = 2;      // zero on every rank
constexpr size_t kZeroOnRank0 = 3;  // zero on rank 0 only: its coefficient is 1
constexpr size_t kJoined = 6;       // the last rank (n > 1) has no tensor

// Rank r's element i of tensor k: multiples of 1/8 in [-11/8, 11/8], exact in every dtype.
double inputValue(int r, size_t k, size_t i) {
  if (k == kAllZero || (k == kZeroOnRank0 && r == 0)) return 0;
  return static_cast<double>((i * 31 + static_cast<size_t>(r) * 17 + k * 7) % 23) / 8.0 - 11.0 / 8;
}

bool contributes(int r, int n, size_t k) {
  return !(k == kJoined && n > 1 && r == n - 1);
}

// Tensor k's result: ranks (0,1), (2,3), ... combined, then those results pairwise, ...
std::vector<double> reference(int n, size_t k) {
  std::vector<std::vector<double>> v(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    v[r].assign(kCounts[k], 0.0);
    if (!contributes(r, n, k)) continue;
    for (size_t i = 0; i < kCounts[k]; ++i) v[r][i] = inputValue(r, k, i);
  }
  return zen::testing::adasumTree(std::move(v));
}

// Relative error allowed against the largest magnitude of the tensor: a few units in the last
// place of the dtype (the reference sums in another order; 16-bit outputs are rounded once).
double tolerance(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat64:
      return 1e-12;
    case DataType::kFloat32:
      return 4e-7;
    case DataType::kFloat16:
      return 2e-3;
    default:
      return 1.6e-2;
  }
}

template <typename T>
void checkAdasum(Transport& t, DataType dtype) {
  const int n = t.size();
  const int me = t.rank();
  std::vector<std::vector<T>> inputs(kTensors);
  std::vector<std::vector<T>> outputs(kTensors);
  AdasumOptions o;
  o.transport = &t;
  o.dtype = dtype;
  std::vector<ExecPhase> phases;
  o.phases = &phases;
  for (size_t k = 0; k < kTensors; ++k) {
    for (size_t i = 0; i < kCounts[k]; ++i)
      inputs[k].push_back(fromDouble<T>(inputValue(me, k, i)));
    outputs[k].assign(kCounts[k], fromDouble<T>(-99));
    AdasumTensor x;
    x.count = kCounts[k];
    x.input = contributes(me, n, k) ? inputs[k].data() : nullptr;
    x.output = outputs[k].data();
    o.tensors.push_back(x);
  }
  // The last tensor in place, as the executor runs a single tensor.
  o.tensors.back().output = inputs.back().data();
  const Status status = adasum(o);
  ASSERT_TRUE(status.isOk()) << status.message();
  EXPECT_EQ(phases.size(), 3u);
  outputs.back() = inputs.back();

  std::vector<uint8_t> mine;
  for (size_t k = 0; k < kTensors; ++k) {
    const std::vector<double> want = reference(n, k);
    double scale = 0;
    for (double v : want) scale = std::max(scale, std::abs(v));
    for (size_t i = 0; i < kCounts[k]; ++i) {
      const double got = toDouble(outputs[k][i]);
      ASSERT_NEAR(got, want[i], tolerance(dtype) * scale)
          << dataTypeName(dtype) << " tensor " << k << " element " << i << " on rank " << me;
      if (k == kAllZero) {
        ASSERT_EQ(got, 0.0);
      }
    }
    const auto* bytes = reinterpret_cast<const uint8_t*>(outputs[k].data());
    mine.insert(mine.end(), bytes, bytes + kCounts[k] * sizeof(T));
  }
  // Every rank ends with identical bits.
  std::vector<ByteVector> all;
  ASSERT_TRUE(t.allgatherv(mine.data(), mine.size(), &all).isOk());
  for (int p = 0; p < n; ++p) {
    EXPECT_TRUE(all[static_cast<size_t>(p)] == all[0])
        << dataTypeName(dtype) << ": rank " << p << "'s result differs from rank 0's";
  }
}

}  // namespace

void checkAdasumEveryDtypeOrRefusal(Transport& t) {
  const int n = t.size();
  if ((n & (n - 1)) != 0) {
    std::vector<float> x(5, 1.0f);
    AdasumOptions o;
    o.transport = &t;
    o.tensors.push_back({x.data(), x.data(), x.size()});
    const Status status = adasum(o);
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(status.message().find("power-of-two"), std::string::npos) << status.message();
    return;
  }
  checkAdasum<double>(t, DataType::kFloat64);
  checkAdasum<float>(t, DataType::kFloat32);
  checkAdasum<Half>(t, DataType::kFloat16);
  checkAdasum<BFloat16>(t, DataType::kBFloat16);
}

namespace {

TEST_P(TransportTest, AdasumMatchesTheTreeInDoubleOrRefusesOtherWorldSizes) {
  run(checkAdasumEveryDtypeOrRefusal);
}

// Buckets smaller than the number of ranks: the halving reaches empty and one-element
// segments.
TEST_P(TransportTest, AdasumOfBucketsSmallerThanTheWorld) {
  run([&](Transport& t) {
    const int n = t.size();
    if ((n & (n - 1)) != 0) return;  // refused: AdasumMatchesTheTree... checks that
    const int me = t.rank();
    for (const std::vector<size_t>& counts : {std::vector<size_t>{1}, {0, 2}, {1, 0, 1}, {}}) {
      std::vector<std::vector<double>> x(counts.size());
      AdasumOptions o;
      o.transport = &t;
      o.dtype = DataType::kFloat64;
      for (size_t k = 0; k < counts.size(); ++k) {
        for (size_t i = 0; i < counts[k]; ++i) x[k].push_back(inputValue(me, k + 1, i));
        o.tensors.push_back({x[k].data(), x[k].data(), counts[k]});
      }
      ASSERT_TRUE(adasum(o).isOk());
      for (size_t k = 0; k < counts.size(); ++k) {
        std::vector<std::vector<double>> all(static_cast<size_t>(n));
        for (int r = 0; r < n; ++r) {
          for (size_t i = 0; i < counts[k]; ++i) all[r].push_back(inputValue(r, k + 1, i));
        }
        const std::vector<double> want = zen::testing::adasumTree(all);
        for (size_t i = 0; i < counts[k]; ++i) {
          EXPECT_NEAR(x[k][i], want[i], 1e-12 * (1 + std::abs(want[i]))) << k << " " << i;
        }
      }
    }
  });
}

TEST_P(TransportTest, AdasumRefusesIntegerDtypes) {
  run([&](Transport& t) {
    std::vector<int32_t> x(3, 1);
    AdasumOptions o;
    o.transport = &t;
    o.dtype = DataType::kInt32;
    o.tensors.push_back({x.data(), x.data(), x.size()});
    EXPECT_EQ(adasum(o).code(), StatusCode::kInvalidArgument);
  });
}

}  // namespace
}  // namespace zen::ops::testing
