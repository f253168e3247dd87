// libFuzzer target: decodeHcSet, HC's merged-set messages (see fuzz_payload.h for the input
// layout). Byte 0 bit 1 picks the format (13 rows of 3 fp32 values, or more than 2^32 rows of
// one int64 value: 8-byte indices), bit 2 the valid message edited (sparse or dense).
// What decodes must hold what the contract says, and encode back to the same bytes.
#include <cstring>

#include "ops/hc_wire.h"
#include "test/fuzz/fuzz_payload.h"

using namespace zen::ops;

namespace {

ByteVector validSet(const HcSetFormat& f, bool dense) {
  ByteVector out;
  if (dense) {  // small format only: rows 1, 2 and 12
    std::vector<float> values(static_cast<size_t>(f.numRows * f.rowSize), 0.0f);
    for (int r : {1, 2, 12}) values[static_cast<size_t>(r * f.rowSize)] = static_cast<float>(r);
    const uint64_t occupancy = (1u << 1) | (1u << 2) | (1u << 12);
    encodeHcDense(f, &occupancy, values.data(), &out);
    return out;
  }
  const int64_t indices[3] = {0, 7, f.numRows - 1};
  const int64_t values[3 * 3] = {1, 2, 3, 4, 5, 6, 7, 8, 9};  // enough bytes for either format
  encodeHcSparse(f, indices, values, 3, &out);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool wide = (data[0] & 2) != 0;
  const HcSetFormat f = wide ? HcSetFormat{(int64_t{1} << 32) + 3, 1, 8} : HcSetFormat{13, 3, 4};
  const ByteVector p = fuzz::makePayload(data, size, validSet(f, !wide && (data[0] & 4) != 0));
  const zen::Result<HcSetView> v = decodeHcSet(p.data(), p.size(), f);
  fuzz::requireCleanError(v.status());
  if (!v.isOk()) return 0;
  const HcSetView& view = v.value();
  const size_t rowBytes = f.rowBytes();
  ByteVector again;
  if (view.dense) {
    fuzz::require(view.count == static_cast<uint64_t>(f.numRows) && p.size() == f.denseBytes());
    fuzz::touch(view.bitmap, f.bitmapBytes());
    fuzz::touch(view.values, static_cast<size_t>(view.count) * rowBytes);
    std::vector<uint64_t> occupancy(static_cast<size_t>((f.numRows + 63) / 64), 0);
    for (size_t b = 0; b < f.bitmapBytes(); ++b) {
      occupancy[b / 8] |= uint64_t{view.bitmap[b]} << (8 * (b % 8));
    }
    for (int64_t r = 0; r < f.numRows; ++r) {  // rows outside the bitmap are zero
      if ((occupancy[r / 64] >> (r % 64)) & 1) continue;
      const uint8_t* row = view.values + static_cast<size_t>(r) * rowBytes;
      for (size_t i = 0; i < rowBytes; ++i) fuzz::require(row[i] == 0);
    }
    encodeHcDense(f, occupancy.data(), view.values, &again);
  } else {
    fuzz::require(view.count <= static_cast<uint64_t>(f.numRows));
    std::vector<int64_t> indices(static_cast<size_t>(view.count));
    for (uint64_t k = 0; k < view.count; ++k) {
      indices[k] = view.index(k);
      fuzz::require(indices[k] >= 0 && indices[k] < f.numRows);
      fuzz::require(k == 0 || indices[k] > indices[k - 1]);
    }
    fuzz::touch(view.values, static_cast<size_t>(view.count) * rowBytes);
    encodeHcSparse(f, indices.data(), view.values, view.count, &again);
  }
  // The encoding is canonical: what the decoder accepts is exactly what the encoder writes.
  fuzz::require(again == p);
  return 0;
}
