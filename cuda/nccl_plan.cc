#include "cuda/nccl_plan.h"

#include <algorithm>
#include <cstring>
#include <utility>

namespace zen::cuda {

Status pollWithDeadline(const std::function<PollState(Status* failure)>& poll,
                        double timeoutSeconds,
                        int rank,
                        const char* what) {
  return pollUntil(poll, timeoutSeconds, fmt::format("rank {}: {}", rank, what));
}

Status checkAlltoallvSizes(int size,
                           int rank,
                           const std::vector<size_t>& sendSizes,
                           const std::vector<size_t>& recvSizes) {
  ZEN_CHECK_ARG(
      static_cast<int>(sendSizes.size()) == size && static_cast<int>(recvSizes.size()) == size,
      "alltoallv on rank {}: expected {} send and receive segments, found {} and {}", rank, size,
      sendSizes.size(), recvSizes.size());
  ZEN_CHECK_ARG(sendSizes[rank] == recvSizes[rank],
                "alltoallv on rank {}: the own segment sends {} bytes but receives {}", rank,
                sendSizes[rank], recvSizes[rank]);
  return Status::ok();
}

Status checkAllgathervSizes(int size,
                            int rank,
                            size_t sendBytes,
                            const std::vector<size_t>& recvSizes) {
  ZEN_CHECK_ARG(static_cast<int>(recvSizes.size()) == size,
                "allgatherv on rank {}: expected {} receive segments, found {}", rank, size,
                recvSizes.size());
  ZEN_CHECK_ARG(recvSizes[rank] == sendBytes,
                "allgatherv on rank {}: sends {} bytes but its own receive segment holds {}", rank,
                sendBytes, recvSizes[rank]);
  return Status::ok();
}

namespace {
PeerBytes zeros(int size) {
  PeerBytes b;
  b.sent.assign(static_cast<size_t>(std::max(size, 0)), 0);
  b.received.assign(static_cast<size_t>(std::max(size, 0)), 0);
  return b;
}
}  // namespace

PeerBytes alltoallvBytes(int size,
                         int rank,
                         const std::vector<size_t>& sendSizes,
                         const std::vector<size_t>& recvSizes) {
  PeerBytes b = zeros(size);
  for (int p = 0; p < size; ++p) {
    if (p == rank) continue;
    b.sent[p] = sendSizes[p];
    b.received[p] = recvSizes[p];
  }
  return b;
}

PeerBytes allgathervBytes(int size,
                          int rank,
                          size_t sendBytes,
                          const std::vector<size_t>& recvSizes) {
  PeerBytes b = zeros(size);
  for (int p = 0; p < size; ++p) {
    if (p == rank) continue;
    b.sent[p] = sendBytes;
    b.received[p] = recvSizes[p];
  }
  return b;
}

PeerBytes allreduceBytes(int size, int rank, size_t bytes) {
  PeerBytes b = zeros(size);
  if (size <= 1) return b;
  const uint64_t n = static_cast<uint64_t>(size);
  const uint64_t own = bytes / n + (static_cast<uint64_t>(rank) < bytes % n ? 1 : 0);
  const uint64_t moved = 2 * (bytes - own);
  b.sent[(rank + 1) % size] = moved;
  b.received[(rank + size - 1) % size] = moved;
  return b;
}

PeerBytes reducescatterBytes(int size, int rank, size_t bytesPerRank) {
  PeerBytes b = zeros(size);
  if (size <= 1) return b;
  const uint64_t moved = static_cast<uint64_t>(size - 1) * bytesPerRank;
  b.sent[(rank + 1) % size] = moved;
  b.received[(rank + size - 1) % size] = moved;
  return b;
}

PeerBytes broadcastBytes(int size, int rank, size_t bytes, int root) {
  PeerBytes b = zeros(size);
  for (int p = 0; p < size; ++p) {
    if (p == root) continue;
    if (rank == root) b.sent[p] = bytes;
    if (rank == p) b.received[root] = bytes;
  }
  return b;
}

std::string NcclVersion::toString() const {
  return fmt::format("{}.{}.{}", major, minor, patch);
}

NcclVersion decodeNcclVersion(int code) {
  const int majorUnit = code < 10000 ? 1000 : 10000;
  return NcclVersion{code / majorUnit, code % majorUnit / 100, code % 100};
}

Status checkNcclVersion(int loadedCode, int builtCode) {
  const NcclVersion loaded = decodeNcclVersion(loadedCode);
  const NcclVersion built = decodeNcclVersion(builtCode);
  const NcclVersion least = decodeNcclVersion(kLeastNcclVersion);
  if (loaded.major == built.major &&
      std::make_pair(loaded.major, loaded.minor) >= std::make_pair(least.major, least.minor)) {
    return Status::ok();
  }
  return ZEN_ERROR(StatusCode::kFailedPrecondition,
                   "the NCCL library loaded is {} and Zen (built with NCCL {}) needs NCCL {}.{} "
                   "or newer of major version {}; load one (LD_LIBRARY_PATH)",
                   loaded.toString(), built.toString(), least.major, least.minor, built.major);
}

Status checkNcclVersions(const std::vector<int>& loadedByRank, int builtCode) {
  for (size_t r = 0; r < loadedByRank.size(); ++r) {
    if (loadedByRank[r] == 0) {
      return ZEN_ERROR(StatusCode::kFailedPrecondition,
                       "rank {} could not read the version of its NCCL library (ncclGetVersion "
                       "failed)",
                       r);
    }
    const Status own = checkNcclVersion(loadedByRank[r], builtCode);
    if (!own.isOk()) return ZEN_ERROR(own.code(), "on rank {}, {}", r, own.message());
  }
  for (size_t r = 1; r < loadedByRank.size(); ++r) {
    if (loadedByRank[r] == loadedByRank[0]) continue;
    return ZEN_ERROR(StatusCode::kFailedPrecondition,
                     "the ranks load different NCCL libraries: rank 0 {}, rank {} {}; NCCL needs "
                     "the same version on every rank (load one; LD_LIBRARY_PATH)",
                     decodeNcclVersion(loadedByRank[0]).toString(), r,
                     decodeNcclVersion(loadedByRank[r]).toString());
  }
  return Status::ok();
}

Status agreeOnNcclVersion(ops::Transport& bootstrap, int loadedCode, int builtCode) {
  const int32_t mine = loadedCode;
  std::vector<ops::ByteVector> gathered;
  ZEN_RETURN_IF_ERROR(bootstrap.allgatherv(&mine, sizeof(mine), &gathered));
  std::vector<int> loaded(gathered.size(), 0);
  for (size_t r = 0; r < gathered.size(); ++r) {
    int32_t code = 0;  // a malformed message reads as "no version": refused, named
    if (gathered[r].size() == sizeof(code)) std::memcpy(&code, gathered[r].data(), sizeof(code));
    loaded[r] = code;
  }
  return checkNcclVersions(loaded, builtCode);
}

}  // namespace zen::cuda
