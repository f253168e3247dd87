#pragma once

// n ranks' LocalNegotiators and rank 0's Coordinator in one process, driven phase by phase with
// the channel's collectives done in place (AND of the bit vectors, gather to rank 0, broadcast
// through the wire codec). This is the cycle the background loop will run over a real control
// channel.

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "controller/coordinator.h"
#include "controller/local_negotiator.h"
#include "core/message_codec.h"

namespace zen::controller::testing {

inline TimePoint at(double seconds) {
  return TimePoint(
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds)));
}

inline Request makeRequest(int rank,
                           const std::string& name,
                           OpType op = OpType::kAllreduce,
                           DataType dtype = DataType::kFloat32,
                           TensorShape shape = TensorShape({4, 4})) {
  Request q;
  q.rank = rank;
  q.name = name;
  q.op = op;
  q.dtype = dtype;
  q.shape = std::move(shape);
  q.rowSize = q.shape.rowSize();
  return q;
}

inline Request sparseRequest(int rank, const std::string& name, int64_t rows, int64_t width) {
  return makeRequest(rank, name, OpType::kSparseAllreduce, DataType::kFloat32,
                     TensorShape({rows, width}));
}

// A request of process set `set`; setRank is the poster's position in the set's members.
inline Request setRequest(int32_t set,
                          int setRank,
                          const std::string& name,
                          OpType op = OpType::kAllreduce,
                          DataType dtype = DataType::kFloat32,
                          TensorShape shape = TensorShape({4, 4})) {
  Request q = makeRequest(setRank, name, op, dtype, std::move(shape));
  q.processSet = set;
  return q;
}

// Job rank `rank`'s k-th add_process_set (as the runtime names it).
inline Request addSetRequest(int rank, int k, std::vector<int32_t> members) {
  Request q = makeRequest(rank, "process_set.add." + std::to_string(k), OpType::kAddProcessSet);
  q.shape = TensorShape();
  q.rowSize = 1;
  q.members = std::move(members);
  return q;
}

inline Request removeSetRequest(int rank, int32_t id) {
  Request q =
      makeRequest(rank, "process_set.remove." + std::to_string(id), OpType::kRemoveProcessSet);
  q.shape = TensorShape();
  q.rowSize = 1;
  q.processSet = id;
  return q;
}

struct SimOptions {
  int cacheCapacity = 1024;
  int64_t fusionThresholdBytes = int64_t{128} << 20;
  double stallCheckSeconds = 60.0;
  double stallShutdownSeconds = 0.0;
};

struct CycleOutcome {
  CyclePath path = CyclePath::kSlow;
  std::vector<ResponseList> plans;  // per rank: what each rank executes
  size_t requestsSent = 0;          // requests that went to rank 0 this cycle
  size_t servedFromCache = 0;       // tensors hit on every rank this cycle
  std::string stallWarning;
};

class SimCluster {
 public:
  SimCluster(int size, SimOptions options) : size_(size) {
    for (int r = 0; r < size; ++r) {
      LocalOptions lo;
      lo.rank = r;
      lo.size = size;
      lo.cacheCapacity = options.cacheCapacity;
      lo.fusionThresholdBytes = options.fusionThresholdBytes;
      lo.stallCheckSeconds = options.stallCheckSeconds;
      ranks_.emplace_back(lo);
    }
    CoordinatorOptions co;
    co.size = size;
    co.fusionThresholdBytes = options.fusionThresholdBytes;
    co.stallCheckSeconds = options.stallCheckSeconds;
    co.stallShutdownSeconds = options.stallShutdownSeconds;
    coordinator_ = std::make_unique<Coordinator>(co);
  }

  int size() const { return size_; }
  LocalNegotiator& rank(int r) { return ranks_[static_cast<size_t>(r)]; }
  Coordinator& coordinator() { return *coordinator_; }

  Status post(const Request& q, TimePoint now = TimePoint()) { return rank(q.rank).post(q, now); }
  // Rank 0's autotuner picked these: the next cycle takes the slow path and its plan carries
  // them, as ChannelNegotiator does.
  void sendParameters(const TunedParameters& p) { parameters_ = p; }
  // A request of a process set: q.rank is the poster's rank within the set, jobRank its rank.
  Status postAs(int jobRank, const Request& q, TimePoint now = TimePoint()) {
    return rank(jobRank).post(q, now);
  }

  // One cycle on every rank. Checks that all ranks take the same path and, on the fast path,
  // build the same plan.
  CycleOutcome cycle(TimePoint now = TimePoint(), const std::vector<int>& shutdownRanks = {}) {
    CycleOutcome out;
    BitVector anded;
    if (parameters_) rank(0).forceSlowPath();
    for (int r = 0; r < size_; ++r) {
      bool shutdown = false;
      for (int s : shutdownRanks) shutdown = shutdown || s == r;
      if (r == 0) shutdown = shutdown || coordinator_->stallShutdown();
      const BitVector bits = rank(r).beginCycle(shutdown, now);
      if (r == 0) {
        anded = bits;
      } else {
        EXPECT_EQ(bits.size(), anded.size()) << "rank " << r << "'s cache diverged";
        andInto(&anded, bits);
      }
    }
    std::vector<CyclePath> paths;
    for (int r = 0; r < size_; ++r) {
      auto path = rank(r).applyAnded(anded);
      EXPECT_TRUE(path.isOk()) << path.status().toString();
      paths.push_back(path.isOk() ? path.value() : CyclePath::kSlow);
    }
    for (int r = 1; r < size_; ++r) EXPECT_EQ(paths[r], paths[0]) << "rank " << r;
    out.path = paths[0];
    out.servedFromCache = rank(0).cachedResponses().size();
    if (out.path == CyclePath::kFast) {
      for (int r = 0; r < size_; ++r) out.plans.push_back(rank(r).fastPathPlan());
      for (int r = 1; r < size_; ++r) EXPECT_EQ(out.plans[r], out.plans[0]) << "rank " << r;
      out.stallWarning = coordinator_->inspectStalls(now).warning;  // rank 0 only
    } else {
      std::vector<RequestList> lists;
      for (int r = 0; r < size_; ++r) {
        // Each list crosses the wire to rank 0.
        auto decoded = decodeRequestList(encodeRequestList(rank(r).slowPathRequests()));
        EXPECT_TRUE(decoded.isOk());
        out.requestsSent += decoded.value().requests.size();
        lists.push_back(std::move(decoded).value());
      }
      ResponseList plan = coordinator_->computeResponses(lists, now, rank(0).cachedResponses());
      plan.parameters = parameters_;
      parameters_.reset();
      if (plan.parameters) coordinator_->setFusionThreshold(plan.parameters->fusionThresholdBytes);
      out.stallWarning = coordinator_->lastStallReport().warning;
      const auto bytes = encodeResponseList(plan);
      for (int r = 0; r < size_; ++r) {
        auto decoded = decodeResponseList(bytes);
        EXPECT_TRUE(decoded.isOk());
        out.plans.push_back(std::move(decoded).value());
      }
    }
    for (int r = 0; r < size_; ++r) rank(r).finishCycle(out.plans[static_cast<size_t>(r)]);
    return out;
  }

  // name -> bit of every rank's cache; the test compares them.
  std::map<std::string, int> cacheBits(int r) {
    std::map<std::string, int> bits;
    for (const auto& [key, bit] : setCacheBits(r)) bits[key.second] = bit;
    return bits;
  }
  // (process set, name) -> bit.
  std::map<std::pair<int32_t, std::string>, int> setCacheBits(int r) {
    std::map<std::pair<int32_t, std::string>, int> bits;
    const ResponseCache& cache = rank(r).cache();
    for (int b = 0; b < cache.numBits(); ++b) {
      if (cache.hasBit(b)) bits[{cache.peek(b).processSet, cache.peek(b).tensorNames[0]}] = b;
    }
    return bits;
  }

 private:
  int size_;
  std::vector<LocalNegotiator> ranks_;
  std::unique_ptr<Coordinator> coordinator_;
  std::optional<TunedParameters> parameters_;
};

// All tensor names of a plan in execution order.
inline std::vector<std::string> namesOf(const ResponseList& plan) {
  std::vector<std::string> names;
  for (const auto& r : plan.responses)
    names.insert(names.end(), r.tensorNames.begin(), r.tensorNames.end());
  return names;
}

}  // namespace zen::controller::testing
