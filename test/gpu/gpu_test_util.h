#pragma once

// Helpers for the device-only tests: a fresh, printed seed per test, host <-> device
// copies, poisoning, and the set view of Push lists used to compare GPU and CPU results.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <iostream>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/push_lists.h"
#include "core/status.h"
#include "cuda/device_buffer.h"

#define ASSERT_CUDA(expr)                                                                        \
  do {                                                                                           \
    const cudaError_t zen_test_err_ = (expr);                                                    \
    ASSERT_EQ(zen_test_err_, cudaSuccess) << #expr << ": " << cudaGetErrorString(zen_test_err_); \
  } while (0)

#define ASSERT_OK(expr)                                                  \
  do {                                                                   \
    const ::zen::Status zen_test_status_ = (expr);                       \
    ASSERT_TRUE(zen_test_status_.isOk()) << zen_test_status_.toString(); \
  } while (0)

namespace zen::cuda::testing {

// Values no test input produces: a poisoned byte left in an output shows as a mismatch.
// Positions: all ones is never a local position. Rows: 0x7f7f... is not a sum of small
// integers in any dtype (and is a NaN in fp16).
inline constexpr unsigned char kPoisonPositionByte = 0xff;
inline constexpr unsigned char kPoisonValueByte = 0x7f;
inline constexpr uint32_t kPoisonPosition = 0xffffffffu;

// A fresh seed for every test and run, printed so a failure can be replayed:
// --gtest_random_seed=<seed> --gtest_filter=<test> reuses it.
inline uint64_t testSeed() {
  const int flag = GTEST_FLAG_GET(random_seed);
  uint64_t seed = static_cast<uint64_t>(flag);
  if (seed == 0) seed = std::random_device{}() % 2'000'000'000u + 1;
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::cout << "[ seed     ] " << info->test_suite_name() << "." << info->name() << ": " << seed
            << "  (replay: --gtest_random_seed=" << seed
            << " --gtest_filter=" << info->test_suite_name() << "." << info->name() << ")"
            << std::endl;
  ::testing::Test::RecordProperty("seed", std::to_string(seed));
  return seed;
}

inline Status uploadBytes(const void* host, size_t bytes, DeviceBuffer* device) {
  ZEN_RETURN_IF_ERROR(device->reserve(bytes == 0 ? 1 : bytes));
  if (bytes == 0) return Status::ok();
  const cudaError_t err = cudaMemcpy(device->data(), host, bytes, cudaMemcpyHostToDevice);
  if (err != cudaSuccess) {
    return ZEN_ERROR(StatusCode::kInternal, "upload: {}", cudaGetErrorString(err));
  }
  return Status::ok();
}

// Any allocator: SparseTensor::values is a RowBytes (core/tensor.h).
template <typename T, typename Alloc>
Status upload(const std::vector<T, Alloc>& host, DeviceBuffer* device) {
  return uploadBytes(host.data(), host.size() * sizeof(T), device);
}

template <typename T>
std::vector<T> download(const void* device, size_t count) {
  std::vector<T> host(count);
  if (count > 0) {
    const cudaError_t err =
        cudaMemcpy(host.data(), device, count * sizeof(T), cudaMemcpyDeviceToHost);
    EXPECT_EQ(err, cudaSuccess) << cudaGetErrorString(err);
  }
  return host;
}

// Owner and position -> row bytes: Push lists compared as sets (the order inside a list
// depends on which entry won a slot). Flags repeated or poisoned positions.
using ListSet = std::map<std::pair<int, uint32_t>, std::vector<std::byte>>;

// Only the first unwritten or repeated position is reported: a kernel that wrote nothing
// would otherwise print one failure per row.
inline ListSet asSet(const PushLists& lists) {
  ListSet set;
  bool reported = false;
  for (int p = 0; p < lists.numParts(); ++p) {
    for (int64_t i = lists.offsets[p]; i < lists.offsets[p + 1]; ++i) {
      if (lists.positions[i] == kPoisonPosition && !reported) {
        ADD_FAILURE() << "position " << i << " never written";
        reported = true;
      }
      const auto* row = lists.row(i);
      const bool inserted = set.emplace(std::make_pair(p, lists.positions[i]),
                                        std::vector<std::byte>(row, row + lists.rowBytes()))
                                .second;
      if (!inserted && !reported) {
        ADD_FAILURE() << "owner " << p << " lists position " << lists.positions[i] << " twice";
        reported = true;
      }
    }
  }
  return set;
}

// Describes the first element where got and want differ, or their sizes when those differ
// (an empty string when equal): one line however many elements differ.
template <typename T, typename GotAlloc, typename WantAlloc>
std::string firstMismatch(const std::vector<T, GotAlloc>& got,
                          const std::vector<T, WantAlloc>& want) {
  if (got.size() != want.size()) {
    return std::to_string(got.size()) + " elements, expected " + std::to_string(want.size());
  }
  for (size_t i = 0; i < got.size(); ++i) {
    if (!(got[i] == want[i])) {
      return "element " + std::to_string(i) + " of " + std::to_string(got.size()) + " is " +
             ::testing::PrintToString(got[i]) + ", expected " + ::testing::PrintToString(want[i]);
    }
  }
  return "";
}

// Describes the first difference between two list sets (an empty string when equal).
inline std::string firstDifference(const ListSet& got, const ListSet& want) {
  for (const auto& [key, row] : want) {
    auto it = got.find(key);
    if (it == got.end()) {
      return "missing owner " + std::to_string(key.first) + " position " +
             std::to_string(key.second);
    }
    if (it->second != row) {
      return "row differs at owner " + std::to_string(key.first) + " position " +
             std::to_string(key.second);
    }
  }
  for (const auto& [key, row] : got) {
    if (want.count(key) == 0) {
      return "extra owner " + std::to_string(key.first) + " position " + std::to_string(key.second);
    }
  }
  return "";
}

}  // namespace zen::cuda::testing
