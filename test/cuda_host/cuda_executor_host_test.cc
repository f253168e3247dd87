// The CUDA executor's host-side decisions on the CPU: the finalizer thread's ordering,
// errors and timeouts (fake events), the dense fusion layout and its batched copies, the
// sparse bucket's output mode and index shifts, and the dispatch between host and device
// executors (from the plan, the same on every rank).
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <vector>

#include "cuda/device_bucket.h"
#include "cuda/dispatch_executor.h"
#include "cuda/finalizer.h"

namespace zen::cuda {
namespace {

using State = Finalizer::State;

TEST(Finalizer, CompletesInOrderOnceEachEventIsDone) {
  Finalizer f(10.0);
  std::atomic<bool> firstDone{false};
  std::atomic<bool> secondDone{false};
  std::mutex mu;
  std::vector<int> order;
  std::thread::id caller = std::this_thread::get_id();
  std::thread::id ranOn;
  f.add(
      "first", [&](Status*) { return firstDone ? State::kDone : State::kPending; },
      [&](const Status& s) {
        EXPECT_TRUE(s.isOk());
        std::lock_guard<std::mutex> lock(mu);
        order.push_back(1);
        ranOn = std::this_thread::get_id();
      });
  // The second event is done at once, but the stream ends work in order: it waits behind.
  f.add(
      "second", [&](Status*) { return State::kDone; },
      [&](const Status& s) {
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
      [&](const Status& s) { first = s; });
  f.add(
      "good", [](Status*) { return State::kDone; }, [&](const Status& s) { second = s; });
  f.drain();
  EXPECT_EQ(first.code(), StatusCode::kAborted);
  EXPECT_EQ(first.message(), "an illegal address");
  EXPECT_TRUE(second.isOk());
}

TEST(Finalizer, TimesOutAHungEvent) {
  Finalizer f(0.05);
  Status s;
  f.add(
      "allreduce of 'x'", [](Status*) { return State::kPending; },
      [&](const Status& st) { s = st; });
  f.drain();
  EXPECT_EQ(s.code(), StatusCode::kTimeout);
  EXPECT_NE(s.message().find("allreduce of 'x'"), std::string::npos) << s.message();
}

TEST(Finalizer, DestructionEndsEveryItem) {
  std::atomic<int> ended{0};
  {
    Finalizer f(10.0);
    for (int i = 0; i < 5; ++i) {
      f.add(
          "x", [](Status*) { return State::kDone; }, [&](const Status&) { ++ended; });
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
  EXPECT_EQ(sparseOutputOf({&sparse, nullptr}), SparseOutput::kSparseToHost);
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

// Records which executor got what.
class Recorder final : public Executor {
 public:
  explicit Recorder(bool device) : device_(device) {}
  Status execute(const Response&, const std::vector<TensorEntry*>&, BucketReport*) override {
    ++executed;
    return Status::ok();
  }
  Status accept(TensorEntry&) override {
    ++accepted;
    return device_ ? Status::ok() : Status(StatusCode::kInvalidArgument, "host only");
  }
  void drain() override { ++drained; }
  int executed = 0;
  int accepted = 0;
  int drained = 0;

 private:
  bool device_;
};

TEST(DispatchExecutor, ByThePlansDeviceForThisRankAndByTheEntryAtEnqueue) {
  auto host = std::make_unique<Recorder>(false);
  auto device = std::make_unique<Recorder>(true);
  Recorder* h = host.get();
  Recorder* d = device.get();
  DispatchExecutor dispatch(0, std::move(host), std::move(device));
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
