// libFuzzer target: decodeResponseList, the control plane's coordinator -> rank plan (see
// fuzz_payload.h for the input layout). What decodes must encode back to the same bytes (the
// encoding is canonical) and decode equal; its per-tensor arrays must line up with the names
// and its tensors' sizes must not overflow.
#include "core/message_codec.h"
#include "test/fuzz/control_message_fuzz.h"
#include "test/fuzz/fuzz_payload.h"

using namespace zen;

namespace {

std::vector<uint8_t> validList() {
  ResponseList list;
  Response sparse;
  sparse.type = ResponseType::kSparseAllreduce;
  sparse.tensorNames = {"emb.a", "emb.b"};
  sparse.dtype = DataType::kBFloat16;
  sparse.devices = {Device{}, Device{}};
  sparse.reduceOp = ReduceOp::kAverage;
  sparse.rowSize = 8;
  sparse.shapes = {TensorShape({100, 8}), TensorShape({50, 8})};
  sparse.rowOffsets = {0, 100};
  sparse.totalRows = 150;
  Response gather;
  gather.type = ResponseType::kAllgather;
  gather.tensorNames = {"g"};
  gather.shapes = {TensorShape({7, 2})};
  gather.gatherRows = {3, 4};
  Response error;
  error.type = ResponseType::kError;
  error.tensorNames = {"x"};
  error.errorMessage = "rank 2 sent dtype float16, rank 0 float32 for 'x'";
  gather.processSet = 2;  // wire version 3: a process set's response, and a registration
  Response added;
  added.type = ResponseType::kAddProcessSet;
  added.tensorNames = {"process_set.add.0"};
  added.processSet = 3;
  added.members = {1, 4};
  list.responses = {sparse, gather, error, added};
  list.shutdown = true;
  list.parameters = TunedParameters{int64_t{16} << 20, 2.5};  // wire version 4
  return encodeResponseList(list);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const std::vector<uint8_t> valid = validList();
  const std::vector<uint8_t> p = ops::fuzz::makePayload(data, size, valid);
  const Result<ResponseList> v = decodeResponseList(p.data(), p.size());
  ops::fuzz::requireCleanError(v.status());
  if (!v.isOk()) return 0;
  const ResponseList& list = v.value();
  for (const Response& r : list.responses) {
    const size_t names = r.tensorNames.size();
    ops::fuzz::require(r.shapes.empty() || r.shapes.size() == names);
    ops::fuzz::require(r.rowOffsets.empty() || r.rowOffsets.size() == names);
    ops::fuzz::require(names == 0 ? r.gatherRows.empty() : r.gatherRows.size() % names == 0);
    for (const Device& d : r.devices) ops::fuzz::require(d.index >= 0);
    for (const TensorShape& shape : r.shapes) {
      ops::fuzz::require(ops::fuzz::sizesFit(shape) && shape.numRows() >= 0);
    }
  }
  const std::vector<uint8_t> again = encodeResponseList(list);
  ops::fuzz::require(again == p);
  const Result<ResponseList> w = decodeResponseList(again);
  ops::fuzz::require(w.isOk() && w.value() == list);
  return 0;
}
