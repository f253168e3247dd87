// libFuzzer target: decodeDenseRange (see fuzz_payload.h for the input layout).
#include "ops/wire_format.h"
#include "test/fuzz/fuzz_payload.h"

using namespace zen::ops;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const RowFormat f{zen::DataType::kFloat64, 2};
  const uint64_t limit = 20;
  const double values[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  ByteVector good;
  encodeDenseRange(f, 16, values, 4, &good);
  const ByteVector p = fuzz::makePayload(data, size, good);
  const zen::Result<DenseRangeView> v = decodeDenseRange(p.data(), p.size(), f, limit);
  fuzz::requireCleanError(v.status());
  if (v.isOk()) {
    const DenseRangeView& view = v.value();
    fuzz::require(view.count >= 0 && view.begin + static_cast<uint64_t>(view.count) <= limit);
    fuzz::touch(view.values, static_cast<size_t>(view.count) * f.rowBytes());
  }
  return 0;
}
