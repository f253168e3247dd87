// GPU buckets run on the host (cuda/host_staging.h).
#include "cuda/host_staging.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <utility>

namespace zen::cuda {
namespace {

using Clock = std::chrono::steady_clock;

// One entry's host twin: the entry the host executor runs (same request and handle, host
// views into the bucket's host region).
struct Shadow {
  TensorEntry* original = nullptr;
  TensorEntry host;
};

// A bucket's host twins in one region: 64-byte aligned pieces, measured first (no base), then
// placed (DeviceStaging::hostMemory's base).
class HostRegion {
 public:
  explicit HostRegion(std::byte* base = nullptr) : base_(base) {}
  void* take(size_t bytes) {
    void* at = base_ == nullptr ? nullptr : base_ + used_;
    used_ += (bytes + 63) / 64 * 64;
    return at;
  }
  size_t used() const { return used_; }

 private:
  std::byte* base_;
  size_t used_ = 0;
};

// The view moved to the host region; a view without data (an allgather's output) stays
// without.
DenseView onHost(DenseView view, HostRegion* region) {
  view.device = Device::cpu();
  if (view.data != nullptr) view.data = region->take(view.bytes());
  return view;
}

// The host twin of `e` in `region`, and the copies that fill its inputs.
void stageIn(TensorEntry& e, HostRegion* region, Shadow* s, std::vector<StagedCopy>* copies) {
  s->original = &e;
  TensorEntry& h = s->host;
  h.request = e.request;
  h.request.device = Device::cpu();
  h.handle = e.handle;
  h.enqueued = e.enqueued;
  if (e.request.op == OpType::kSparseAllreduce) {
    const SparseView& in = e.sparseInput;
    const size_t nnz = static_cast<size_t>(in.nnz);
    h.sparseInput = in;
    h.sparseInput.indices = static_cast<const int64_t*>(region->take(nnz * sizeof(int64_t)));
    h.sparseInput.values = region->take(nnz * in.rowBytes());
    h.sparseInput.device = Device::cpu();
    copies->push_back(
        StagedCopy{in.indices, const_cast<int64_t*>(h.sparseInput.indices), nnz * sizeof(int64_t)});
    copies->push_back(
        StagedCopy{in.values, const_cast<void*>(h.sparseInput.values), nnz * in.rowBytes()});
  } else {
    h.input = onHost(e.input, region);
    if (e.input.data != nullptr) {
      copies->push_back(StagedCopy{e.input.data, h.input.data, e.input.bytes()});
    }
  }
  // An output aliasing the input (in place, a broadcast's tensor) aliases its copy too.
  const bool inPlace = e.request.op != OpType::kSparseAllreduce && e.output.data != nullptr &&
                       e.output.data == e.input.data;
  h.output = inPlace ? h.input : onHost(e.output, region);
}

// Where an entry's result goes besides its dense output: rows in the handle (an allgather's or
// alltoall's), a sparse result in the handle, or nothing.
enum class HandleRows { kNone, kGathered, kSparse };

HandleRows handleRows(const TensorEntry& e) {
  const OpType op = e.request.op;
  if (op == OpType::kAllgather || op == OpType::kAlltoall) return HandleRows::kGathered;
  if (op == OpType::kSparseAllreduce && e.output.data == nullptr) return HandleRows::kSparse;
  return HandleRows::kNone;
}

// The copies that bring s's results to the device: its dense output, and the handle's rows
// (gathered, sparse) moved into device memory the handle owns. The host rows must stay until the
// copies have run (releaseHostResults).
Status stageOut(Shadow& s, int device, DeviceStaging& staging, std::vector<StagedCopy>* copies) {
  TensorEntry& e = *s.original;
  if (e.output.data != nullptr) {
    copies->push_back(StagedCopy{s.host.output.data, e.output.data, e.output.bytes()});
  }
  OpResult& out = e.handle->result();
  const HandleRows rows = handleRows(e);
  if (rows == HandleRows::kGathered) {
    const size_t bytes = out.gathered.size();
    ZEN_RETURN_IF_ERROR(staging.allocate(bytes, &out.gatheredOnDevice));
    out.gatheredDevice = Device::cuda(device);
    out.gatheredDeviceBytes = bytes;
    copies->push_back(StagedCopy{out.gathered.data(), out.gatheredOnDevice.get(), bytes});
  } else if (rows == HandleRows::kSparse) {
    // One allocation: the indices (int64), then the rows.
    const size_t indexBytes = out.sparse.indices.size() * sizeof(int64_t);
    const size_t valueBytes = out.sparse.values.size();
    std::shared_ptr<void> memory;
    ZEN_RETURN_IF_ERROR(staging.allocate(indexBytes + valueBytes, &memory));
    std::byte* base = static_cast<std::byte*>(memory.get());
    out.sparseDevice = Device::cuda(device);
    out.sparseDeviceNnz = out.sparse.nnz();
    out.sparseIndicesOnDevice.reset();
    out.sparseValuesOnDevice.reset();
    if (memory) {
      out.sparseIndicesOnDevice = std::shared_ptr<void>(memory, base);
      out.sparseValuesOnDevice = std::shared_ptr<void>(memory, base + indexBytes);
    }
    copies->push_back(StagedCopy{out.sparse.indices.data(), base, indexBytes});
    copies->push_back(StagedCopy{out.sparse.values.data(), base + indexBytes, valueBytes});
  }
  return Status::ok();
}

// After the copies: the results live on the device only (cuda_executor.h's form: `sparse` keeps
// numRows, rowSize and dtype).
void releaseHostResults(Shadow& s) {
  const TensorEntry& e = *s.original;
  OpResult& out = e.handle->result();
  const HandleRows rows = handleRows(e);
  if (rows == HandleRows::kGathered) {
    std::vector<std::byte>().swap(out.gathered);
  } else if (rows == HandleRows::kSparse) {
    std::vector<int64_t>().swap(out.sparse.indices);
    RowBytes().swap(out.sparse.values);
  }
}

}  // namespace

std::vector<std::vector<BouncePiece>> planBounce(const std::vector<StagedCopy>& copies,
                                                 size_t capacity) {
  std::vector<std::vector<BouncePiece>> rounds;
  capacity = std::max<size_t>(capacity, 1);
  size_t used = capacity;  // a full buffer: the first piece opens a round
  for (size_t c = 0; c < copies.size(); ++c) {
    for (size_t offset = 0; offset < copies[c].bytes;) {
      if (used == capacity) {
        rounds.emplace_back();
        used = 0;
      }
      const size_t bytes = std::min(copies[c].bytes - offset, capacity - used);
      rounds.back().push_back(BouncePiece{c, offset, used, bytes});
      used += bytes;
      offset += bytes;
    }
  }
  return rounds;
}

bool runsStaged(const Response& response) {
  return response.processSet != kGlobalProcessSet ||
         (response.type == ResponseType::kAllreduce && response.reduceOp == ReduceOp::kAdasum);
}

Status runStaged(const Response& response,
                 const std::vector<TensorEntry*>& entries,
                 Executor& host,
                 DeviceStaging& staging,
                 BucketReport* report) {
  // A staging step's failure (not the host executor's own) gives the data plane up.
  auto staged = [&](const Status& s) {
    if (s.isOk()) return s;
    const Status why =
        ZEN_ERROR(StatusCode::kAborted, "{} of '{}' staged through the host: {}",
                  responseTypeName(response.type), response.tensorNames.front(), s.toString());
    host.abandon(why);
    return why;
  };
  std::vector<Shadow> shadows(entries.size());
  std::vector<TensorEntry*> hostEntries(entries.size(), nullptr);
  std::vector<StagedCopy> in;
  HostRegion measured;
  int device = -1;
  for (size_t i = 0; i < entries.size(); ++i) {
    TensorEntry* e = entries[i];
    if (e == nullptr) continue;  // joined: the host executor contributes what a joined rank does
    const Device where = entryDevice(*e);
    ZEN_CHECK_ARG(where.kind == Device::Kind::kCuda && (device < 0 || where.index == device),
                  "{} of '{}' staged through the host: tensor '{}' is on {}, expected {}",
                  responseTypeName(response.type), response.tensorNames.front(), e->request.name,
                  where.toString(), device < 0 ? "a CUDA device" : Device::cuda(device).toString());
    device = where.index;
    stageIn(*e, &measured, &shadows[i], &in);
    hostEntries[i] = &shadows[i].host;
  }

  const auto copyIn = Clock::now();
  if (device >= 0) {
    ZEN_RETURN_IF_ERROR(staged(staging.prepare(device, entries)));
    Result<std::byte*> base = staging.hostMemory(measured.used());
    ZEN_RETURN_IF_ERROR(staged(base.status()));
    HostRegion region(base.value());
    in.clear();
    for (Shadow& s : shadows) {
      if (s.original != nullptr) stageIn(*s.original, &region, &s, &in);
    }
    ZEN_RETURN_IF_ERROR(staged(staging.toHost(in)));
  }
  const auto run = Clock::now();
  ZEN_RETURN_IF_ERROR(host.execute(response, hostEntries, report));
  const auto copyOut = Clock::now();

  std::vector<StagedCopy> out;
  for (Shadow& s : shadows) {
    if (s.original != nullptr) ZEN_RETURN_IF_ERROR(staged(stageOut(s, device, staging, &out)));
  }
  if (device >= 0) ZEN_RETURN_IF_ERROR(staged(staging.toDevice(out)));
  for (Shadow& s : shadows) {
    if (s.original != nullptr) releaseHostResults(s);
  }
  report->phases.insert(report->phases.begin(), ExecPhase{"COPY_TO_HOST", copyIn, run});
  report->phases.push_back(ExecPhase{"COPY_TO_DEVICE", copyOut, Clock::now()});
  report->scheme = "host-staged " + report->scheme;
  return Status::ok();
}

}  // namespace zen::cuda
