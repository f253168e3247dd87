// GPU test (device only, run by tools/gpu-check): server-side aggregation and Algorithm 2
// on the GPU against the CPU (same IndexMap, fresh random integer-valued inputs every run).
// Encoded parts (bitmap bytes, count, value bytes) and decoded outputs (dense bytes, sparse
// indices and rows) must be bit-identical to the CPU's, for Sum and Average in every dtype;
// the whole GPU pipeline (partition, scatter-add, encode, decode) must equal the CPU pipeline
// and the dense reference sum; corrupt push lists and bad payloads are refused and write
// nothing.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "core/aggregator.h"
#include "core/hash_bitmap.h"
#include "core/hash_partitioner.h"
#include "cuda/gpu_aggregator.h"
#include "cuda/gpu_hash_bitmap.h"
#include "cuda/gpu_hash_partitioner.h"
#include "test/common/sparse_inputs.h"
#include "test/core/reference.h"
#include "test/gpu/gpu_test_util.h"

namespace zen::cuda {
namespace {

using testing::download;
using testing::testSeed;
using testing::upload;
using testing::uploadBytes;

constexpr unsigned char kDensePattern = 0x5a;  // rows the decoders must leave alone
constexpr double kWaitSeconds = 30.0;          // bound on GpuAggregator::check's wait

// Every rank's tensor (half of each rank's indices from a shared pool: overlap) and its
// Push lists from the CPU partitioner.
struct Ranks {
  std::vector<SparseTensor> tensors;
  std::vector<PushLists> lists;
};

Ranks makeRanks(std::mt19937_64& rng,
                const IndexMap& map,
                int ranks,
                int64_t nnzPerRank,
                int64_t rowSize,
                DataType dtype) {
  const auto rows = static_cast<int64_t>(map.numRows());
  const auto shared = zen::testing::distinctIndices(rows, std::min(rows, nnzPerRank),
                                                    zen::testing::Skew::kZipf, rng);
  Ranks out;
  HashPartitioner partitioner(map, {}, nullptr);
  for (int r = 0; r < ranks; ++r) {
    std::vector<int64_t> idx(shared.begin(), shared.begin() + shared.size() / 2);
    const auto own = zen::testing::distinctIndices(rows, std::min(rows, nnzPerRank / 2),
                                                   zen::testing::Skew::kUniform, rng);
    idx.insert(idx.end(), own.begin(), own.end());
    out.tensors.push_back(zen::testing::makeSparse(idx, rows, rowSize, dtype, rng));
    PushLists lists;
    const Status s = partitioner.partition(out.tensors.back().view(), &lists);
    EXPECT_TRUE(s.isOk()) << s.toString();
    out.lists.push_back(std::move(lists));
  }
  return out;
}

// Part j of every rank's lists, uploaded (kept alive by `keep` until the caller syncs).
void addPartOnGpu(GpuAggregator* agg,
                  const Ranks& ranks,
                  int part,
                  std::vector<DeviceBuffer>* keep) {
  for (const PushLists& l : ranks.lists) {
    const int64_t begin = l.offsets[part];
    const int64_t count = l.count(part);
    // Both added before either is referenced: a later emplace_back may reallocate `keep`.
    keep->emplace_back();
    keep->emplace_back();
    DeviceBuffer& pos = (*keep)[keep->size() - 2];
    DeviceBuffer& val = keep->back();
    ASSERT_OK(uploadBytes(l.positions.data() + begin, count * sizeof(uint32_t), &pos));
    ASSERT_OK(uploadBytes(l.row(begin), count * l.rowBytes(), &val));
    ASSERT_OK(agg->add(pos.as<uint32_t>(), val.data(), count, nullptr));
  }
}

Status cpuEncodePart(
    const IndexMap& map, const Ranks& ranks, int part, double scale, EncodedPart* out) {
  PartitionAggregator agg;
  const PushLists& first = ranks.lists[0];
  ZEN_RETURN_IF_ERROR(agg.reset(map, part, first.dtype, first.rowSize));
  for (const PushLists& l : ranks.lists) {
    ZEN_RETURN_IF_ERROR(
        agg.add(l.positions.data() + l.offsets[part], l.row(l.offsets[part]), l.count(part)));
  }
  return encode(agg, scale, out);
}

void expectSameEncoding(const EncodedPart& got, const EncodedPart& want, int part) {
  EXPECT_EQ(got.count, want.count) << "part " << part;
  EXPECT_EQ(testing::firstMismatch(got.bitmap, want.bitmap), "") << "bitmap of part " << part;
  EXPECT_EQ(testing::firstMismatch(got.values, want.values), "") << "values of part " << part;
}

TEST(HashBitmapGpu, EncodeMatchesTheCpuForSumAndAverage) {
  std::mt19937_64 rng(testSeed());
  for (DataType dtype : reference::kAllTypes) {
    for (int64_t rowSize : {int64_t{1}, int64_t{7}}) {
      SCOPED_TRACE(::testing::Message() << dataTypeName(dtype) << " rowSize " << rowSize);
      const int n = 5;
      const IndexMap map(300'007, n, rng());
      const Ranks ranks = makeRanks(rng, map, n, 40'000, rowSize, dtype);
      GpuAggregator agg;
      Workspace ws;
      for (double scale : {1.0, 1.0 / n}) {
        for (int j = 0; j < n; ++j) {
          std::vector<DeviceBuffer> keep;
          ASSERT_OK(agg.reset(map, j, dtype, rowSize, nullptr));
          ASSERT_NO_FATAL_FAILURE(addPartOnGpu(&agg, ranks, j, &keep));
          GpuEncodedPart encoded;
          ASSERT_OK(gpuEncode(agg, scale, &encoded, &ws, nullptr));
          ASSERT_CUDA(cudaDeviceSynchronize());
          EncodedPart got;
          EncodedPart want;
          ASSERT_OK(encoded.toHost(&got));
          ASSERT_OK(cpuEncodePart(map, ranks, j, scale, &want));
          expectSameEncoding(got, want, j);
        }
      }
    }
  }
}

TEST(HashBitmapGpu, UncoalescedListsAreSummedByAtomics) {
  // Lists with repeated positions inside one add() (no partitioner in between): the atomics
  // race, but sums of small integers are exact in any order.
  std::mt19937_64 rng(testSeed());
  const int n = 3;
  const IndexMap map(50'000, n, rng());
  for (DataType dtype : reference::kAllTypes) {
    SCOPED_TRACE(dataTypeName(dtype));
    std::vector<int64_t> idx(60'000);
    for (auto& i : idx) i = zen::testing::zipfDraw(50'000, 1.3, rng);
    const SparseTensor t = zen::testing::makeSparse(idx, 50'000, 2, dtype, rng);
    // Bucket by owner, keeping every repeat.
    std::vector<std::vector<uint32_t>> pos(n);
    std::vector<std::vector<std::byte>> val(n);
    for (int64_t k = 0; k < t.nnz(); ++k) {
      const auto place = map.place(static_cast<uint64_t>(t.indices[k]));
      pos[place.owner].push_back(static_cast<uint32_t>(place.pos));
      const std::byte* row = t.values.data() + k * t.rowBytes();
      val[place.owner].insert(val[place.owner].end(), row, row + t.rowBytes());
    }
    GpuAggregator agg;
    Workspace ws;
    for (int j = 0; j < n; ++j) {
      PartitionAggregator cpu;
      ASSERT_OK(cpu.reset(map, j, dtype, 2));
      ASSERT_OK(cpu.add(pos[j].data(), val[j].data(), static_cast<int64_t>(pos[j].size())));
      EncodedPart want;
      ASSERT_OK(encode(cpu, 1.0, &want));
      DeviceBuffer dPos, dVal;
      ASSERT_OK(upload(pos[j], &dPos));
      ASSERT_OK(upload(val[j], &dVal));
      ASSERT_OK(agg.reset(map, j, dtype, 2, nullptr));
      ASSERT_OK(
          agg.add(dPos.as<uint32_t>(), dVal.data(), static_cast<int64_t>(pos[j].size()), nullptr));
      GpuEncodedPart encoded;
      ASSERT_OK(gpuEncode(agg, 1.0, &encoded, &ws, nullptr));
      ASSERT_CUDA(cudaDeviceSynchronize());
      EncodedPart got;
      ASSERT_OK(encoded.toHost(&got));
      expectSameEncoding(got, want, j);
    }
  }
}

TEST(HashBitmapGpu, DecodersMatchTheCpu) {
  std::mt19937_64 rng(testSeed());
  for (DataType dtype : reference::kAllTypes) {
    for (int64_t rowSize : {int64_t{1}, int64_t{3}, int64_t{16}}) {
      SCOPED_TRACE(::testing::Message() << dataTypeName(dtype) << " rowSize " << rowSize);
      const int n = 4;
      const int64_t rows = 123'457;  // the tail part's size is not a multiple of 8
      const IndexMap map(rows, n, rng());
      const Ranks ranks = makeRanks(rng, map, n, 20'000, rowSize, dtype);
      const size_t rowBytes = static_cast<size_t>(rowSize) * dataTypeSize(dtype);
      std::vector<std::byte> wantDense(rows * rowBytes, std::byte{kDensePattern});
      DenseView wantView{wantDense.data(), dtype, TensorShape({rows, rowSize}), Device::cpu()};
      DeviceBuffer dense;
      ASSERT_OK(upload(wantDense, &dense));  // same pattern on the device
      DenseView gotView{dense.data(), dtype, TensorShape({rows, rowSize}), Device::cuda(0)};
      SparseTensor wantSparse;
      std::vector<EncodedPart> parts(n);
      int64_t total = 0;
      for (int j = 0; j < n; ++j) {
        ASSERT_OK(cpuEncodePart(map, ranks, j, 1.0, &parts[j]));
        total += parts[j].count;
      }
      DeviceBuffer indices, values;
      ASSERT_OK(indices.reserve(total * sizeof(int64_t) + 8));
      ASSERT_OK(values.reserve(total * rowBytes + 8));
      ASSERT_CUDA(cudaMemset(indices.data(), 0xff, indices.capacity()));
      ASSERT_CUDA(cudaMemset(values.data(), testing::kPoisonValueByte, values.capacity()));
      Workspace ws;
      int64_t at = 0;
      for (int j = 0; j < n; ++j) {
        const EncodedPart& e = parts[j];
        // The bitmap one byte into its buffer: unaligned words must be read byte by byte.
        std::vector<uint8_t> shifted(e.bitmap.size() + 1);
        std::memcpy(shifted.data() + 1, e.bitmap.data(), e.bitmap.size());
        DeviceBuffer dBitmap, dValues;
        ASSERT_OK(upload(shifted, &dBitmap));
        ASSERT_OK(upload(e.values, &dValues));
        const auto* bitmap = dBitmap.as<const uint8_t>() + 1;
        ASSERT_OK(decodeToDense(map, j, e.bitmap.data(), e.bitmap.size(), e.values.data(),
                                e.values.size(), dtype, rowSize, wantView));
        ASSERT_OK(gpuDecodeToDense(map, j, bitmap, e.bitmap.size(), dValues.data(), e.values.size(),
                                   dtype, rowSize, gotView, &ws, nullptr));
        ASSERT_OK(decodeToSparse(map, j, e.bitmap.data(), e.bitmap.size(), e.values.data(),
                                 e.values.size(), dtype, rowSize, &wantSparse));
        ASSERT_OK(gpuDecodeToSparse(map, j, bitmap, e.bitmap.size(), dValues.data(),
                                    e.values.size(), dtype, rowSize, indices.as<int64_t>() + at,
                                    values.as<std::byte>() + at * rowBytes, &ws, nullptr));
        at += e.count;
      }
      ASSERT_CUDA(cudaDeviceSynchronize());
      ASSERT_EQ(wantSparse.nnz(), total);
      EXPECT_EQ(
          testing::firstMismatch(download<std::byte>(dense.data(), wantDense.size()), wantDense),
          "")
          << "dense decode differs";
      EXPECT_EQ(
          testing::firstMismatch(download<int64_t>(indices.data(), total), wantSparse.indices), "")
          << "sparse indices differ";
      EXPECT_EQ(testing::firstMismatch(download<std::byte>(values.data(), total * rowBytes),
                                       wantSparse.values),
                "")
          << "sparse rows differ";
    }
  }
}

TEST(HashBitmapGpu, WholeGpuPipelineEqualsTheCpuPipelineAndTheDenseSum) {
  std::mt19937_64 rng(testSeed());
  for (DataType dtype : {DataType::kFloat32, DataType::kBFloat16, DataType::kInt64}) {
    for (int64_t rowSize : {int64_t{1}, int64_t{4}}) {
      for (bool average : {false, true}) {
        SCOPED_TRACE(::testing::Message() << dataTypeName(dtype) << " rowSize " << rowSize
                                          << (average ? " average" : " sum"));
        const int n = 6;
        const int64_t rows = 1'000'003;
        const IndexMap map(rows, n, rng());
        const Ranks ranks = makeRanks(rng, map, n, 50'000, rowSize, dtype);
        const double scale = average ? 1.0 / n : 1.0;
        const size_t rowBytes = static_cast<size_t>(rowSize) * dataTypeSize(dtype);

        // CPU pipeline: the lists in `ranks`, aggregation, encode, decode into zeros.
        std::vector<std::byte> want(rows * rowBytes, std::byte{0});
        DenseView wantView{want.data(), dtype, TensorShape({rows, rowSize}), Device::cpu()};
        for (int j = 0; j < n; ++j) {
          EncodedPart e;
          ASSERT_OK(cpuEncodePart(map, ranks, j, scale, &e));
          ASSERT_OK(decodeToDense(map, j, e.bitmap.data(), e.bitmap.size(), e.values.data(),
                                  e.values.size(), dtype, rowSize, wantView));
        }

        // GPU pipeline: every rank's tensor partitioned on the GPU, part j of every list
        // scatter-added on the GPU (the "exchange" is a pointer into each rank's lists),
        // encoded, decoded into a zeroed device tensor.
        std::vector<DeviceBuffer> keep;
        std::vector<GpuPushLists> gpuLists(n);
        GpuHashPartitioner partitioner(map, {});
        for (int r = 0; r < n; ++r) {
          const SparseTensor& t = ranks.tensors[r];
          keep.emplace_back();
          ASSERT_OK(upload(t.indices, &keep.back()));
          const auto* dIdx = keep.back().as<const int64_t>();
          keep.emplace_back();
          ASSERT_OK(upload(t.values, &keep.back()));
          SparseView v = t.view();
          v.indices = dIdx;
          v.values = keep.back().data();
          v.device = Device::cuda(0);
          ASSERT_OK(partitioner.partition(v, &gpuLists[r], nullptr));
        }
        DeviceBuffer dense;
        ASSERT_OK(dense.reserve(rows * rowBytes));
        ASSERT_CUDA(cudaMemset(dense.data(), 0, rows * rowBytes));
        DenseView gotView{dense.data(), dtype, TensorShape({rows, rowSize}), Device::cuda(0)};
        GpuAggregator agg;
        Workspace ws;
        for (int j = 0; j < n; ++j) {
          ASSERT_OK(agg.reset(map, j, dtype, rowSize, nullptr));
          for (const GpuPushLists& l : gpuLists) {
            ASSERT_OK(agg.add(l.devicePositions() + l.offsets[j],
                              l.values.as<const std::byte>() + l.offsets[j] * rowBytes, l.count(j),
                              nullptr));
          }
          GpuEncodedPart e;
          ASSERT_OK(gpuEncode(agg, scale, &e, &ws, nullptr));
          ASSERT_OK(gpuDecodeToDense(map, j, e.bitmap.as<const uint8_t>(), e.bitmapBytes,
                                     e.values.data(), e.valueBytes(), dtype, rowSize, gotView, &ws,
                                     nullptr));
        }
        ASSERT_CUDA(cudaDeviceSynchronize());
        const auto got = download<std::byte>(dense.data(), want.size());
        EXPECT_EQ(testing::firstMismatch(got, want), "")
            << "GPU pipeline differs from the CPU pipeline";
        const reference::DenseSum ref = reference::denseSum(reference::views(ranks.tensors));
        if (!average || reference::isInteger(dtype)) {
          EXPECT_TRUE(reference::denseMatches(got.data(), ref, average ? n : 1, 0));
        } else {
          EXPECT_TRUE(
              reference::denseMatches(got.data(), ref, n, reference::averageTolerance(dtype)));
        }
      }
    }
  }
}

TEST(HashBitmapGpu, CorruptPushListIsRefusedAndWritesNothing) {
  std::mt19937_64 rng(testSeed());
  const IndexMap map(10'000, 2, rng());
  GpuAggregator agg;
  ASSERT_OK(agg.reset(map, 0, DataType::kFloat32, 1, nullptr));
  const uint32_t size = static_cast<uint32_t>(map.partSize(0));
  std::vector<uint32_t> good = {0, 5, size - 1};
  std::vector<float> ones = {1.0f, 2.0f, 3.0f};
  std::vector<uint32_t> bad = {1, size, 2};
  DeviceBuffer dGood, dBad, dVal;
  ASSERT_OK(upload(good, &dGood));
  ASSERT_OK(upload(bad, &dBad));
  ASSERT_OK(upload(ones, &dVal));
  ASSERT_OK(agg.add(dGood.as<uint32_t>(), dVal.data(), 3, nullptr));
  ASSERT_OK(agg.check(nullptr, kWaitSeconds));
  const auto before = download<float>(agg.accumulators(), size);
  const auto bitsBefore = download<uint32_t>(agg.occupancyWords(), agg.occupancyWordCount());
  ASSERT_OK(agg.add(dBad.as<uint32_t>(), dVal.data(), 3, nullptr));   // refused on the device
  ASSERT_OK(agg.add(dGood.as<uint32_t>(), dVal.data(), 3, nullptr));  // skipped after it
  const Status s = agg.check(nullptr, kWaitSeconds);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("entry 1 has local position " + std::to_string(size)),
            std::string::npos)
      << s.toString();
  EXPECT_TRUE(download<float>(agg.accumulators(), size) == before);
  EXPECT_TRUE(download<uint32_t>(agg.occupancyWords(), agg.occupancyWordCount()) == bitsBefore);
  Workspace ws;
  GpuEncodedPart e;
  EXPECT_EQ(gpuEncode(agg, 1.0, &e, &ws, nullptr).code(), StatusCode::kInvalidArgument);
}

TEST(HashBitmapGpu, DecodersRefuseBadPayloadsAndWriteNothing) {
  std::mt19937_64 rng(testSeed());
  const int64_t rows = 1003;  // part 1 owns 499 positions: 5 padding bits in its last byte
  const IndexMap map(rows, 2, rng());
  const uint32_t part = 1;
  const uint64_t size = map.partSize(1);
  ASSERT_NE(size % 8, 0u);
  std::vector<uint8_t> bitmap((size + 7) / 8, 0);
  bitmap[0] = 0x05;  // positions 0 and 2
  std::vector<float> values = {1.0f, 2.0f};
  std::vector<float> pattern(rows, 9.0f);
  DeviceBuffer dense, dValues, indices;
  ASSERT_OK(upload(pattern, &dense));
  ASSERT_OK(upload(values, &dValues));
  ASSERT_OK(indices.reserve(64));
  DenseView out{dense.data(), DataType::kFloat32, TensorShape({rows}), Device::cuda(0)};
  Workspace ws;
  auto decodeDense = [&](const std::vector<uint8_t>& b, size_t bitmapBytes, size_t valueBytes) {
    DeviceBuffer dBitmap;
    EXPECT_TRUE(upload(b, &dBitmap).isOk());
    return gpuDecodeToDense(map, part, dBitmap.as<uint8_t>(), bitmapBytes, dValues.data(),
                            valueBytes, DataType::kFloat32, 1, out, &ws, nullptr);
  };
  auto decodeSparse = [&](const std::vector<uint8_t>& b, size_t valueBytes) {
    DeviceBuffer dBitmap;
    EXPECT_TRUE(upload(b, &dBitmap).isOk());
    return gpuDecodeToSparse(map, part, dBitmap.as<uint8_t>(), b.size(), dValues.data(), valueBytes,
                             DataType::kFloat32, 1, indices.as<int64_t>(), dense.data(), &ws,
                             nullptr);
  };
  // Wrong length (host check), padding bit set, too few and too many value bytes.
  EXPECT_EQ(decodeDense(bitmap, bitmap.size() - 1, 8).code(), StatusCode::kInvalidArgument);
  auto padded = bitmap;
  padded.back() |= 0x80;
  EXPECT_EQ(decodeDense(padded, padded.size(), 8).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(decodeDense(bitmap, bitmap.size(), 4).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(decodeSparse(bitmap, 4).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(decodeSparse(padded, 8).code(), StatusCode::kInvalidArgument);
  ASSERT_CUDA(cudaDeviceSynchronize());
  EXPECT_TRUE(download<float>(dense.data(), rows) == pattern) << "a refused payload wrote";
  // The same payload, valid, decodes.
  ASSERT_OK(decodeDense(bitmap, bitmap.size(), 8));
  const auto got = download<float>(dense.data(), rows);
  EXPECT_EQ(got[map.indexOf(part, 0)], 1.0f);
  EXPECT_EQ(got[map.indexOf(part, 2)], 2.0f);
}

TEST(HashBitmapGpu, EmptyAndTailParts) {
  std::mt19937_64 rng(testSeed());
  const IndexMap map(10, 4, rng());  // chunk 8: parts own 8, 2, 0, 0 positions
  GpuAggregator agg;
  Workspace ws;
  for (uint32_t j = 0; j < 4; ++j) {
    ASSERT_OK(agg.reset(map, j, DataType::kFloat64, 2, nullptr));
    GpuEncodedPart e;
    ASSERT_OK(gpuEncode(agg, 0.25, &e, &ws, nullptr));
    EXPECT_EQ(e.bitmapBytes, bitmapBytesFor(map, j));
    EXPECT_EQ(e.count, 0);
    DeviceBuffer dense;
    ASSERT_OK(dense.reserve(10 * 2 * sizeof(double)));
    DenseView out{dense.data(), DataType::kFloat64, TensorShape({10, 2}), Device::cuda(0)};
    ASSERT_OK(gpuDecodeToDense(map, j, e.bitmap.as<uint8_t>(), e.bitmapBytes, nullptr, 0,
                               DataType::kFloat64, 2, out, &ws, nullptr));
  }
}

}  // namespace
}  // namespace zen::cuda
