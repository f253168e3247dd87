#pragma once

// Little-endian primitives of the control-plane wire format (core/message_codec.h). The
// reader treats its input as untrusted: every read checks the bytes that remain, and a count
// is checked against them before anything is allocated, so garbage costs an error, not memory.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace zen {

class WireWriter {
 public:
  void u8(uint8_t v) { bytes_.push_back(v); }
  void u32(uint32_t v) { little(v, 4); }
  void i32(int32_t v) { little(static_cast<uint32_t>(v), 4); }
  void i64(int64_t v) { little(static_cast<uint64_t>(v), 8); }
  void str(const std::string& s) {
    u32(static_cast<uint32_t>(s.size()));
    bytes_.insert(bytes_.end(), s.begin(), s.end());
  }

  std::vector<uint8_t> take() { return std::move(bytes_); }

 private:
  void little(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) bytes_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }

  std::vector<uint8_t> bytes_;
};

class WireReader {
 public:
  WireReader(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  size_t remaining() const { return size_ - pos_; }

  Status u8(uint8_t* v) {
    ZEN_RETURN_IF_ERROR(need(1, "a byte"));
    *v = data_[pos_++];
    return Status::ok();
  }
  Status u32(uint32_t* v) {
    uint64_t x = 0;
    ZEN_RETURN_IF_ERROR(little(&x, 4));
    *v = static_cast<uint32_t>(x);
    return Status::ok();
  }
  Status i32(int32_t* v) {
    uint32_t x = 0;
    ZEN_RETURN_IF_ERROR(u32(&x));
    *v = static_cast<int32_t>(x);
    return Status::ok();
  }
  Status i64(int64_t* v) {
    uint64_t x = 0;
    ZEN_RETURN_IF_ERROR(little(&x, 8));
    *v = static_cast<int64_t>(x);
    return Status::ok();
  }
  Status str(std::string* s) {
    uint32_t n = 0;
    ZEN_RETURN_IF_ERROR(u32(&n));
    ZEN_RETURN_IF_ERROR(need(n, "a string"));
    s->assign(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return Status::ok();
  }
  // A count of elements that each take at least minBytes on the wire: rejected before the
  // caller reserves memory for it when the remaining bytes cannot hold that many.
  Status count(uint32_t* n, size_t minBytes, const char* what) {
    ZEN_RETURN_IF_ERROR(u32(n));
    if (static_cast<uint64_t>(*n) * minBytes > remaining()) {
      return ZEN_ERROR(StatusCode::kInvalidArgument,
                       "truncated message: {} {} need at least {} bytes, {} remain", *n, what,
                       static_cast<uint64_t>(*n) * minBytes, remaining());
    }
    return Status::ok();
  }
  Status expectEnd() const {
    ZEN_CHECK_ARG(remaining() == 0, "{} unexpected bytes after the end of the message",
                  remaining());
    return Status::ok();
  }

 private:
  Status need(size_t n, const char* what) const {
    ZEN_CHECK_ARG(n <= remaining(), "truncated message: {} needs {} bytes at offset {}, {} remain",
                  what, n, pos_, remaining());
    return Status::ok();
  }
  Status little(uint64_t* v, int n) {
    ZEN_RETURN_IF_ERROR(need(static_cast<size_t>(n), "an integer"));
    uint64_t x = 0;
    for (int i = 0; i < n; ++i) x |= static_cast<uint64_t>(data_[pos_ + i]) << (8 * i);
    pos_ += static_cast<size_t>(n);
    *v = x;
    return Status::ok();
  }

  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

}  // namespace zen
