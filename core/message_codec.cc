// Encoders and validating decoders of the control-plane messages (core/message_codec.h).

#include "core/message_codec.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "core/wire.h"

namespace zen {
namespace {

enum class Kind : uint8_t { kRequestList = 1, kResponseList = 2 };

// DataType's last enumerator is kInt64 (core/dtype.h).
constexpr int kNumDataTypes = static_cast<int>(DataType::kInt64) + 1;

// Smallest encodings, used to bound counts before allocating.
constexpr size_t kMinShapeBytes = 4;
constexpr size_t kMinDeviceBytes = 5;
constexpr size_t kMinStringBytes = 4;
constexpr size_t kMinRequestBytes =
    4 + kMinStringBytes + 1 + 1 + kMinShapeBytes + kMinDeviceBytes + 1 + 4 + 8 + 4 + 4 + 4;
constexpr size_t kMinResponseBytes =
    1 + 4 + kMinStringBytes + 1 + 4 + 1 + 4 + 8 + 4 + 4 + 4 + 4 + 8 + 4 + 4 + 4;

void writeHeader(WireWriter& w, Kind kind) {
  w.u8('Z');
  w.u8('N');
  w.u8(kWireVersion);
  w.u8(static_cast<uint8_t>(kind));
}

Status readHeader(WireReader& r, Kind kind) {
  uint8_t z = 0, n = 0, version = 0, k = 0;
  ZEN_RETURN_IF_ERROR(r.u8(&z));
  ZEN_RETURN_IF_ERROR(r.u8(&n));
  ZEN_CHECK_ARG(z == 'Z' && n == 'N', "not a Zen control message (bad magic {:#04x} {:#04x})", z,
                n);
  ZEN_RETURN_IF_ERROR(r.u8(&version));
  ZEN_CHECK_ARG(version == kWireVersion, "control message version {}, this build speaks {}",
                version, kWireVersion);
  ZEN_RETURN_IF_ERROR(r.u8(&k));
  ZEN_CHECK_ARG(k == static_cast<uint8_t>(kind), "control message kind {}, expected {}", k,
                static_cast<int>(kind));
  return Status::ok();
}

template <typename E>
Status readEnum(WireReader& r, int limit, const char* what, E* out) {
  uint8_t v = 0;
  ZEN_RETURN_IF_ERROR(r.u8(&v));
  ZEN_CHECK_ARG(v < limit, "invalid {} {} in control message", what, v);
  *out = static_cast<E>(v);
  return Status::ok();
}

void writeShape(WireWriter& w, const TensorShape& s) {
  w.u32(static_cast<uint32_t>(s.dims().size()));
  for (int64_t d : s.dims()) w.i64(d);
}

// Dims must be non-negative and the product of the non-zero ones (times 8 bytes) must fit in
// int64. That bounds every product of dims a consumer forms (numElements, rowSize, the fusion
// planner's byte counts), so none can overflow on a hostile message; a zero dimension must not
// hide huge ones after it (rowSize skips the first dimension).
Status readShape(WireReader& r, TensorShape* out) {
  uint32_t n = 0;
  ZEN_RETURN_IF_ERROR(r.count(&n, 8, "dimensions"));
  std::vector<int64_t> dims(n);
  int64_t product = 1;  // of the non-zero dims
  for (auto& d : dims) {
    ZEN_RETURN_IF_ERROR(r.i64(&d));
    ZEN_CHECK_ARG(d >= 0, "negative dimension {} in control message", d);
    if (d == 0) continue;
    ZEN_CHECK_ARG(product <= std::numeric_limits<int64_t>::max() / 8 / d,
                  "tensor shape in control message: its non-zero dimensions multiply to more "
                  "than 2^60");
    product *= d;
  }
  *out = TensorShape(std::move(dims));
  return Status::ok();
}

void writeDevice(WireWriter& w, const Device& d) {
  w.u8(static_cast<uint8_t>(d.kind));
  w.i32(d.index);
}

Status readDevice(WireReader& r, Device* out) {
  ZEN_RETURN_IF_ERROR(readEnum(r, 2, "device kind", &out->kind));
  ZEN_RETURN_IF_ERROR(r.i32(&out->index));
  ZEN_CHECK_ARG(out->index >= 0, "negative device index {} in control message", out->index);
  return Status::ok();
}

Status readStrings(WireReader& r, std::vector<std::string>* out) {
  uint32_t n = 0;
  ZEN_RETURN_IF_ERROR(r.count(&n, kMinStringBytes, "names"));
  out->resize(n);
  for (auto& s : *out) ZEN_RETURN_IF_ERROR(r.str(&s));
  return Status::ok();
}

// A count, then the values: the codec's arrays of int32 and int64.
template <typename T>
void writeInts(WireWriter& w, const std::vector<T>& values) {
  static_assert(std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t>);
  w.u32(static_cast<uint32_t>(values.size()));
  for (T v : values) {
    if constexpr (sizeof(T) == 8) {
      w.i64(v);
    } else {
      w.i32(v);
    }
  }
}

template <typename T>
Status readInts(WireReader& r, const char* what, std::vector<T>* out) {
  static_assert(std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t>);
  uint32_t n = 0;
  ZEN_RETURN_IF_ERROR(r.count(&n, sizeof(T), what));
  out->resize(n);
  for (T& v : *out) {
    if constexpr (sizeof(T) == 8) {
      ZEN_RETURN_IF_ERROR(r.i64(&v));
    } else {
      ZEN_RETURN_IF_ERROR(r.i32(&v));
    }
  }
  return Status::ok();
}

void writeRequest(WireWriter& w, const Request& q) {
  w.i32(q.rank);
  w.str(q.name);
  w.u8(static_cast<uint8_t>(q.op));
  w.u8(static_cast<uint8_t>(q.dtype));
  writeShape(w, q.shape);
  writeDevice(w, q.device);
  w.u8(static_cast<uint8_t>(q.reduceOp));
  w.i32(q.rootRank);
  w.i64(q.rowSize);
  writeInts(w, q.splits);
  w.i32(q.processSet);
  writeInts(w, q.members);
}

Status readRequest(WireReader& r, Request* q) {
  ZEN_RETURN_IF_ERROR(r.i32(&q->rank));
  ZEN_RETURN_IF_ERROR(r.str(&q->name));
  ZEN_RETURN_IF_ERROR(readEnum(r, kNumOpTypes, "op type", &q->op));
  ZEN_RETURN_IF_ERROR(readEnum(r, kNumDataTypes, "dtype", &q->dtype));
  ZEN_RETURN_IF_ERROR(readShape(r, &q->shape));
  ZEN_RETURN_IF_ERROR(readDevice(r, &q->device));
  ZEN_RETURN_IF_ERROR(readEnum(r, kNumReduceOps, "reduce op", &q->reduceOp));
  ZEN_RETURN_IF_ERROR(r.i32(&q->rootRank));
  ZEN_RETURN_IF_ERROR(r.i64(&q->rowSize));
  ZEN_RETURN_IF_ERROR(readInts(r, "alltoall splits", &q->splits));
  ZEN_RETURN_IF_ERROR(r.i32(&q->processSet));
  ZEN_RETURN_IF_ERROR(readInts(r, "process set members", &q->members));
  return Status::ok();
}

void writeResponse(WireWriter& w, const Response& p) {
  w.u8(static_cast<uint8_t>(p.type));
  w.u32(static_cast<uint32_t>(p.tensorNames.size()));
  for (const auto& n : p.tensorNames) w.str(n);
  w.str(p.errorMessage);
  w.u8(static_cast<uint8_t>(p.dtype));
  w.u32(static_cast<uint32_t>(p.devices.size()));
  for (const auto& d : p.devices) writeDevice(w, d);
  w.u8(static_cast<uint8_t>(p.reduceOp));
  w.i32(p.rootRank);
  w.i64(p.rowSize);
  w.u32(static_cast<uint32_t>(p.shapes.size()));
  for (const auto& s : p.shapes) writeShape(w, s);
  writeInts(w, p.gatherRows);
  writeInts(w, p.splits);
  writeInts(w, p.rowOffsets);
  w.i64(p.totalRows);
  w.i32(p.lastJoinedRank);
  w.i32(p.processSet);
  writeInts(w, p.members);
}

Status readResponse(WireReader& r, Response* p) {
  ZEN_RETURN_IF_ERROR(readEnum(r, kNumResponseTypes, "response type", &p->type));
  ZEN_RETURN_IF_ERROR(readStrings(r, &p->tensorNames));
  ZEN_RETURN_IF_ERROR(r.str(&p->errorMessage));
  ZEN_RETURN_IF_ERROR(readEnum(r, kNumDataTypes, "dtype", &p->dtype));
  uint32_t n = 0;
  ZEN_RETURN_IF_ERROR(r.count(&n, kMinDeviceBytes, "devices"));
  p->devices.resize(n);
  for (auto& d : p->devices) ZEN_RETURN_IF_ERROR(readDevice(r, &d));
  ZEN_RETURN_IF_ERROR(readEnum(r, kNumReduceOps, "reduce op", &p->reduceOp));
  ZEN_RETURN_IF_ERROR(r.i32(&p->rootRank));
  ZEN_RETURN_IF_ERROR(r.i64(&p->rowSize));
  ZEN_RETURN_IF_ERROR(r.count(&n, kMinShapeBytes, "shapes"));
  p->shapes.resize(n);
  for (auto& s : p->shapes) ZEN_RETURN_IF_ERROR(readShape(r, &s));
  ZEN_RETURN_IF_ERROR(readInts(r, "gather row counts", &p->gatherRows));
  ZEN_RETURN_IF_ERROR(readInts(r, "alltoall splits", &p->splits));
  ZEN_RETURN_IF_ERROR(readInts(r, "row offsets", &p->rowOffsets));
  ZEN_RETURN_IF_ERROR(r.i64(&p->totalRows));
  ZEN_RETURN_IF_ERROR(r.i32(&p->lastJoinedRank));
  ZEN_RETURN_IF_ERROR(r.i32(&p->processSet));
  ZEN_RETURN_IF_ERROR(readInts(r, "process set members", &p->members));

  // Per-tensor arrays must line up with the names, or an executor would index past them.
  const size_t names = p->tensorNames.size();
  ZEN_CHECK_ARG(p->shapes.empty() || p->shapes.size() == names,
                "response has {} shapes for {} tensors", p->shapes.size(), names);
  ZEN_CHECK_ARG(p->rowOffsets.empty() || p->rowOffsets.size() == names,
                "response has {} row offsets for {} tensors", p->rowOffsets.size(), names);
  ZEN_CHECK_ARG(names == 0 ? p->gatherRows.empty() : p->gatherRows.size() % names == 0,
                "response has {} gather row counts for {} tensors", p->gatherRows.size(), names);
  ZEN_CHECK_ARG(p->splits.empty() || (p->type == ResponseType::kAlltoall && names == 1 &&
                                      p->splits.size() == p->devices.size() * p->devices.size()),
                "response has {} alltoall splits for {} tensors of {} ranks", p->splits.size(),
                names, p->devices.size());
  return Status::ok();
}

}  // namespace

std::vector<uint8_t> encodeRequestList(const RequestList& list) {
  WireWriter w;
  writeHeader(w, Kind::kRequestList);
  w.u8(list.shutdown ? 1 : 0);
  w.u32(static_cast<uint32_t>(list.requests.size()));
  for (const auto& q : list.requests) writeRequest(w, q);
  return w.take();
}

// The cycle time travels as its IEEE bits, so every rank applies exactly rank 0's value.
void writeParameters(WireWriter& w, const std::optional<TunedParameters>& p) {
  w.u8(p ? 1 : 0);
  if (!p) return;
  w.i64(p->fusionThresholdBytes);
  int64_t bits = 0;
  std::memcpy(&bits, &p->cycleTimeMs, sizeof(bits));
  w.i64(bits);
}

Status readParameters(WireReader& r, std::optional<TunedParameters>* out) {
  bool present = false;
  ZEN_RETURN_IF_ERROR(readEnum(r, 2, "parameters flag", &present));
  if (!present) return Status::ok();
  TunedParameters p;
  int64_t bits = 0;
  ZEN_RETURN_IF_ERROR(r.i64(&p.fusionThresholdBytes));
  ZEN_RETURN_IF_ERROR(r.i64(&bits));
  std::memcpy(&p.cycleTimeMs, &bits, sizeof(bits));
  ZEN_CHECK_ARG(p.fusionThresholdBytes >= 0, "negative fusion threshold {} in control message",
                p.fusionThresholdBytes);
  ZEN_CHECK_ARG(std::isfinite(p.cycleTimeMs) && p.cycleTimeMs >= 0,
                "invalid cycle time {} ms in control message", p.cycleTimeMs);
  *out = p;
  return Status::ok();
}

std::vector<uint8_t> encodeResponseList(const ResponseList& list) {
  WireWriter w;
  writeHeader(w, Kind::kResponseList);
  w.u8(list.shutdown ? 1 : 0);
  writeParameters(w, list.parameters);
  w.u32(static_cast<uint32_t>(list.responses.size()));
  for (const auto& p : list.responses) writeResponse(w, p);
  return w.take();
}

Result<RequestList> decodeRequestList(const uint8_t* data, size_t size) {
  WireReader r(data, size);
  ZEN_RETURN_IF_ERROR(readHeader(r, Kind::kRequestList));
  RequestList list;
  ZEN_RETURN_IF_ERROR(readEnum(r, 2, "shutdown flag", &list.shutdown));
  uint32_t n = 0;
  ZEN_RETURN_IF_ERROR(r.count(&n, kMinRequestBytes, "requests"));
  list.requests.resize(n);
  for (auto& q : list.requests) ZEN_RETURN_IF_ERROR(readRequest(r, &q));
  ZEN_RETURN_IF_ERROR(r.expectEnd());
  return list;
}

Result<ResponseList> decodeResponseList(const uint8_t* data, size_t size) {
  WireReader r(data, size);
  ZEN_RETURN_IF_ERROR(readHeader(r, Kind::kResponseList));
  ResponseList list;
  ZEN_RETURN_IF_ERROR(readEnum(r, 2, "shutdown flag", &list.shutdown));
  ZEN_RETURN_IF_ERROR(readParameters(r, &list.parameters));
  uint32_t n = 0;
  ZEN_RETURN_IF_ERROR(r.count(&n, kMinResponseBytes, "responses"));
  list.responses.resize(n);
  for (auto& p : list.responses) ZEN_RETURN_IF_ERROR(readResponse(r, &p));
  ZEN_RETURN_IF_ERROR(r.expectEnd());
  return list;
}

}  // namespace zen
