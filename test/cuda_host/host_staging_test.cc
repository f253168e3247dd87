// Host staging's bounce plan (cuda/host_staging.h): the rounds through a bounce buffer of fixed
// capacity cover every byte of every copy once, in order, and never overfill the buffer. The
// staging itself runs end to end in test/runtime/runtime_host_staging_test.cc.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "cuda/host_staging.h"

namespace zen::cuda {
namespace {

// Replays the plan over real bytes: each round lands in the buffer, then goes out.
std::vector<std::vector<uint8_t>> replay(const std::vector<std::vector<uint8_t>>& sources,
                                         size_t capacity,
                                         size_t* roundCount) {
  std::vector<std::vector<uint8_t>> out(sources.size());
  std::vector<StagedCopy> copies;
  for (size_t i = 0; i < sources.size(); ++i) {
    out[i].assign(sources[i].size(), 0);
    copies.push_back(StagedCopy{sources[i].data(), out[i].data(), sources[i].size()});
  }
  const auto rounds = planBounce(copies, capacity);
  *roundCount = rounds.size();
  std::vector<uint8_t> buffer(capacity, 0xee);
  for (const auto& round : rounds) {
    size_t end = 0;
    for (const BouncePiece& p : round) {
      EXPECT_GT(p.bytes, 0u);
      EXPECT_EQ(p.at, end) << "pieces are packed";
      EXPECT_LE(p.at + p.bytes, capacity);
      end = p.at + p.bytes;
      const auto* src = static_cast<const uint8_t*>(copies[p.copy].src);
      std::copy(src + p.offset, src + p.offset + p.bytes, buffer.begin() + p.at);
    }
    for (const BouncePiece& p : round) {
      auto* dst = static_cast<uint8_t*>(copies[p.copy].dst);
      std::copy(buffer.begin() + p.at, buffer.begin() + p.at + p.bytes, dst + p.offset);
    }
  }
  return out;
}

TEST(PlanBounce, EveryByteOnceThroughAFullBufferAtATime) {
  std::mt19937 rng(7);
  for (size_t capacity : {1, 3, 8, 64, 1000}) {
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<std::vector<uint8_t>> sources(std::uniform_int_distribution<int>(0, 6)(rng));
      size_t total = 0;
      for (auto& s : sources) {
        s.resize(std::uniform_int_distribution<size_t>(0, 3 * capacity)(rng));
        for (auto& b : s) b = static_cast<uint8_t>(rng());
        total += s.size();
      }
      size_t rounds = 0;
      EXPECT_EQ(replay(sources, capacity, &rounds), sources) << "capacity " << capacity;
      EXPECT_EQ(rounds, (total + capacity - 1) / capacity) << "every round but the last full";
    }
  }
}

TEST(PlanBounce, NoRoundForNothing) {
  EXPECT_TRUE(planBounce({}, 64).empty());
  EXPECT_TRUE(planBounce({StagedCopy{nullptr, nullptr, 0}}, 64).empty());
  // A zero capacity still moves every byte (one at a time), never drops it.
  int src[2] = {1, 2};
  int dst[2] = {};
  EXPECT_EQ(planBounce({StagedCopy{src, dst, sizeof(src)}}, 0).size(), sizeof(src));
}

TEST(RunsStaged, AdasumAndProcessSetsOnly) {
  Response r;
  r.type = ResponseType::kAllreduce;
  EXPECT_FALSE(runsStaged(r));
  r.reduceOp = ReduceOp::kAdasum;
  EXPECT_TRUE(runsStaged(r));
  r.reduceOp = ReduceOp::kMax;
  r.processSet = 3;
  EXPECT_TRUE(runsStaged(r));
  r.processSet = kGlobalProcessSet;
  r.type = ResponseType::kBroadcast;
  EXPECT_FALSE(runsStaged(r));
}

}  // namespace
}  // namespace zen::cuda
