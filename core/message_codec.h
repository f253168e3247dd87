#pragma once

// The control-plane wire format of RequestList and ResponseList: a 4-byte header ('Z', 'N',
// version, kind) then the fields, integers little-endian, strings and arrays prefixed by a
// 32-bit count. Decoders run on bytes from the network: they validate every enum, count and
// length against the bytes that remain before allocating, and return kInvalidArgument for
// truncated, oversized or garbage input instead of crashing or hanging a rank.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/message.h"
#include "core/status.h"

namespace zen {

// 2: alltoall's splits in Request and Response. 3: process sets (processSet, members).
// 4: the autotuner's parameters in ResponseList.
inline constexpr uint8_t kWireVersion = 4;

std::vector<uint8_t> encodeRequestList(const RequestList& list);
std::vector<uint8_t> encodeResponseList(const ResponseList& list);

Result<RequestList> decodeRequestList(const uint8_t* data, size_t size);
Result<ResponseList> decodeResponseList(const uint8_t* data, size_t size);

inline Result<RequestList> decodeRequestList(const std::vector<uint8_t>& bytes) {
  return decodeRequestList(bytes.data(), bytes.size());
}
inline Result<ResponseList> decodeResponseList(const std::vector<uint8_t>& bytes) {
  return decodeResponseList(bytes.data(), bytes.size());
}

}  // namespace zen
