// libFuzzer target: decodeBlocksPull, a part of the blocks scheme (see blocks_part_fuzz.h).
#include "test/fuzz/blocks_part_fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return zen::ops::fuzz::fuzzBlocksPart(data, size, /*pull=*/true);
}
