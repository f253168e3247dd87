#include "ops/mpi_abort_channel.h"

#ifdef ZEN_HAVE_MPI

#include <algorithm>
#include <chrono>
#include <cstring>
#include <random>
#include <thread>

namespace zen::ops {
namespace {

constexpr int kTag = 1;  // the channel's communicator carries nothing else

}  // namespace

Result<std::unique_ptr<MpiAbortChannel>> MpiAbortChannel::create(MPI_Comm comm,
                                                                 double graceSeconds) {
  MPI_Comm own;
  if (MPI_Comm_dup(comm, &own) != MPI_SUCCESS) {
    return ZEN_ERROR(StatusCode::kIoError,
                     "mpi transport: MPI_Comm_dup of the abort channel failed");
  }
  MPI_Comm_set_errhandler(own, MPI_ERRORS_RETURN);
  int rank = 0;
  MPI_Comm_rank(own, &rank);
  uint64_t token = 0;
  if (rank == 0) {
    std::random_device random;
    token = (uint64_t{random()} << 32) ^ random();
  }
  if (MPI_Bcast(&token, 1, MPI_UINT64_T, 0, own) != MPI_SUCCESS) {
    MPI_Comm_free(&own);
    return ZEN_ERROR(StatusCode::kIoError, "mpi transport: the abort channel's MPI_Bcast failed");
  }
  return std::unique_ptr<MpiAbortChannel>(new MpiAbortChannel(own, token, graceSeconds));
}

MpiAbortChannel::MpiAbortChannel(MPI_Comm comm, uint64_t token, double graceSeconds)
    : comm_(comm),
      token_(token),
      graceSeconds_(graceSeconds),
      incoming_(sizeof(uint64_t) + kMaxReasonBytes) {
  postReceive();
}

MpiAbortChannel::~MpiAbortChannel() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  if (receive_ != MPI_REQUEST_NULL) {
    MPI_Cancel(&receive_);
    MPI_Wait(&receive_, MPI_STATUS_IGNORE);
  }
  // Small announcements leave at once; one still pending after the grace (a peer that stopped
  // reading) is released to MPI with its buffer, which is then never freed under it.
  const auto until = std::chrono::steady_clock::now() +
                     std::chrono::duration<double>(std::max(0.0, graceSeconds_));
  int done = sends_.empty() ? 1 : 0;
  while (!done) {
    if (MPI_Testall(static_cast<int>(sends_.size()), sends_.data(), &done, MPI_STATUSES_IGNORE) !=
            MPI_SUCCESS ||
        std::chrono::steady_clock::now() >= until) {
      break;
    }
    if (!done) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (!done) {
    for (MPI_Request& r : sends_) {
      if (r != MPI_REQUEST_NULL) MPI_Request_free(&r);
    }
    (void)outgoing_.release();
  }
  MPI_Comm_free(&comm_);
}

void MpiAbortChannel::postReceive() {
  if (MPI_Irecv(incoming_.data(), static_cast<int>(incoming_.size()), MPI_BYTE, MPI_ANY_SOURCE,
                kTag, comm_, &receive_) != MPI_SUCCESS) {
    receive_ = MPI_REQUEST_NULL;
  }
}

void MpiAbortChannel::announce(const std::string& why) {
  if (outgoing_ || !poll().isOk()) return;
  int rank = 0;
  int size = 1;
  MPI_Comm_rank(comm_, &rank);
  MPI_Comm_size(comm_, &size);
  const size_t reason = std::min(why.size(), kMaxReasonBytes);
  outgoing_ = std::make_unique<std::vector<char>>(sizeof(uint64_t) + reason);
  std::memcpy(outgoing_->data(), &token_, sizeof(uint64_t));
  std::memcpy(outgoing_->data() + sizeof(uint64_t), why.data(), reason);
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    MPI_Request request;
    if (MPI_Isend(outgoing_->data(), static_cast<int>(outgoing_->size()), MPI_BYTE, peer, kTag,
                  comm_, &request) == MPI_SUCCESS) {
      sends_.push_back(request);
    }
  }
}

Status MpiAbortChannel::poll() {
  while (heard_.isOk() && receive_ != MPI_REQUEST_NULL) {
    int done = 0;
    MPI_Status status;
    if (MPI_Test(&receive_, &done, &status) != MPI_SUCCESS || !done) break;
    int bytes = 0;
    MPI_Get_count(&status, MPI_BYTE, &bytes);
    uint64_t token = 0;
    if (bytes >= static_cast<int>(sizeof(uint64_t))) {
      std::memcpy(&token, incoming_.data(), sizeof(uint64_t));
    }
    if (bytes < static_cast<int>(sizeof(uint64_t)) || token != token_) {
      postReceive();  // meant for an earlier communicator with this context id
      continue;
    }
    heard_ =
        ZEN_ERROR(StatusCode::kIoError, "rank {} aborted after an error ({})", status.MPI_SOURCE,
                  std::string(incoming_.data() + sizeof(uint64_t), bytes - sizeof(uint64_t)));
  }
  return heard_;
}

}  // namespace zen::ops

#endif  // ZEN_HAVE_MPI
