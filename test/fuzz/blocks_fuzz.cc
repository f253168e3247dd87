// libFuzzer target: decodeBlocks (see fuzz_payload.h for the input layout).
#include "ops/wire_format.h"
#include "test/fuzz/fuzz_payload.h"

using namespace zen::ops;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const RowFormat f{zen::DataType::kFloat32, 8};  // short blocks keep payloads small
  const uint64_t numBlocks = 12;
  const uint32_t ids[3] = {0, 5, 11};
  float values[24];
  for (int i = 0; i < 24; ++i) values[i] = static_cast<float>(i);
  ByteVector good;
  encodeBlocks(f, ids, values, 3, &good);
  const ByteVector p = fuzz::makePayload(data, size, good);
  const zen::Result<BlocksView> v = decodeBlocks(p.data(), p.size(), f, numBlocks);
  fuzz::requireCleanError(v.status());
  if (v.isOk()) {
    const BlocksView& view = v.value();
    fuzz::require(view.count >= 0 && static_cast<uint64_t>(view.count) <= numBlocks);
    for (int64_t k = 0; k < view.count; ++k) {
      fuzz::require(view.ids[k] < numBlocks && (k == 0 || view.ids[k] > view.ids[k - 1]));
    }
    fuzz::touch(view.values, static_cast<size_t>(view.count) * f.rowBytes());
  }
  return 0;
}
