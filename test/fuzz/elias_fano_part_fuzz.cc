// libFuzzer target: decodeEliasFanoPart (see fuzz_payload.h for the input layout).
#include "ops/wire_format.h"
#include "test/fuzz/fuzz_payload.h"

using namespace zen::ops;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const RowFormat f{zen::DataType::kFloat32, 1};
  const uint64_t universe = 300;  // 9 positions: L = 5, 45 low bits, 18 bitvector bits
  const uint64_t positions[9] = {1, 2, 40, 41, 42, 150, 200, 298, 299};
  ByteVector good;
  EliasFanoPartSlots slots = startEliasFanoPart(f, universe, 9, &good);
  for (const uint64_t p : positions) slots.positions.push(p);
  slots.positions.finish();
  for (int i = 0; i < 9; ++i) reinterpret_cast<float*>(slots.values)[i] = static_cast<float>(i);
  const ByteVector p = fuzz::makePayload(data, size, good);
  std::vector<uint32_t> scratch;
  const zen::Result<EliasFanoPartView> v =
      decodeEliasFanoPart(p.data(), p.size(), f, universe, &scratch);
  fuzz::requireCleanError(v.status());
  if (v.isOk()) {
    const EliasFanoPartView& view = v.value();
    fuzz::require(view.universe == universe);
    zen::EliasFanoReader reader(view.shape, view.low, view.high);
    uint64_t previous = 0;
    for (int64_t k = 0; k < view.count; ++k) {
      const uint64_t pos = reader.next();
      fuzz::require(pos == view.positions[k]);
      fuzz::require(pos < universe && (k == 0 || pos > previous));
      previous = pos;
    }
    fuzz::touch(view.values, static_cast<size_t>(view.count) * f.rowBytes());
  }
  return 0;
}
