// Host staging's copies on the GPU (cuda/cuda_staging.h).
#include "cuda/cuda_staging.h"

#include <cuda_runtime.h>
#include <fmt/format.h>
#include <spdlog/logger.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "cuda/cuda_check.h"
#include "cuda/device_buffer.h"
#include "cuda/device_memory.h"
#include "cuda/ready_event.h"
#include "cuda/stream_wait.h"

namespace zen::cuda {

struct CudaStaging::Impl {
  double timeoutSeconds;
  std::function<Status(int)> useDevice;
  std::shared_ptr<spdlog::logger> logger;
  int device = -1;
  cudaStream_t stream = nullptr;
  PinnedBuffer twins;   // hostMemory(): the buckets' host twins, copied to and from directly
  PinnedBuffer bounce;  // the other host memory's copies (results the CPU executor allocated)
  Status failure;       // the first failed copy: the buffers may still be in use
  // Outgrown buffers, freed with this object: GrowingBuffer's release waits for the whole
  // device (cudaDeviceSynchronize), which behind a collective stuck on the executor's stream
  // would block the loop thread that is to abort it.
  std::vector<PinnedBuffer> retired;

  // `buffer` with room for `bytes`; a smaller one retires instead of being freed.
  Status grow(PinnedBuffer& buffer, size_t bytes) {
    if (bytes <= buffer.capacity()) return Status::ok();
    if (buffer.data() != nullptr) retired.push_back(std::move(buffer));
    buffer = PinnedBuffer();
    return buffer.reserve(bytes);
  }

  // Whether [p, p + bytes) lies in `twins`.
  bool inTwins(const void* p, size_t bytes) const {
    const auto* b = static_cast<const std::byte*>(p);
    const auto* begin = twins.as<const std::byte>();
    return begin != nullptr && b >= begin && b + bytes <= begin + twins.capacity();
  }

  // The copies: straight for the twins region, the rest through the bounce buffer a round at
  // a time; every wait bounded.
  Status copy(const std::vector<StagedCopy>& copies, bool toDevice);
  // kAborted once a copy failed.
  Status check() const {
    if (failure.isOk()) return Status::ok();
    return ZEN_ERROR(StatusCode::kAborted, "host staging failed earlier: {}", failure.toString());
  }
  // The copies, unless one failed before; remembers their failure.
  Status guardedCopy(const std::vector<StagedCopy>& copies, bool toDevice) {
    ZEN_RETURN_IF_ERROR(check());
    Status s = copy(copies, toDevice);
    if (!s.isOk()) failure = s;
    return s;
  }
};

Status CudaStaging::Impl::copy(const std::vector<StagedCopy>& copies, bool toDevice) {
  const char* what = toDevice ? "copying a staged bucket's results to the device"
                              : "copying a staged bucket's inputs to the host";
  // Page-locked memory directly; the rest through the bounce buffer, whose first wait covers
  // these copies too.
  std::vector<StagedCopy> bounced;
  for (const StagedCopy& c : copies) {
    if (c.bytes == 0) continue;
    if (!inTwins(toDevice ? c.src : c.dst, c.bytes)) {
      bounced.push_back(c);
      continue;
    }
    ZEN_CHECK_CUDA(cudaMemcpyAsync(
        c.dst, c.src, c.bytes, toDevice ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost, stream));
  }
  const std::vector<std::vector<BouncePiece>> rounds = planBounce(bounced, kBounceBytes);
  if (rounds.empty()) return waitStream(stream, timeoutSeconds, what);
  // Every round but the last fills the buffer: the first is the largest.
  const BouncePiece& end = rounds.front().back();
  ZEN_RETURN_IF_ERROR(grow(bounce, end.at + end.bytes));
  std::byte* buffer = bounce.as<std::byte>();
  for (const auto& round : rounds) {
    for (const BouncePiece& p : round) {
      const StagedCopy& c = bounced[p.copy];
      if (toDevice) {
        std::memcpy(buffer + p.at, static_cast<const std::byte*>(c.src) + p.offset, p.bytes);
        ZEN_CHECK_CUDA(cudaMemcpyAsync(static_cast<std::byte*>(c.dst) + p.offset, buffer + p.at,
                                       p.bytes, cudaMemcpyHostToDevice, stream));
      } else {
        ZEN_CHECK_CUDA(cudaMemcpyAsync(buffer + p.at,
                                       static_cast<const std::byte*>(c.src) + p.offset, p.bytes,
                                       cudaMemcpyDeviceToHost, stream));
      }
    }
    ZEN_RETURN_IF_ERROR(waitStream(stream, timeoutSeconds, what));
    if (toDevice) continue;
    for (const BouncePiece& p : round) {
      std::memcpy(static_cast<std::byte*>(bounced[p.copy].dst) + p.offset, buffer + p.at, p.bytes);
    }
  }
  return Status::ok();
}

CudaStaging::CudaStaging(double timeoutSeconds,
                         std::function<Status(int)> useDevice,
                         std::shared_ptr<spdlog::logger> logger)
    : impl_(std::make_unique<Impl>()) {
  impl_->timeoutSeconds = timeoutSeconds;
  impl_->useDevice = std::move(useDevice);
  impl_->logger = std::move(logger);
}

CudaStaging::~CudaStaging() {
  if (impl_->stream == nullptr) return;
  (void)cudaSetDevice(impl_->device);
  (void)waitStream(impl_->stream, impl_->timeoutSeconds, "host staging's shutdown");
  (void)cudaStreamDestroy(impl_->stream);
}

Status CudaStaging::prepare(int device, const std::vector<TensorEntry*>& entries) {
  Impl& m = *impl_;
  ZEN_RETURN_IF_ERROR(m.check());
  ZEN_RETURN_IF_ERROR(m.useDevice(device));
  if (m.stream == nullptr) {
    ZEN_CHECK_CUDA(cudaStreamCreateWithFlags(&m.stream, cudaStreamNonBlocking));
    m.device = device;
    if (m.logger) {
      m.logger->info(
          "GPU tensors of Adasum and of process sets other than the global one run through "
          "host memory on this rank (copied from cuda:{}, reduced by the CPU executor, copied "
          "back): Zen has no NCCL form of them",
          device);
    }
  }
  // On the host: nothing of this bucket is queued yet, so a framework that never readies an
  // input costs this bucket a kTimeout and leaves staging usable.
  std::vector<cudaEvent_t> events;
  for (const TensorEntry* e : entries) {
    if (e != nullptr) events.push_back(readyEventOf(*e));
  }
  return waitEvents(events, m.timeoutSeconds,
                    "the framework's work on the inputs of a bucket staged through the host "
                    "(their ready events)");
}

Result<std::byte*> CudaStaging::hostMemory(size_t bytes) {
  Impl& m = *impl_;
  ZEN_RETURN_IF_ERROR(m.check());  // a failed copy may still be writing into it
  Status grown = m.grow(m.twins, std::max<size_t>(bytes, 64));
  if (!grown.isOk()) return grown;
  return m.twins.as<std::byte>();
}

Status CudaStaging::toHost(const std::vector<StagedCopy>& copies) {
  return impl_->guardedCopy(copies, false);
}

Status CudaStaging::toDevice(const std::vector<StagedCopy>& copies) {
  return impl_->guardedCopy(copies, true);
}

Status CudaStaging::allocate(size_t bytes, std::shared_ptr<void>* out) {
  return ownedDeviceMemory(impl_->device, bytes, out);
}

}  // namespace zen::cuda
