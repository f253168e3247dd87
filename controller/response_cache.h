#pragma once

// The response cache (Horovod's ResponseCache): per rank, an LRU of single-tensor responses
// already negotiated, each owning one bit position. Every rank applies the same sequence of
// put/get/erase (they all process the same response lists in the same order), so bit b names
// the same tensor on every rank without any communication, and steady state needs only one
// bitwise AND over the bits (controller/cache_bits.h).
//
// The key is (process set, name, op, dtype, dense shape, device, reduce op, root, row size,
// alltoall splits), and never a sparse tensor's nnz: nnz changes every step, and keying on it would
// send every step down the slow path, as Horovod's allgather-based sparse path does. An
// alltoall whose splits change on any rank goes stale there and is renegotiated (its
// response holds every rank's splits). An entry is found by (process set, name): the same
// name may be cached for several sets. Every rank caches every set's responses, members or
// not, so that bit positions stay in step; entries of sets other than the job are indexed by
// set, so that a non-member can report them as hits (controller/local_negotiator.h) and a
// removed set's entries can be erased.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/message.h"

namespace zen::controller {

// What one rank posted for a name; compared exactly. It is the rank's own view (its device,
// for allgather its own first dimension), so entries may differ between ranks while their
// bit positions agree.
struct CacheKey {
  std::string name;
  OpType op = OpType::kAllreduce;
  DataType dtype = DataType::kFloat32;
  TensorShape shape;
  Device device;
  ReduceOp reduceOp = ReduceOp::kSum;
  int32_t rootRank = 0;
  int64_t rowSize = 1;
  std::vector<int64_t> splits;
  int32_t processSet = kGlobalProcessSet;

  static CacheKey of(const Request& request);
  bool operator==(const CacheKey& o) const;
};

// Response types worth caching: those that repeat every step. Errors, joins, barriers and
// process set registrations never are, nor broadcasts (typically a one-off at start that would
// only take bit positions).
bool isCacheable(ResponseType type);

class ResponseCache {
 public:
  // capacity 0 disables the cache (every lookup misses, put does nothing).
  explicit ResponseCache(int capacity);
  // Entries point into the LRU list: movable (list iterators survive a move), not copyable.
  ResponseCache(const ResponseCache&) = delete;
  ResponseCache& operator=(const ResponseCache&) = delete;
  ResponseCache(ResponseCache&&) = default;
  ResponseCache& operator=(ResponseCache&&) = default;

  enum class State { kMiss, kHit, kInvalid };
  struct Lookup {
    State state = State::kMiss;
    int bit = -1;  // kHit and kInvalid: the entry's bit
  };

  bool enabled() const { return capacity_ > 0; }
  int capacity() const { return capacity_; }
  size_t size() const { return byName_.size(); }
  // Bit positions in use, holes included: the length of the hit section of the bit vector.
  int numBits() const { return static_cast<int>(slots_.size()); }

  // Hit when the name is cached with an equal key; invalid when cached with a different key
  // (the tensor changed: every rank must drop the entry). Does not touch the LRU order.
  Lookup lookup(const Request& request) const;

  bool hasBit(int bit) const;
  const Response& peek(int bit) const;
  // Marks the entry most recently used and returns it; all ranks call it for the same bits in
  // the same order.
  const Response& get(int bit);

  // Inserts or refreshes a single-tensor response. A new name takes the lowest free bit;
  // when the cache is full the least recently used entry is evicted first.
  void put(const Response& response, const CacheKey& key);
  void erase(int bit);
  // Erases every entry of set `id` (ascending bits, so all ranks free the same bits).
  void eraseSet(int32_t id);
  // The bits of the entries of each set other than the job (sets without entries absent).
  const std::map<int32_t, std::set<int>>& setBits() const { return setBits_; }

  // Entries evicted so far; the loop logs a one-time hint to raise ZEN_CACHE_CAPACITY.
  int64_t evictions() const { return evictions_; }

 private:
  struct Entry {
    Response response;
    CacheKey key;
    int bit = -1;
  };
  using Lru = std::list<Entry>;  // front = least recently used

  int takeFreeBit();

  int capacity_;
  Lru lru_;
  std::vector<std::optional<Lru::iterator>> slots_;  // by bit; empty = a hole
  std::vector<int> freeBits_;                        // holes, kept as a min-heap
  using SetAndName = std::pair<int32_t, std::string>;
  struct SetAndNameHash {
    size_t operator()(const SetAndName& k) const {
      return std::hash<std::string>()(k.second) ^ (static_cast<size_t>(k.first) * 0x9e3779b9U);
    }
  };
  std::unordered_map<SetAndName, Lru::iterator, SetAndNameHash> byName_;
  std::map<int32_t, std::set<int>> setBits_;
  int64_t evictions_ = 0;
};

// The single-tensor response for tensor i of a (possibly fused) response: what the cache holds.
Response splitResponse(const Response& response, size_t i);

}  // namespace zen::controller
