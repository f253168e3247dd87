// libFuzzer target: decodeSummarized, a call summary leading a payload (see fuzz_payload.h for
// the input layout).
#include "ops/wire_format.h"
#include "test/fuzz/fuzz_payload.h"

using namespace zen::ops;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  CallInfo info;
  info.rank = 1;
  info.scheme = zen::Scheme::kAgSparse;
  info.rowSize = 2;
  info.numRows = 100;
  info.nnz = 3;
  info.failed = (data[0] & 2) != 0;
  info.message = info.failed ? "index 105 at position 2 is out of range [0, 100)" : "";
  ByteVector good;
  const size_t at = startSummarized(info, &good);
  const int64_t indices[] = {4, 99, 4};
  const float values[] = {1, 2, 3, 4, 5, 6};
  encodeCooIndices(RowFormat{zen::DataType::kFloat32, 2}, indices, values, 3, &good, at);
  const ByteVector p = fuzz::makePayload(data, size, good);
  const zen::Result<SummarizedView> v = decodeSummarized(p.data(), p.size(), 1);
  fuzz::requireCleanError(v.status());
  if (v.isOk()) {
    const SummarizedView& got = v.value();
    fuzz::require(got.info.rank == 1 && got.info.message.size() <= kMaxCallMessageBytes);
    fuzz::require(got.payload >= p.data() && got.payload + got.payloadBytes == p.data() + p.size());
    fuzz::require((got.payload - p.data()) % kWireAlignment == 0);
    fuzz::touch(got.payload, got.payloadBytes);
  }
  return 0;
}
