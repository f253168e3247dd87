// libFuzzer target: decodeCounts (see fuzz_payload.h for the input layout).
#include "ops/wire_format.h"
#include "test/fuzz/fuzz_payload.h"

using namespace zen::ops;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint64_t valid[5] = {0, 3, 1000, 7, 1};
  ByteVector good;
  encodeCounts(valid, 5, &good);
  const ByteVector p = fuzz::makePayload(data, size, good);
  std::vector<uint64_t> out;
  const zen::Status s = decodeCounts(p.data(), p.size(), 5, 1000, &out);
  fuzz::requireCleanError(s);
  if (s.isOk()) {
    fuzz::require(out.size() == 5);
    for (uint64_t c : out) fuzz::require(c <= 1000);
  }
  return 0;
}
