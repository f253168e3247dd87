// libFuzzer target: decodeRequestList, the control plane's rank -> coordinator message (see
// fuzz_payload.h for the input layout). What decodes must encode back to the same bytes (the
// encoding is canonical) and decode equal, and its shapes' sizes must not overflow.
#include "core/message_codec.h"
#include "test/fuzz/control_message_fuzz.h"
#include "test/fuzz/fuzz_payload.h"

using namespace zen;

namespace {

std::vector<uint8_t> validList() {
  RequestList list;
  Request a;
  a.rank = 3;
  a.name = "emb.weight";
  a.op = OpType::kSparseAllreduce;
  a.dtype = DataType::kFloat16;
  a.shape = TensorShape({1000, 16});
  a.reduceOp = ReduceOp::kAverage;
  a.rowSize = 16;
  Request b;
  b.name = "b";
  b.op = OpType::kBroadcast;
  b.shape = TensorShape({2, 3, 4});
  b.device = Device{Device::Kind::kCuda, 1};
  b.rootRank = 1;
  b.processSet = 2;  // wire version 3: a process set's request, and a registration
  Request add;
  add.name = "process_set.add.0";
  add.op = OpType::kAddProcessSet;
  add.members = {0, 2, 3};
  list.requests = {a, b, add};
  return encodeRequestList(list);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const std::vector<uint8_t> valid = validList();
  const std::vector<uint8_t> p = ops::fuzz::makePayload(data, size, valid);
  const Result<RequestList> v = decodeRequestList(p.data(), p.size());
  ops::fuzz::requireCleanError(v.status());
  if (!v.isOk()) return 0;
  const RequestList& list = v.value();
  for (const Request& q : list.requests) {
    ops::fuzz::require(q.device.index >= 0);
    ops::fuzz::require(ops::fuzz::sizesFit(q.shape) && q.shape.numRows() >= 0);
  }
  const std::vector<uint8_t> again = encodeRequestList(list);
  ops::fuzz::require(again == p);
  const Result<RequestList> w = decodeRequestList(again);
  ops::fuzz::require(w.isOk() && w.value() == list);
  return 0;
}
