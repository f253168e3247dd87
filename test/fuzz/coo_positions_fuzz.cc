// libFuzzer target: decodeCooPositions (see fuzz_payload.h for the input layout).
#include "ops/wire_format.h"
#include "test/fuzz/fuzz_payload.h"

using namespace zen::ops;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const RowFormat f{zen::DataType::kFloat32, 1};
  const uint64_t bound = 40;
  const uint32_t positions[3] = {2, 9, 39};
  const float values[3] = {1, 2, 3};
  ByteVector good;
  encodeCooPositions(f, positions, values, 3, &good);
  const ByteVector p = fuzz::makePayload(data, size, good);
  const bool ascending = (data[0] & 2) != 0;
  const zen::Result<CooPositionsView> v =
      decodeCooPositions(p.data(), p.size(), f, bound, 40, ascending);
  fuzz::requireCleanError(v.status());
  if (v.isOk()) {
    const CooPositionsView& view = v.value();
    fuzz::require(view.count >= 0 && view.count <= 40);
    for (int64_t k = 0; k < view.count; ++k) {
      fuzz::require(view.positions[k] < bound);
      fuzz::require(!ascending || k == 0 || view.positions[k] > view.positions[k - 1]);
    }
    fuzz::touch(view.values, static_cast<size_t>(view.count) * f.rowBytes());
  }
  return 0;
}
