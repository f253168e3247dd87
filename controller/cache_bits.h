#pragma once

// The bit vector of the cache fast path (Horovod's CacheCoordinator). Every cycle each rank
// contributes one vector and the ranks AND them in a single allreduce:
//
//   bit 0            NOT shutdown requested        (inverted: after AND, 0 = some rank wants it)
//   bit 1            NOT uncached request queued   (0 = somebody needs the slow path)
//   bit 2            NOT stale (invalid) entry seen
//   bit 3            NOT joined
//   bits 4 .. 4+n    entry b hit by a queued request, or b is an entry of a process set this
//                    rank is not in                         (1 after AND = hit on every member)
//   bits 4+n .. 4+2n NOT entry b stale on this rank          (0 after AND = erase everywhere)
//
// with n the cache's bit count, equal on every rank. Horovod needs a second (OR) allreduce to
// agree on stale entries; carrying them inverted in the same vector keeps it at one AND per
// cycle, for n extra bits.
//
// Join: Horovod's joined ranks report every bit as a hit, so that cached allreduces complete
// with their zeros; but when the last rank joins, every cached entry then completes at once,
// with zeros everywhere. Here a joined rank reports only its real hits, and while any rank is
// joined the others send their non-common hits to rank 0, whose table counts joined ranks as
// ready: the slow path during the (rare) join window, and no phantom collectives.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/status.h"

namespace zen::controller {

using BitVector = std::vector<uint64_t>;

struct LocalCacheBits {
  bool shutdown = false;
  bool uncachedInQueue = false;
  bool invalidInQueue = false;
  bool joined = false;
  std::vector<int> hits;     // entries a queued request hit
  std::vector<int> invalid;  // entries a queued request found stale
};

struct GlobalCacheBits {
  bool shutdown = false;         // some rank asked
  bool uncachedInQueue = false;  // some rank needs rank 0: take the slow path
  bool invalidInQueue = false;
  bool someoneJoined = false;   // cached hits must be renegotiated through rank 0
  std::vector<int> commonHits;  // ascending: hit on every rank, servable from the cache
  std::vector<int> invalid;     // ascending: stale on some rank, every rank erases them
};

size_t cacheBitWords(int numBits);
BitVector encodeCacheBits(const LocalCacheBits& local, int numBits);
// Fails (kInvalidArgument) when the vector's length does not match numBits: the ranks' caches
// have diverged, a bug that must not be papered over.
Result<GlobalCacheBits> decodeCacheBits(const BitVector& anded, int numBits);

// In-place AND, what the control channel's allreduce computes; used by in-process channels.
void andInto(BitVector* acc, const BitVector& other);

}  // namespace zen::controller
