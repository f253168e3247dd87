// The per-rank LRU of negotiated responses with stable bit positions (controller/response_cache.h).

#include "controller/response_cache.h"

#include <algorithm>
#include <functional>

namespace zen::controller {

CacheKey CacheKey::of(const Request& q) {
  return CacheKey{q.name,     q.op,       q.dtype,   q.shape,  q.device,
                  q.reduceOp, q.rootRank, q.rowSize, q.splits, q.processSet};
}

bool CacheKey::operator==(const CacheKey& o) const {
  return name == o.name && op == o.op && dtype == o.dtype && shape == o.shape &&
         device == o.device && reduceOp == o.reduceOp && rootRank == o.rootRank &&
         rowSize == o.rowSize && splits == o.splits && processSet == o.processSet;
}

bool isCacheable(ResponseType type) {
  return type == ResponseType::kAllreduce || type == ResponseType::kSparseAllreduce ||
         type == ResponseType::kAllgather || type == ResponseType::kAlltoall ||
         type == ResponseType::kReducescatter;
}

ResponseCache::ResponseCache(int capacity) : capacity_(std::max(capacity, 0)) {}

ResponseCache::Lookup ResponseCache::lookup(const Request& request) const {
  auto it = byName_.find({request.processSet, request.name});
  if (it == byName_.end()) return {};
  const Entry& e = *it->second;
  return {e.key == CacheKey::of(request) ? State::kHit : State::kInvalid, e.bit};
}

bool ResponseCache::hasBit(int bit) const {
  return bit >= 0 && bit < numBits() && slots_[static_cast<size_t>(bit)].has_value();
}

const Response& ResponseCache::peek(int bit) const {
  return (*slots_[static_cast<size_t>(bit)])->response;
}

const Response& ResponseCache::get(int bit) {
  auto it = *slots_[static_cast<size_t>(bit)];
  lru_.splice(lru_.end(), lru_, it);  // iterators stay valid
  return it->response;
}

int ResponseCache::takeFreeBit() {
  if (freeBits_.empty()) {
    slots_.emplace_back();
    return numBits() - 1;
  }
  std::pop_heap(freeBits_.begin(), freeBits_.end(), std::greater<>());
  const int bit = freeBits_.back();
  freeBits_.pop_back();
  return bit;
}

void ResponseCache::put(const Response& response, const CacheKey& key) {
  if (!enabled()) return;
  auto found = byName_.find({key.processSet, key.name});
  if (found != byName_.end()) {
    found->second->response = response;
    found->second->key = key;
    lru_.splice(lru_.end(), lru_, found->second);
    return;
  }
  if (static_cast<int>(byName_.size()) >= capacity_) {
    erase(lru_.front().bit);
    ++evictions_;
  }
  const int bit = takeFreeBit();
  lru_.push_back(Entry{response, key, bit});
  slots_[static_cast<size_t>(bit)] = std::prev(lru_.end());
  byName_[{key.processSet, key.name}] = std::prev(lru_.end());
  if (key.processSet != kGlobalProcessSet) setBits_[key.processSet].insert(bit);
}

void ResponseCache::erase(int bit) {
  if (!hasBit(bit)) return;
  auto it = *slots_[static_cast<size_t>(bit)];
  byName_.erase({it->key.processSet, it->key.name});
  if (it->key.processSet != kGlobalProcessSet) {
    auto set = setBits_.find(it->key.processSet);
    set->second.erase(bit);
    if (set->second.empty()) setBits_.erase(set);
  }
  lru_.erase(it);
  slots_[static_cast<size_t>(bit)].reset();
  freeBits_.push_back(bit);
  std::push_heap(freeBits_.begin(), freeBits_.end(), std::greater<>());
}

void ResponseCache::eraseSet(int32_t id) {
  auto set = setBits_.find(id);
  if (set == setBits_.end()) return;
  const std::set<int> bits = set->second;  // erase() edits setBits_
  for (int bit : bits) erase(bit);
}

Response splitResponse(const Response& response, size_t i) {
  Response r = response;
  r.tensorNames = {response.tensorNames[i]};
  r.shapes = {response.shapes[i]};
  const size_t names = response.tensorNames.size();
  if (!response.gatherRows.empty()) {
    const size_t size = response.gatherRows.size() / names;
    r.gatherRows.assign(response.gatherRows.begin() + static_cast<std::ptrdiff_t>(i * size),
                        response.gatherRows.begin() + static_cast<std::ptrdiff_t>((i + 1) * size));
  }
  if (response.type == ResponseType::kSparseAllreduce) {
    r.rowOffsets = {0};
    r.totalRows = r.shapes[0].numRows();
  }
  return r;
}

}  // namespace zen::controller
