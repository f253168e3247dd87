// The CUDA executor's host-side decisions on the CPU: the finalizer thread's ordering,
// errors and timeouts (fake events), the completion-event pool, the dense fusion layout and
// its batched copies, the sparse bucket's output mode and index shifts, the allgather
// bucket's layout (every rank simulated, against the CPU executor's concatenation), and the
// dispatch between host and device executors (from the plan, the same on every rank).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <numeric>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "cuda/device_bucket.h"
#include "cuda/dispatch_executor.h"
#include "cuda/event_pool.h"
#include "cuda/finalizer.h"

namespace zen::cuda {
namespace {

using State = Finalizer::State;
using Fault = Finalizer::Fault;

TEST(Finalizer, CompletesInOrderOnceEachEventIsDone) {
  Finalizer f(10.0);
  std::atomic<bool> firstDone{false};
  std::atomic<bool> secondDone{false};
  std::mutex mu;
  std::vector<int> order;
  std::thread::id caller = std::this_thread::get_id();
  std::thread::id ranOn;
  f.add(
      "first", [&](Status*) { return firstDone ? State::kDone : State::kPending; }, nullptr,
      [&](const Status& s, Fault) {
        EXPECT_TRUE(s.isOk());
        std::lock_guard<std::mutex> lock(mu);
        order.push_back(1);
        ranOn = std::this_thread::get_id();
      });
  // The second event is done at once, but the stream ends work in order: it waits behind.
  f.add(
      "second", [&](Status*) { return State::kDone; }, nullptr,
      [&](const Status& s, Fault) {
        EXPECT_TRUE(s.isOk());
        std::lock_guard<std::mutex> lock(mu);
        order.push_back(2);
        secondDone = true;
      });
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_FALSE(secondDone.load());
  EXPECT_EQ(f.pending(), 2u);
  firstDone = true;
  f.drain();
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
  EXPECT_NE(ranOn, caller);
  EXPECT_EQ(f.pending(), 0u);
}

TEST(Finalizer, ReportsTheDevicesErrorAndGoesOn) {
  Finalizer f(10.0);
  Status first, second;
  f.add(
      "bad",
      [](Status* error) {
        *error = Status(StatusCode::kAborted, "an illegal address");
        return State::kFailed;
      },
      nullptr,
      [&](const Status& s, Fault fault) {
        first = s;
        EXPECT_EQ(fault, Fault::kDevice);
      });
  f.add(
      "good", [](Status*) { return State::kDone; }, nullptr,
      [&](const Status& s, Fault) { second = s; });
  f.drain();
  EXPECT_EQ(first.code(), StatusCode::kAborted);
  EXPECT_EQ(first.message(), "an illegal address");
  EXPECT_TRUE(second.isOk());
}

TEST(Finalizer, TimesOutAHungEvent) {
  Finalizer f(0.05);
  Status s;
  f.add(
      "allreduce of 'x'", [](Status*) { return State::kPending; }, nullptr,
      [&](const Status& st, Fault fault) {
        s = st;
        EXPECT_EQ(fault, Fault::kDevice);  // no input named: the collective's own hang
      });
  f.drain();
  EXPECT_EQ(s.code(), StatusCode::kTimeout);
  EXPECT_NE(s.message().find("allreduce of 'x'"), std::string::npos) << s.message();
}

// A bucket whose input's ready event never completed is the framework's fault (kInputs: no
// abort), naming the input; the buckets queued behind it on the stream are too, naming it,
// even though their own inputs were ready; each ends at its own deadline. One that ended
// before it, and a hung one whose inputs were ready (its inputs are asked only at the deadline),
// are kDevice.
TEST(Finalizer, TellsAnInputNeverReadyFromAHungCollective) {
  Finalizer f(0.05);
  std::vector<Status> statuses(3);
  std::vector<Fault> faults(3, Fault::kNone);
  std::atomic<int> asked{0};
  for (int i = 0; i < 3; ++i) {
    f.add(
        "allreduce of 't" + std::to_string(i) + "'", [](Status*) { return State::kPending; },
        [i, &asked] {
          ++asked;
          return i == 1 ? std::string("w") : std::string();
        },
        [i, &statuses, &faults](const Status& s, Fault fault) {
          statuses[static_cast<size_t>(i)] = s;
          faults[static_cast<size_t>(i)] = fault;
        });
  }
  f.drain();
  EXPECT_EQ(faults, (std::vector<Fault>{Fault::kDevice, Fault::kInputs, Fault::kInputs}));
  for (const Status& s : statuses) EXPECT_EQ(s.code(), StatusCode::kTimeout) << s.toString();
  EXPECT_NE(statuses[0].message().find("did not finish"), std::string::npos)
      << statuses[0].toString();
  EXPECT_NE(statuses[1].message().find("allreduce of 't1': its input 'w' was not ready"),
            std::string::npos)
      << statuses[1].toString();
  EXPECT_NE(statuses[2].message().find("allreduce of 't2'"), std::string::npos)
      << statuses[2].toString();
  EXPECT_NE(statuses[2].message().find("behind the input 'w' of allreduce of 't1'"),
            std::string::npos)
      << statuses[2].toString();
  EXPECT_EQ(asked.load(), 2);  // once per timeout, till one was stuck; never for the rest
}

TEST(Finalizer, AFinishedItemNeverAsksForItsInputs) {
  Finalizer f(10.0);
  Fault fault = Fault::kDevice;
  bool asked = false;
  f.add(
      "x", [](Status*) { return State::kDone; },
      [&] {
        asked = true;
        return std::string("w");
      },
      [&](const Status& s, Fault got) {
        EXPECT_TRUE(s.isOk());
        fault = got;
      });
  f.drain();
  EXPECT_EQ(fault, Fault::kNone);
  EXPECT_FALSE(asked);
}

TEST(Finalizer, DestructionEndsEveryItem) {
  std::atomic<int> ended{0};
  {
    Finalizer f(10.0);
    for (int i = 0; i < 5; ++i) {
      f.add(
          "x", [](Status*) { return State::kDone; }, nullptr,
          [&](const Status&, Fault) { ++ended; });
    }
  }
  EXPECT_EQ(ended.load(), 5);
}

Response denseResponse(std::vector<TensorShape> shapes) {
  Response r;
  r.type = ResponseType::kAllreduce;
  r.dtype = DataType::kFloat32;
  for (size_t i = 0; i < shapes.size(); ++i) r.tensorNames.push_back("t" + std::to_string(i));
  r.shapes = std::move(shapes);
  r.devices = {Device::cuda(0), Device::cpu()};
  return r;
}

TEST(DenseFusionPlan, TensorsBackToBackAndJoinedOnesZeroFilled) {
  const Response r = denseResponse({{2, 3}, {0}, {5}});
  std::vector<float> a(6), c(5);
  TensorEntry ea, ec;
  ea.input.data = a.data();
  ea.output.data = a.data();
  ec.input.data = c.data();
  ec.output.data = c.data();
  std::vector<TensorEntry*> entries = {&ea, nullptr, &ec};
  const DenseFusionPlan p = planDenseFusion(r, entries);
  EXPECT_EQ(p.offset, (std::vector<size_t>{0, 24, 24}));
  EXPECT_EQ(p.totalBytes, 44u);
  EXPECT_EQ(p.count, 11u);
  EXPECT_FALSE(p.inPlace);
  std::vector<std::byte> fusion(p.totalBytes);
  const DenseFusionCopies c2 = fusionCopies(p, entries, fusion.data());
  ASSERT_EQ(c2.in.size(), 2u);
  EXPECT_EQ(c2.in[1].src, c.data());
  EXPECT_EQ(c2.in[1].dst, fusion.data() + 24);
  EXPECT_EQ(c2.in[1].bytes, 20u);
  ASSERT_EQ(c2.out.size(), 2u);
  EXPECT_EQ(c2.out[0].dst, a.data());
  ASSERT_EQ(c2.zeros.size(), 1u);
  EXPECT_EQ(c2.zeros[0].src, nullptr);
  EXPECT_EQ(c2.zeros[0].bytes, 0u);

  EXPECT_TRUE(planDenseFusion(denseResponse({{4}}), {&ea}).inPlace);
  EXPECT_FALSE(planDenseFusion(denseResponse({{4}}), {nullptr}).inPlace);
}

TEST(BatchCopies, SkipsEmptyCopiesAndSplitsLaunches) {
  std::vector<CopyJob> jobs;
  for (size_t i = 0; i < 7; ++i) jobs.push_back(CopyJob{nullptr, nullptr, i % 3});
  const auto launches = batchCopies(jobs, 2);  // 4 non-empty: 1, 2, 1, 2 bytes
  ASSERT_EQ(launches.size(), 2u);
  EXPECT_EQ(launches[0].size(), 2u);
  EXPECT_EQ(launches[1].size(), 2u);
  EXPECT_EQ(launches[1][1].bytes, 2u);
  EXPECT_TRUE(batchCopies({}, 2).empty());
  EXPECT_EQ(batchCopies(std::vector<CopyJob>(300, CopyJob{nullptr, nullptr, 4})).size(), 3u);
}

TEST(SparseOutput, ModeFromTheEntriesOutputs) {
  int out = 0;
  TensorEntry dense, sparse;
  dense.output.data = &out;
  EXPECT_EQ(sparseOutputOf({&dense}), SparseOutput::kDenseInPlace);
  EXPECT_EQ(sparseOutputOf({&dense, &dense}), SparseOutput::kDenseFused);
  EXPECT_EQ(sparseOutputOf({&dense, nullptr}), SparseOutput::kDenseFused);
  EXPECT_EQ(sparseOutputOf({&sparse, nullptr}), SparseOutput::kSparse);
  EXPECT_EQ(sparseOutputOf({&sparse, &dense}), SparseOutput::kMixed);
  EXPECT_EQ(sparseOutputOf({nullptr, nullptr}), SparseOutput::kNone);
}

TEST(SparseFusionPlan, PresentTensorsEntriesBackToBack) {
  Response r;
  r.tensorNames = {"a", "b", "c"};
  TensorEntry a, c;
  a.sparseInput.nnz = 4;
  c.sparseInput.nnz = 3;
  const SparseFusionPlan p = planSparseFusion(r, {&a, nullptr, &c});
  EXPECT_EQ(p.firstEntry, (std::vector<int64_t>{0, 4, 4}));
  EXPECT_EQ(p.nnz, 7);
}

// Fake events: distinct heap ints; the pool must destroy every one it created, once.
struct FakeEvents {
  std::mutex mu;
  std::set<int*> live;
  int made = 0;
  bool failNext = false;
  EventPool::Create create() {
    return [this]() -> Result<void*> {
      std::lock_guard<std::mutex> lock(mu);
      if (failNext) {
        failNext = false;
        return ZEN_ERROR(StatusCode::kInternal, "no more events");
      }
      int* e = new int(made++);
      live.insert(e);
      return static_cast<void*>(e);
    };
  }
  EventPool::Destroy destroy() {
    return [this](void* e) {
      std::lock_guard<std::mutex> lock(mu);
      ASSERT_EQ(live.erase(static_cast<int*>(e)), 1u) << "destroyed twice or never made";
      delete static_cast<int*>(e);
    };
  }
};

TEST(EventPool, ReusesFiredEventsAndDestroysFailedOnes) {
  FakeEvents fake;
  {
    EventPool pool(fake.create(), fake.destroy(), 2);
    Result<void*> a = pool.acquire();
    ASSERT_TRUE(a.isOk());
    pool.release(a.value(), true);  // fired: reused
    EXPECT_EQ(pool.idle(), 1u);
    Result<void*> b = pool.acquire();
    ASSERT_TRUE(b.isOk());
    EXPECT_EQ(b.value(), a.value());
    EXPECT_EQ(pool.created(), 1u);
    pool.release(b.value(), false);  // timed out or failed: destroyed, never handed out again
    EXPECT_EQ(pool.idle(), 0u);
    EXPECT_EQ(fake.live.size(), 0u);
    Result<void*> c = pool.acquire();
    ASSERT_TRUE(c.isOk());
    EXPECT_EQ(pool.created(), 2u);
    // At most maxIdle idle: the third released one is destroyed.
    Result<void*> d = pool.acquire();
    Result<void*> e = pool.acquire();
    pool.release(c.value(), true);
    pool.release(d.value(), true);
    pool.release(e.value(), true);
    EXPECT_EQ(pool.idle(), 2u);
    EXPECT_EQ(fake.live.size(), 2u);
    // A failed creation is the caller's error; the pool goes on.
    pool.acquire();
    pool.acquire();  // both idle ones taken (leaked to the test: released below)
    fake.failNext = true;
    Result<void*> f = pool.acquire();
    EXPECT_FALSE(f.isOk());
    EXPECT_EQ(f.status().code(), StatusCode::kInternal);
    EXPECT_EQ(pool.created(), 4u);
    pool.release(nullptr, true);  // ignored
    std::vector<int*> held(fake.live.begin(), fake.live.end());
    for (int* h : held) pool.release(h, true);
  }
  EXPECT_TRUE(fake.live.empty());  // the destructor destroyed the idle ones
}

TEST(EventPool, AcquireOnOneThreadReleaseOnAnother) {
  FakeEvents fake;
  {
    EventPool pool(fake.create(), fake.destroy(), 8);
    std::mutex mu;
    std::vector<void*> handed;
    std::atomic<bool> stop{false};
    std::thread finalizer([&] {
      for (;;) {
        void* e = nullptr;
        {
          std::lock_guard<std::mutex> lock(mu);
          if (!handed.empty()) {
            e = handed.back();
            handed.pop_back();
          }
        }
        if (e != nullptr) {
          pool.release(e, true);
        } else if (stop) {
          return;
        } else {
          std::this_thread::yield();
        }
      }
    });
    for (int i = 0; i < 2000; ++i) {
      Result<void*> e = pool.acquire();
      ASSERT_TRUE(e.isOk());
      std::lock_guard<std::mutex> lock(mu);
      handed.push_back(e.value());
    }
    stop = true;
    finalizer.join();
    EXPECT_LE(pool.created(), 2000u);
    EXPECT_EQ(fake.live.size(), pool.idle());
  }
  EXPECT_TRUE(fake.live.empty());
}

// An allgather response of `rows[i][p]` rows of tensor i on rank p, trailing dims `trailing[i]`.
Response gatherResponse(const std::vector<std::vector<int64_t>>& rows,
                        const std::vector<std::vector<int64_t>>& trailing,
                        DataType dtype) {
  Response r;
  r.type = ResponseType::kAllgather;
  r.dtype = dtype;
  const size_t n = rows.front().size();
  for (size_t i = 0; i < rows.size(); ++i) {
    r.tensorNames.push_back("g" + std::to_string(i));
    std::vector<int64_t> dims = {std::accumulate(rows[i].begin(), rows[i].end(), int64_t{0})};
    dims.insert(dims.end(), trailing[i].begin(), trailing[i].end());
    r.shapes.emplace_back(dims);
    for (size_t p = 0; p < n; ++p) r.gatherRows.push_back(rows[i][p]);
  }
  r.devices.assign(n, Device::cuda(0));
  return r;
}

// Every rank runs the executor's steps on host memory (the allgatherv is a copy of each
// rank's own segment into every rank's buffer); each rank's results must be the CPU
// executor's: tensor i = every rank's rows of tensor i in rank order.
TEST(GatherPlan, EveryRanksRowsInRankOrderLikeTheCpuExecutor) {
  std::mt19937_64 rng(std::random_device{}());
  for (int trial = 0; trial < 50; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 5);
    const size_t tensors = 1 + rng() % 4;
    const DataType dtype = trial % 2 ? DataType::kFloat16 : DataType::kFloat64;
    const size_t elementSize = dataTypeSize(dtype);
    std::vector<std::vector<int64_t>> rows(tensors), trailing(tensors);
    for (size_t i = 0; i < tensors; ++i) {
      for (int p = 0; p < n; ++p) rows[i].push_back(static_cast<int64_t>(rng() % 4));  // 0 too
      if (rng() % 3 != 0) trailing[i].push_back(1 + static_cast<int64_t>(rng() % 3));
      if (rng() % 4 == 0) trailing[i].push_back(2);
    }
    const int joined = rng() % 3 == 0 ? static_cast<int>(rng() % n) : -1;
    if (joined >= 0) {
      for (size_t i = 0; i < tensors; ++i) rows[i][joined] = 0;
    }
    const Response r = gatherResponse(rows, trailing, dtype);
    Result<GatherPlan> planned = planGather(r, n);
    ASSERT_TRUE(planned.isOk()) << planned.status().toString();
    const GatherPlan& plan = planned.value();

    // Inputs: rank p's tensor i, random bytes.
    std::vector<std::vector<std::vector<uint8_t>>> input(static_cast<size_t>(n));
    for (int p = 0; p < n; ++p) {
      for (size_t i = 0; i < tensors; ++i) {
        std::vector<uint8_t> bytes(static_cast<size_t>(rows[i][p]) * plan.rowBytes[i]);
        for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
        input[p].push_back(std::move(bytes));
      }
    }
    // Each rank's fusion step, poisoned buffers.
    std::vector<std::vector<uint8_t>> recv(static_cast<size_t>(n),
                                           std::vector<uint8_t>(plan.segmentOffset.back(), 0xa5));
    for (int p = 0; p < n; ++p) {
      std::vector<TensorEntry> store(tensors);
      std::vector<TensorEntry*> entries;
      for (size_t i = 0; i < tensors; ++i) {
        store[i].input.data = input[p][i].data();
        entries.push_back(p == joined ? nullptr : &store[i]);
      }
      for (const CopyJob& j : gatherInCopies(plan, r, entries, p, recv[p].data())) {
        ASSERT_GE(static_cast<const uint8_t*>(j.dst), recv[p].data() + plan.segmentOffset[p]);
        ASSERT_LE(static_cast<const uint8_t*>(j.dst) + j.bytes,
                  recv[p].data() + plan.segmentOffset[p + 1]);
        std::memcpy(j.dst, j.src, j.bytes);
      }
    }
    // The allgatherv: rank p's segment to everyone.
    for (int p = 0; p < n; ++p) {
      const size_t off = plan.segmentOffset[p];
      const size_t len = plan.segmentOffset[p + 1] - off;
      for (int q = 0; q < n; ++q) {
        if (q != p && len > 0) std::memcpy(recv[q].data() + off, recv[p].data() + off, len);
      }
    }
    for (int q = 0; q < n; ++q) {
      std::vector<std::vector<uint8_t>> out(tensors);
      std::vector<void*> outputs;
      for (size_t i = 0; i < tensors; ++i) {
        EXPECT_EQ(plan.outputBytes[i],
                  static_cast<size_t>(r.shapes[i].numElements()) * elementSize);
        out[i].assign(plan.outputBytes[i], 0x5a);
        // A rank that does not want tensor 0 (joined) gets no copies for it.
        outputs.push_back(q == joined && i == 0 ? nullptr : out[i].data());
      }
      for (const CopyJob& j : gatherOutCopies(plan, r, recv[q].data(), outputs)) {
        ASSERT_NE(j.dst, nullptr);
        std::memcpy(j.dst, j.src, j.bytes);
      }
      for (size_t i = 0; i < tensors; ++i) {
        if (outputs[i] == nullptr) {
          EXPECT_TRUE(
              std::all_of(out[i].begin(), out[i].end(), [](uint8_t b) { return b == 0x5a; }));
          continue;
        }
        std::vector<uint8_t> expected;
        for (int p = 0; p < n; ++p)
          expected.insert(expected.end(), input[p][i].begin(), input[p][i].end());
        EXPECT_EQ(out[i], expected) << "trial " << trial << " rank " << q << " tensor " << i;
      }
    }
  }
}

TEST(GatherPlan, RefusesAPlanThatDoesNotAddUp) {
  Response r = gatherResponse({{1, 2}}, {{3}}, DataType::kFloat32);
  EXPECT_EQ(planGather(r, 3).status().code(), StatusCode::kInvalidArgument);  // 2 counts, 3 ranks
  r.shapes[0] = TensorShape({4, 3});
  EXPECT_EQ(planGather(r, 2).status().code(), StatusCode::kInvalidArgument);  // 1 + 2 != 4
  r.shapes[0] = TensorShape({3, 3});
  r.gatherRows = {-1, 4};
  EXPECT_EQ(planGather(r, 2).status().code(), StatusCode::kInvalidArgument);
  r.gatherRows = {1, 2};
  Result<GatherPlan> ok = planGather(r, 2);
  ASSERT_TRUE(ok.isOk());
  EXPECT_EQ(ok.value().segmentOffset, (std::vector<size_t>{0, 12, 36}));
  EXPECT_EQ(ok.value().rowBytes, (std::vector<size_t>{12}));
}

// Records which executor got what.
class Recorder final : public Executor {
 public:
  explicit Recorder(bool device) : device_(device) {}
  Status execute(const Response&, const std::vector<TensorEntry*>&, BucketReport* r) override {
    ++executed;
    r->scheme = device_ ? "device" : "host";
    return Status::ok();
  }
  Status accept(TensorEntry&) override {
    ++accepted;
    return device_ ? Status::ok() : Status(StatusCode::kInvalidArgument, "host only");
  }
  void drain() override { ++drained; }
  Status addProcessSet(int32_t, const std::vector<int32_t>&) override {
    ++setsAdded;
    return Status::ok();
  }
  void removeProcessSet(int32_t) override { ++setsRemoved; }
  int executed = 0;
  int setsRemoved = 0;
  int accepted = 0;
  int drained = 0;
  int setsAdded = 0;

 private:
  bool device_;
};

// Staging that was never needed: the dispatch tests' buckets have no entries of this rank.
class FakeStaging final : public DeviceStaging {
 public:
  Status prepare(int, const std::vector<TensorEntry*>&) override {
    ++prepared;
    return Status::ok();
  }
  Result<std::byte*> hostMemory(size_t) override { return region; }
  Status toHost(const std::vector<StagedCopy>&) override { return Status::ok(); }
  Status toDevice(const std::vector<StagedCopy>&) override { return Status::ok(); }
  Status allocate(size_t, std::shared_ptr<void>* out) override {
    out->reset();
    return Status::ok();
  }
  int prepared = 0;
  std::byte region[64] = {};
};

TEST(DispatchExecutor, ByThePlansDeviceForThisRankAndByTheEntryAtEnqueue) {
  auto host = std::make_unique<Recorder>(false);
  auto device = std::make_unique<Recorder>(true);
  Recorder* h = host.get();
  Recorder* d = device.get();
  FakeStaging staging;
  DispatchExecutor dispatch(0, std::move(host), std::move(device), &staging);
  Response r = denseResponse({{1}});
  BucketReport report;
  // Rank 0 is on cuda:0 even though it posted nothing here (joined): the device executor.
  ASSERT_TRUE(dispatch.execute(r, {nullptr}, &report).isOk());
  r.devices = {Device::cpu(), Device::cuda(0)};
  ASSERT_TRUE(dispatch.execute(r, {nullptr}, &report).isOk());
  bool ended = false;
  dispatch.submit(r, {nullptr}, [&](const Status& s, BucketReport) { ended = s.isOk(); });
  EXPECT_TRUE(ended);
  EXPECT_EQ(d->executed, 1);
  EXPECT_EQ(h->executed, 2);

  TensorEntry gpu;
  gpu.request.op = OpType::kAllreduce;
  gpu.input.device = Device::cuda(1);
  EXPECT_TRUE(dispatch.accept(gpu).isOk());
  TensorEntry sparseGpu;
  sparseGpu.request.op = OpType::kSparseAllreduce;
  sparseGpu.sparseInput.device = Device::cuda(0);
  EXPECT_TRUE(dispatch.accept(sparseGpu).isOk());
  TensorEntry cpu;
  cpu.request.op = OpType::kAllreduce;
  EXPECT_FALSE(dispatch.accept(cpu).isOk());
  EXPECT_EQ(d->accepted, 2);
  EXPECT_EQ(h->accepted, 1);
  dispatch.drain();
  EXPECT_EQ(d->drained, 1);
  EXPECT_EQ(h->drained, 1);

  // Process sets run in the host executor: registered there; a set's plan on GPUs is staged
  // through the host (the device is this rank's within the set: set rank 1 here).
  ASSERT_TRUE(dispatch.addProcessSet(1, {2, 0}).isOk());
  EXPECT_EQ(h->setsAdded, 1);
  EXPECT_EQ(d->setsAdded, 0);
  r.devices = {Device::cpu(), Device::cuda(0)};
  r.processSet = 1;
  report = BucketReport{};
  ASSERT_TRUE(dispatch.execute(r, {nullptr}, &report).isOk());
  EXPECT_EQ(h->executed, 3);
  EXPECT_EQ(report.scheme, "host-staged host");
  r.devices = {Device::cuda(0), Device::cpu()};  // this rank's part on the host: not staged
  report = BucketReport{};
  ASSERT_TRUE(dispatch.execute(r, {nullptr}, &report).isOk());
  EXPECT_EQ(h->executed, 4);
  EXPECT_EQ(report.scheme, "host");
  // Adasum on GPUs, the job's set: staged, submitted or not.
  r.processSet = kGlobalProcessSet;
  r.devices = {Device::cuda(0), Device::cuda(0)};
  r.reduceOp = ReduceOp::kAdasum;
  ended = false;
  dispatch.submit(r, {nullptr}, [&](const Status& s, BucketReport b) {
    ended = s.isOk() && b.scheme == "host-staged host";
  });
  EXPECT_TRUE(ended);
  EXPECT_EQ(h->executed, 5);
  EXPECT_EQ(d->executed, 1);
  // A set this rank never registered: the host executor says so.
  r.processSet = 7;
  ASSERT_TRUE(dispatch.execute(r, {nullptr}, &report).isOk());
  EXPECT_EQ(h->executed, 6);
  // Joined everywhere: nothing of this rank to stage, so the device was never prepared.
  EXPECT_EQ(staging.prepared, 0);
  dispatch.removeProcessSet(1);
  EXPECT_EQ(h->setsRemoved, 1);
}

TEST(DefaultAccept, HostExecutorsRefuseDeviceTensorsSayingWhy) {
  class HostOnly final : public Executor {
   public:
    Status execute(const Response&, const std::vector<TensorEntry*>&, BucketReport*) override {
      return Status::ok();
    }
  } host;
  TensorEntry e;
  e.request.name = "emb";
  e.request.op = OpType::kSparseAllreduce;
  e.sparseInput.device = Device::cuda(0);
  const Status s = host.accept(e);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("'emb' is on cuda:0"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("built without CUDA"), std::string::npos) << s.message();
  e.sparseInput.device = Device::cpu();
  EXPECT_TRUE(host.accept(e).isOk());
}

}  // namespace
}  // namespace zen::cuda
