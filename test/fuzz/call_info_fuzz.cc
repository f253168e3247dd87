// libFuzzer target: decodeCallInfo (see fuzz_payload.h for the input layout).
#include "ops/wire_format.h"
#include "test/fuzz/fuzz_payload.h"

using namespace zen::ops;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  CallInfo info;
  info.rank = 2;
  info.op = ReduceOp::kAverage;
  info.scheme = zen::Scheme::kZen;
  info.rowSize = 4;
  info.numRows = 1000;
  info.nnz = 10;
  info.failed = (data[0] & 2) != 0;
  info.message = "index 1005 at position 3 is out of range [0, 1000)";
  ByteVector good;
  encodeCallInfo(info, &good);
  const ByteVector p = fuzz::makePayload(data, size, good);
  const zen::Result<CallInfo> v = decodeCallInfo(p.data(), p.size(), 2);
  fuzz::requireCleanError(v.status());
  if (v.isOk()) {
    const CallInfo& got = v.value();
    fuzz::require(got.rank == 2 && got.message.size() <= kMaxCallMessageBytes);
    fuzz::require(got.failed || (got.rowSize >= 1 && got.numRows >= 0 && got.nnz >= 0));
    fuzz::require(got.op <= ReduceOp::kAverage && got.scheme <= zen::Scheme::kDense);
  }
  return 0;
}
