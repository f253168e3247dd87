// libFuzzer target: decodeBitmapPart (see fuzz_payload.h for the input layout).
#include "ops/wire_format.h"
#include "test/fuzz/fuzz_payload.h"

using namespace zen::ops;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const RowFormat f{zen::DataType::kBFloat16, 2};
  const uint64_t bits = 45;  // not a multiple of 8: padding bits exist
  const uint8_t bitmap[6] = {0x81, 0x00, 0x10, 0x00, 0x00, 0x11};
  const uint16_t values[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  ByteVector good;
  encodeBitmapPart(f, bitmap, bits, values, 5, &good);
  const ByteVector p = fuzz::makePayload(data, size, good);
  const zen::Result<BitmapPartView> v = decodeBitmapPart(p.data(), p.size(), f, bits);
  fuzz::requireCleanError(v.status());
  if (v.isOk()) {
    const BitmapPartView& view = v.value();
    fuzz::require(view.bits == bits && view.bitmapBytes == 6);
    int64_t set = 0;
    for (uint64_t b = 0; b < 48; ++b) {
      const bool on = (view.bitmap[b / 8] >> (b % 8)) & 1;
      fuzz::require(!on || b < bits);
      set += on ? 1 : 0;
    }
    fuzz::require(set == view.count);
    fuzz::touch(view.values, static_cast<size_t>(view.count) * f.rowBytes());
  }
  return 0;
}
