// libFuzzer target: decodeCooIndices (see fuzz_payload.h for the input layout).
#include "ops/wire_format.h"
#include "test/fuzz/fuzz_payload.h"

using namespace zen::ops;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const RowFormat f{zen::DataType::kFloat16, 3};
  const int64_t numRows = 50;
  const int64_t indices[4] = {0, 49, 7, 7};
  const uint16_t values[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  ByteVector good;
  encodeCooIndices(f, indices, values, 4, &good);
  const ByteVector p = fuzz::makePayload(data, size, good);
  const zen::Result<CooIndicesView> v = decodeCooIndices(p.data(), p.size(), f, numRows, 64);
  fuzz::requireCleanError(v.status());
  if (v.isOk()) {
    const CooIndicesView& view = v.value();
    fuzz::require(view.count >= 0 && view.count <= 64);
    for (int64_t k = 0; k < view.count; ++k) {
      fuzz::require(view.indices[k] >= 0 && view.indices[k] < numRows);
    }
    fuzz::touch(view.values, static_cast<size_t>(view.count) * f.rowBytes());
  }
  return 0;
}
