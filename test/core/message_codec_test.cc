// Wire codec: round trips, and truncated, oversized and garbage input rejected cleanly.

#include "core/message_codec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <tuple>

namespace zen {
namespace {

Request sparseRequest() {
  Request q;
  q.rank = 3;
  q.name = "emb.weight";
  q.op = OpType::kSparseAllreduce;
  q.dtype = DataType::kFloat16;
  q.shape = TensorShape({1000000, 64});
  q.device = Device::cuda(2);
  q.reduceOp = ReduceOp::kAverage;
  q.rowSize = 64;
  return q;
}

RequestList sampleRequests() {
  RequestList list;
  list.requests.push_back(sparseRequest());
  Request b;
  b.rank = 3;
  b.name = "bcast/\xc3\xa9";  // non-ASCII and an embedded NUL survive
  b.name.push_back('\0');
  b.name.push_back('x');
  b.op = OpType::kBroadcast;
  b.rootRank = 1;
  b.shape = TensorShape({});
  list.requests.push_back(b);
  Request j;
  j.rank = 3;
  j.name = kJoinTensorName;
  j.op = OpType::kJoin;
  list.requests.push_back(j);
  Request a;
  a.rank = 3;
  a.name = "moe.tokens";
  a.op = OpType::kAlltoall;
  a.shape = TensorShape({6, 8});
  a.splits = {0, 4, 2};
  a.processSet = 2;  // splits within the set
  list.requests.push_back(a);
  Request add;
  add.rank = 3;
  add.name = "process_set.add.0";
  add.op = OpType::kAddProcessSet;
  add.members = {0, 2, 3, 70000};
  list.requests.push_back(add);
  Request remove;
  remove.rank = 3;
  remove.name = "process_set.remove.5";
  remove.op = OpType::kRemoveProcessSet;
  remove.processSet = 5;
  list.requests.push_back(remove);
  list.shutdown = true;
  return list;
}

ResponseList sampleResponses() {
  ResponseList list;
  Response sparse;
  sparse.type = ResponseType::kSparseAllreduce;
  sparse.tensorNames = {"a", "b"};
  sparse.dtype = DataType::kBFloat16;
  sparse.devices = {Device::cuda(0), Device::cuda(1)};
  sparse.reduceOp = ReduceOp::kAverage;
  sparse.rowSize = 16;
  sparse.shapes = {TensorShape({10, 16}), TensorShape({7, 4, 4})};
  sparse.rowOffsets = {0, 10};
  sparse.totalRows = 17;
  list.responses.push_back(sparse);
  Response gather;
  gather.type = ResponseType::kAllgather;
  gather.tensorNames = {"g"};
  gather.dtype = DataType::kInt64;
  gather.devices = {Device::cpu(), Device::cpu()};
  gather.shapes = {TensorShape({5, 3})};
  gather.gatherRows = {2, 3};
  list.responses.push_back(gather);
  Response alltoall;
  alltoall.type = ResponseType::kAlltoall;
  alltoall.tensorNames = {"moe.tokens"};
  alltoall.devices = {Device::cpu(), Device::cpu()};
  alltoall.shapes = {TensorShape({9, 8})};
  alltoall.splits = {1, 2, 0, 6};
  alltoall.processSet = 7;
  list.responses.push_back(alltoall);
  Response scatter;
  scatter.type = ResponseType::kReducescatter;
  scatter.tensorNames = {"r1", "r2"};
  scatter.devices = {Device::cpu(), Device::cpu()};
  scatter.reduceOp = ReduceOp::kMax;
  scatter.shapes = {TensorShape({5, 2}), TensorShape({3})};
  list.responses.push_back(scatter);
  Response error;
  error.type = ResponseType::kError;
  error.tensorNames = {"bad"};
  error.errorMessage = "tensor 'bad': no";
  list.responses.push_back(error);
  Response join;
  join.type = ResponseType::kJoin;
  join.tensorNames = {kJoinTensorName};
  join.lastJoinedRank = 1;
  list.responses.push_back(join);
  Response added;
  added.type = ResponseType::kAddProcessSet;
  added.tensorNames = {"process_set.add.0"};
  added.processSet = 3;
  added.members = {1, 4};
  list.responses.push_back(added);
  Response removed;
  removed.type = ResponseType::kRemoveProcessSet;
  removed.tensorNames = {"process_set.remove.3"};
  removed.processSet = 3;
  list.responses.push_back(removed);
  return list;
}

TEST(MessageCodec, RequestListRoundTrips) {
  const RequestList list = sampleRequests();
  const auto bytes = encodeRequestList(list);
  auto decoded = decodeRequestList(bytes);
  ASSERT_TRUE(decoded.isOk()) << decoded.status().toString();
  EXPECT_EQ(decoded.value(), list);
  EXPECT_EQ(decoded.value().requests[1].name.size(), list.requests[1].name.size());
}

// Wire version 3: every request and response carries its process set and member list.
TEST(MessageCodec, ProcessSetFieldsRoundTrip) {
  const RequestList requests = sampleRequests();
  auto back = decodeRequestList(encodeRequestList(requests));
  ASSERT_TRUE(back.isOk()) << back.status().toString();
  const auto& q = back.value().requests;
  ASSERT_EQ(q.size(), 6u);
  EXPECT_EQ(q[0].processSet, kGlobalProcessSet);
  EXPECT_EQ(q[3].processSet, 2);
  EXPECT_EQ(q[4].op, OpType::kAddProcessSet);
  EXPECT_EQ(q[4].members, (std::vector<int32_t>{0, 2, 3, 70000}));
  EXPECT_EQ(q[5].op, OpType::kRemoveProcessSet);
  EXPECT_EQ(q[5].processSet, 5);
  const ResponseList responses = sampleResponses();
  auto plan = decodeResponseList(encodeResponseList(responses));
  ASSERT_TRUE(plan.isOk()) << plan.status().toString();
  const auto& p = plan.value().responses;
  ASSERT_EQ(p.size(), 8u);
  EXPECT_EQ(p[2].processSet, 7);
  EXPECT_EQ(p[6].type, ResponseType::kAddProcessSet);
  EXPECT_EQ(p[6].processSet, 3);
  EXPECT_EQ(p[6].members, (std::vector<int32_t>{1, 4}));
  EXPECT_EQ(p[7].type, ResponseType::kRemoveProcessSet);

  // A member count larger than the message fails before allocating; the field is the last
  // of a request: its 4-byte count, then 4 bytes per member.
  RequestList one;
  one.requests = {q[4]};
  auto bytes = encodeRequestList(one);
  const size_t countAt = bytes.size() - 4 - 4 * q[4].members.size();
  EXPECT_EQ(bytes[countAt], 4u);
  for (size_t i = 0; i < 4; ++i) bytes[countAt + i] = 0xff;
  auto r = decodeRequestList(bytes);
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("process set members"), std::string::npos)
      << r.status().toString();
}

TEST(MessageCodec, EmptyListsRoundTrip) {
  auto req = decodeRequestList(encodeRequestList(RequestList{}));
  ASSERT_TRUE(req.isOk());
  EXPECT_TRUE(req.value().requests.empty());
  EXPECT_FALSE(req.value().shutdown);
  ResponseList stop;
  stop.shutdown = true;
  auto resp = decodeResponseList(encodeResponseList(stop));
  ASSERT_TRUE(resp.isOk());
  EXPECT_TRUE(resp.value().shutdown);
}

TEST(MessageCodec, ResponseListRoundTrips) {
  const ResponseList list = sampleResponses();
  auto decoded = decodeResponseList(encodeResponseList(list));
  ASSERT_TRUE(decoded.isOk()) << decoded.status().toString();
  EXPECT_EQ(decoded.value(), list);
}

// Wire version 4: the autotuner's parameters ride in the plan, the cycle time bit for bit;
// bad values are refused.
TEST(MessageCodec, TunedParametersRoundTripAndAreChecked) {
  ResponseList list = sampleResponses();
  list.parameters = TunedParameters{int64_t{24} << 20, 0.1 * 37};
  auto decoded = decodeResponseList(encodeResponseList(list));
  ASSERT_TRUE(decoded.isOk()) << decoded.status().toString();
  ASSERT_TRUE(decoded.value().parameters.has_value());
  EXPECT_EQ(decoded.value().parameters->fusionThresholdBytes, int64_t{24} << 20);
  EXPECT_EQ(decoded.value().parameters->cycleTimeMs, 0.1 * 37);  // exact, not approximately
  EXPECT_EQ(decoded.value(), list);
  EXPECT_NE(decoded.value(), sampleResponses());

  // Header (4), shutdown (1), flag (1), threshold (8), cycle time (8).
  for (auto [fusion, cycle, what] : {std::tuple{int64_t{-1}, 1.0, "negative fusion threshold -1"},
                                     std::tuple{int64_t{0}, -2.0, "invalid cycle time -2 ms"},
                                     std::tuple{int64_t{0}, std::nan(""), "invalid cycle time"}}) {
    ResponseList bad;
    bad.parameters = TunedParameters{fusion, cycle};
    auto r = decodeResponseList(encodeResponseList(bad));
    ASSERT_FALSE(r.isOk()) << what;
    EXPECT_NE(r.status().message().find(what), std::string::npos) << r.status().toString();
  }
  auto bytes = encodeResponseList(ResponseList{});
  bytes[5] = 2;  // the flag
  auto r = decodeResponseList(bytes);
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("parameters flag"), std::string::npos);
}

TEST(MessageCodec, IsLittleEndianWithAHeader) {
  RequestList list;
  Request q;
  q.rank = 0x01020304;
  q.name = "x";
  list.requests.push_back(q);
  const auto bytes = encodeRequestList(list);
  ASSERT_GE(bytes.size(), 14u);
  EXPECT_EQ(bytes[0], 'Z');
  EXPECT_EQ(bytes[1], 'N');
  EXPECT_EQ(bytes[2], kWireVersion);
  EXPECT_EQ(bytes[4], 0);  // shutdown
  EXPECT_EQ(bytes[5], 1);  // count, low byte first
  EXPECT_EQ(bytes[9], 0x04);
  EXPECT_EQ(bytes[12], 0x01);
}

// Every strict prefix of a valid message is truncated and must be rejected cleanly.
TEST(MessageCodec, EveryTruncationIsRejected) {
  const auto req = encodeRequestList(sampleRequests());
  for (size_t n = 0; n < req.size(); ++n) {
    auto r = decodeRequestList(req.data(), n);
    ASSERT_FALSE(r.isOk()) << "prefix " << n;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  }
  const auto resp = encodeResponseList(sampleResponses());
  for (size_t n = 0; n < resp.size(); ++n) {
    auto r = decodeResponseList(resp.data(), n);
    ASSERT_FALSE(r.isOk()) << "prefix " << n;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  }
}

TEST(MessageCodec, TrailingBytesAreRejected) {
  auto bytes = encodeRequestList(sampleRequests());
  bytes.push_back(0);
  auto r = decodeRequestList(bytes);
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("unexpected bytes"), std::string::npos);
}

TEST(MessageCodec, HeaderMismatchesAreRejected) {
  auto bytes = encodeRequestList(sampleRequests());
  auto bad = bytes;
  bad[0] = 'X';
  EXPECT_FALSE(decodeRequestList(bad).isOk());
  bad = bytes;
  bad[2] = kWireVersion + 1;
  auto r = decodeRequestList(bad);
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("version"), std::string::npos);
  // A request list is not a response list.
  EXPECT_FALSE(decodeResponseList(bytes).isOk());
}

TEST(MessageCodec, HugeCountsFailBeforeAllocating) {
  // Header, shutdown = 0, then a count of 2^32-1 requests in a 9-byte message.
  std::vector<uint8_t> bytes = {'Z', 'N', kWireVersion, 1, 0, 0xff, 0xff, 0xff, 0xff};
  auto r = decodeRequestList(bytes);
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("truncated"), std::string::npos) << r.status().message();
  bytes[3] = 2;
  EXPECT_FALSE(decodeResponseList(bytes).isOk());

  // A valid request whose name length claims 4 GiB.
  RequestList list;
  list.requests.push_back(sparseRequest());
  auto enc = encodeRequestList(list);
  const size_t nameLen = 4 + 1 + 4 + 4;  // header, shutdown, count, rank
  for (int i = 0; i < 4; ++i) enc[nameLen + static_cast<size_t>(i)] = 0xff;
  EXPECT_FALSE(decodeRequestList(enc).isOk());
}

TEST(MessageCodec, BadEnumsAndFieldsAreRejected) {
  RequestList list;
  Request q;
  q.name = "x";
  list.requests.push_back(q);
  const auto bytes = encodeRequestList(list);
  const size_t opAt = 4 + 1 + 4 + 4 + 4 + 1;  // header, shutdown, count, rank, name
  auto bad = bytes;
  bad[opAt] = kNumOpTypes;
  EXPECT_FALSE(decodeRequestList(bad).isOk());
  bad = bytes;
  bad[opAt + 1] = 6;  // dtype
  EXPECT_FALSE(decodeRequestList(bad).isOk());
  bad = bytes;
  bad[4] = 2;  // shutdown flag is a bool
  EXPECT_FALSE(decodeRequestList(bad).isOk());

  q.shape = TensorShape({-1, 3});
  list.requests = {q};
  auto r = decodeRequestList(encodeRequestList(list));
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("negative dimension"), std::string::npos);

  q.shape = TensorShape({int64_t{1} << 40, int64_t{1} << 40});
  list.requests = {q};
  EXPECT_FALSE(decodeRequestList(encodeRequestList(list)).isOk());

  // Regression (found by test/fuzz/request_list_fuzz.cc): a zero dimension let any dims after
  // it through, and the coordinator's shape.rowSize() (dims past the first) overflowed int64.
  q.shape = TensorShape({0, int64_t{1} << 40, int64_t{1} << 40});
  list.requests = {q};
  r = decodeRequestList(encodeRequestList(list));
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("2^60"), std::string::npos) << r.status().toString();
  q.shape = TensorShape({int64_t{1} << 40, 0, int64_t{1} << 40});
  list.requests = {q};
  EXPECT_FALSE(decodeRequestList(encodeRequestList(list)).isOk());
  q.shape = TensorShape({0, int64_t{1} << 30, int64_t{1} << 29});  // 2^59 elements a row: fine
  list.requests = {q};
  EXPECT_TRUE(decodeRequestList(encodeRequestList(list)).isOk());
  ResponseList plan;
  Response resp;
  resp.tensorNames = {"t"};
  resp.shapes = {TensorShape({0, 3, int64_t{1} << 62})};
  plan.responses = {resp};
  EXPECT_FALSE(decodeResponseList(encodeResponseList(plan)).isOk());

  q.shape = TensorShape({});
  q.device = Device::cuda(-1);
  list.requests = {q};
  EXPECT_FALSE(decodeRequestList(encodeRequestList(list)).isOk());
}

TEST(MessageCodec, EveryReduceOpRoundTripsAndUnknownCodesAreRejected) {
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin, ReduceOp::kMax,
                      ReduceOp::kProduct, ReduceOp::kAdasum}) {
    RequestList list;
    Request q;
    q.name = "x";
    q.reduceOp = op;
    list.requests.push_back(q);
    auto back = decodeRequestList(encodeRequestList(list));
    ASSERT_TRUE(back.isOk()) << reduceOpName(op);
    EXPECT_EQ(back.value(), list);
    ResponseList plan;
    Response r;
    r.tensorNames = {"x"};
    r.shapes = {TensorShape({2})};
    r.reduceOp = op;
    plan.responses.push_back(r);
    auto planBack = decodeResponseList(encodeResponseList(plan));
    ASSERT_TRUE(planBack.isOk()) << reduceOpName(op);
    EXPECT_EQ(planBack.value(), plan);
  }
  // The reduce op's byte is where kSum and kProduct encodings differ; codes past the last op
  // (a newer peer's) are refused, not cast.
  RequestList sum, product;
  Request q;
  q.name = "x";
  sum.requests = {q};
  q.reduceOp = ReduceOp::kProduct;
  product.requests = {q};
  const auto a = encodeRequestList(sum);
  const auto b = encodeRequestList(product);
  ASSERT_EQ(a.size(), b.size());
  size_t at = 0;
  while (at < a.size() && a[at] == b[at]) ++at;
  ASSERT_LT(at, a.size());
  EXPECT_EQ(b[at], static_cast<uint8_t>(ReduceOp::kProduct));
  for (int code : {kNumReduceOps, 200}) {
    auto bad = b;
    bad[at] = static_cast<uint8_t>(code);
    auto r = decodeRequestList(bad);
    ASSERT_FALSE(r.isOk()) << code;
    EXPECT_NE(r.status().message().find("invalid reduce op"), std::string::npos)
        << r.status().toString();
  }
}

TEST(MessageCodec, PerTensorArraysMustMatchTheNames) {
  ResponseList list;
  Response r;
  r.tensorNames = {"a", "b"};
  r.shapes = {TensorShape({1})};
  list.responses = {r};
  EXPECT_FALSE(decodeResponseList(encodeResponseList(list)).isOk());
  r.shapes = {TensorShape({1}), TensorShape({2})};
  r.rowOffsets = {0};
  list.responses = {r};
  EXPECT_FALSE(decodeResponseList(encodeResponseList(list)).isOk());
  r.rowOffsets = {};
  r.gatherRows = {1, 2, 3};
  list.responses = {r};
  EXPECT_FALSE(decodeResponseList(encodeResponseList(list)).isOk());
  r.gatherRows = {1, 2, 3, 4};
  list.responses = {r};
  EXPECT_TRUE(decodeResponseList(encodeResponseList(list)).isOk());
  // Alltoall splits: one tensor, size x size of them (size = the devices' count), and only on
  // an alltoall; an executor indexes them [sender * size + receiver].
  Response a;
  a.type = ResponseType::kAlltoall;
  a.tensorNames = {"a"};
  a.devices = {Device::cpu(), Device::cpu()};
  a.shapes = {TensorShape({4})};
  a.splits = {1, 1, 1, 1};
  list.responses = {a};
  EXPECT_TRUE(decodeResponseList(encodeResponseList(list)).isOk());
  a.splits = {1, 1, 1};
  list.responses = {a};
  EXPECT_FALSE(decodeResponseList(encodeResponseList(list)).isOk());
  a.splits = {1, 1, 1, 1};
  a.type = ResponseType::kAllgather;
  list.responses = {a};
  EXPECT_FALSE(decodeResponseList(encodeResponseList(list)).isOk());
}

// Random garbage and random corruptions of valid messages: never a crash, an error or a valid
// decode (a flipped byte inside a name is still a valid message).
TEST(MessageCodec, GarbageNeverCrashes) {
  std::mt19937_64 rng(7);
  const auto req = encodeRequestList(sampleRequests());
  const auto resp = encodeResponseList(sampleResponses());
  for (int trial = 0; trial < 20000; ++trial) {
    std::vector<uint8_t> bytes;
    if (trial % 2 == 0) {
      bytes.resize(rng() % 64);
      for (auto& b : bytes) b = static_cast<uint8_t>(rng());
      if (bytes.size() >= 4 && trial % 4 == 0) {
        bytes[0] = 'Z';
        bytes[1] = 'N';
        bytes[2] = kWireVersion;
        bytes[3] = static_cast<uint8_t>(1 + rng() % 2);
      }
    } else {
      bytes = (trial % 3 == 0) ? req : resp;
      for (int flips = 0; flips < 3; ++flips) {
        bytes[rng() % bytes.size()] = static_cast<uint8_t>(rng());
      }
    }
    auto a = decodeRequestList(bytes);
    auto b = decodeResponseList(bytes);
    if (!a.isOk()) {
      EXPECT_EQ(a.status().code(), StatusCode::kInvalidArgument);
    }
    if (!b.isOk()) {
      EXPECT_EQ(b.status().code(), StatusCode::kInvalidArgument);
    }
  }
}

}  // namespace
}  // namespace zen
