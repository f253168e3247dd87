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

Status agreeOnNcclSetup(ops::Transport& bootstrap,
                        const Status& local,
                        int loadedCode,
                        int builtCode) {
  // [int32 version][int32 status code][the status' message], a failed setup's only.
  const int32_t head[2] = {loadedCode, static_cast<int32_t>(local.code())};
  ops::ByteVector mine(sizeof(head));
  std::memcpy(mine.data(), head, sizeof(head));
  if (!local.isOk()) {
    const std::string& text = local.message();
    mine.insert(mine.end(), text.begin(), text.end());
  }
  std::vector<ops::ByteVector> gathered;
  ZEN_RETURN_IF_ERROR(bootstrap.allgatherv(mine.data(), mine.size(), &gathered));
  std::vector<int> loaded(gathered.size(), 0);
  for (size_t r = 0; r < gathered.size(); ++r) {
    int32_t theirs[2] = {0, 0};  // a malformed message reads as "no version": refused, named
    if (gathered[r].size() >= sizeof(theirs)) {
      std::memcpy(theirs, gathered[r].data(), sizeof(theirs));
    }
    loaded[r] = theirs[0];
    if (theirs[1] != static_cast<int32_t>(StatusCode::kOk)) {
      const std::string text(reinterpret_cast<const char*>(gathered[r].data()) + sizeof(theirs),
                             gathered[r].size() - sizeof(theirs));
      return ZEN_ERROR(StatusCode::kFailedPrecondition, "rank {} could not set up for NCCL: {}", r,
                       text);
    }
  }
  return checkNcclVersions(loaded, builtCode);
}

Status shareNcclUniqueId(ops::Transport& bootstrap, const Status& made, void* id, size_t idBytes) {
  // [1: the id follows; 0: rank 0's error message, cut to fit and NUL-terminated][idBytes]
  ops::ByteVector message(1 + idBytes);
  if (bootstrap.rank() == 0) {
    message[0] = made.isOk() ? 1 : 0;
    if (made.isOk()) {
      std::memcpy(message.data() + 1, id, idBytes);
    } else if (idBytes > 0) {
      const std::string& text = made.message();
      std::memcpy(message.data() + 1, text.data(), std::min(text.size(), idBytes - 1));
    }
  }
  ZEN_RETURN_IF_ERROR(bootstrap.broadcast(message.data(), message.size(), 0));
  if (bootstrap.rank() == 0) return made;
  if (message[0] == 0) {
    const auto* text = reinterpret_cast<const char*>(message.data() + 1);
    return ZEN_ERROR(StatusCode::kFailedPrecondition,
                     "rank 0 could not create the NCCL unique id: {}",
                     std::string(text, std::find(text, text + idBytes, '\0')));
  }
  std::memcpy(id, message.data() + 1, idBytes);
  return Status::ok();
}

void EndRequest::request(const Status& why, Kind kind) {
  if (kind == Kind::kNone) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (kind_ == Kind::kNone) {
    why_ = why;
    kind_ = kind;
  } else if (kind_ == Kind::kAbort && kind == Kind::kFail) {
    kind_ = Kind::kFail;  // an abort would now wait for the framework's kernel
  }
  pending_.store(true, std::memory_order_release);
}

EndRequest::Kind EndRequest::current(Status* why) const {
  std::lock_guard<std::mutex> lock(mu_);
  *why = why_;
  return kind_;
}

}  // namespace zen::cuda
