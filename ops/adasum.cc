// Adasum of a bucket by vector-halving distance-doubling over Transport send/recv
// (ops/adasum.h).
#include "ops/adasum.h"

#include <algorithm>
#include <cstring>

#include "ops/reduce.h"

namespace zen::ops {
namespace {

// Below Transport::kMaxUserTag; collectives run one at a time, so they cannot meet others'.
constexpr uint32_t kTagHalf = 0x3ad1;
constexpr uint32_t kTagPartials = 0x3ad2;
constexpr uint32_t kTagGather = 0x3ad3;

// Per tensor: a·b, ‖a‖², ‖b‖².
constexpr size_t kPartials = 3;

// The bucket's elements as fp64, through the accumulator type (fp32 for 16-bit floats) as the
// other reductions read them.
void widen(const void* in, double* out, size_t count, DataType dtype) {
  dispatchDataType(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(in);
    for (size_t i = 0; i < count; ++i) {
      out[i] = static_cast<double>(toAccumulator<AccumulatorT<T>>(x[i]));
    }
  });
}

// Rounded once into dtype (16-bit floats through fp32).
void narrow(const double* in, void* out, size_t count, DataType dtype) {
  dispatchDataType(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* y = static_cast<T*>(out);
    for (size_t i = 0; i < count; ++i) {
      y[i] = fromAccumulator<T>(static_cast<AccumulatorT<T>>(in[i]));
    }
  });
}

// Sends `sendCount` doubles to peer while receiving `recvCount` from it (both directions at
// once, Transport::sendRecv); *scratch holds the message on its way into recv.
Status exchange(Transport& t,
                int peer,
                const double* send,
                size_t sendCount,
                double* recv,
                size_t recvCount,
                uint32_t tag,
                ByteVector* scratch) {
  ZEN_RETURN_IF_ERROR(t.sendRecv(peer, send, sendCount * sizeof(double), peer, scratch, tag));
  if (scratch->size() != recvCount * sizeof(double)) {
    return ZEN_ERROR(StatusCode::kIoError,
                     "adasum: rank {} sent {} bytes, rank {} expected {} (ranks out of step?)",
                     peer, scratch->size(), t.rank(), recvCount * sizeof(double));
  }
  if (recvCount > 0) std::memcpy(recv, scratch->data(), scratch->size());
  return Status::ok();
}

// One halving level as this rank saw it: the segment it held and the half it kept (the first
// on the lower rank of the pair).
struct Level {
  int peer = 0;
  bool low = true;
  ElementRange held;
  ElementRange kept;
};

class Halving {
 public:
  // x: the fp64 bucket of `total` elements; theirs: room for the larger half of it.
  Halving(Transport& t,
          double* x,
          size_t total,
          double* theirs,
          const std::vector<ElementRange>& tensors)
      : t_(t),
        x_(x),
        total_(total),
        theirs_(theirs),
        tensors_(tensors),
        partials_(tensors.size() * kPartials),
        other_(partials_.size()) {}

  Status run() {
    const int me = t_.rank();
    ElementRange held{0, total_};
    std::vector<Level> levels;
    for (int d = 1; d < t_.size(); d <<= 1) {
      const bool low = (me & d) == 0;
      const size_t mid = held.begin + held.size() / 2;
      const ElementRange kept = low ? ElementRange{held.begin, mid} : ElementRange{mid, held.end};
      const ElementRange given = low ? ElementRange{mid, held.end} : ElementRange{held.begin, mid};
      levels.push_back({me ^ d, low, held, kept});
      ZEN_RETURN_IF_ERROR(exchange(t_, me ^ d, x_ + given.begin, given.size(), theirs_, kept.size(),
                                   kTagHalf, &message_));
      // a is the low subtree's vector on every rank of the group, so the partials add up.
      const double* mine = x_ + kept.begin;
      const double* a = low ? mine : theirs_;
      const double* b = low ? theirs_ : mine;
      computePartials(kept, a, b);
      ZEN_RETURN_IF_ERROR(sumPartials(d));
      combine(kept, a, b);
      held = kept;
    }
    // The allgather: the halving in reverse, each pair swapping the halves it kept.
    for (auto level = levels.rbegin(); level != levels.rend(); ++level) {
      const ElementRange& kept = level->kept;
      const ElementRange other = level->low ? ElementRange{kept.end, level->held.end}
                                            : ElementRange{level->held.begin, kept.begin};
      ZEN_RETURN_IF_ERROR(exchange(t_, level->peer, x_ + kept.begin, kept.size(), x_ + other.begin,
                                   other.size(), kTagGather, &message_));
    }
    return Status::ok();
  }

 private:
  // a and b hold the elements of `kept`.
  void computePartials(const ElementRange& kept, const double* a, const double* b) {
    std::fill(partials_.begin(), partials_.end(), 0.0);
    for (size_t k = 0; k < tensors_.size(); ++k) {
      const size_t begin = std::max(kept.begin, tensors_[k].begin);
      const size_t end = std::min(kept.end, tensors_[k].end);
      double dot = 0, aa = 0, bb = 0;
      for (size_t g = begin; g < end; ++g) {
        const size_t i = g - kept.begin;
        dot += a[i] * b[i];
        aa += a[i] * a[i];
        bb += b[i] * b[i];
      }
      partials_[k * kPartials] = dot;
      partials_[k * kPartials + 1] = aa;
      partials_[k * kPartials + 2] = bb;
    }
  }

  // Sums the partials over the 2d ranks that share this level's vector; x + y == y + x, so
  // every rank of the group ends with the same bits.
  Status sumPartials(int d) {
    for (int k = 1; k <= d; k <<= 1) {
      ZEN_RETURN_IF_ERROR(exchange(t_, t_.rank() ^ k, partials_.data(), partials_.size(),
                                   other_.data(), other_.size(), kTagPartials, &message_));
      for (size_t i = 0; i < partials_.size(); ++i) partials_[i] += other_[i];
    }
    return Status::ok();
  }

  // The kept half becomes ca·a + cb·b, with its tensors' coefficients, in place: a or b is
  // x_'s kept half, and element i is written only after its own a[i] and b[i] were read.
  void combine(const ElementRange& kept, const double* a, const double* b) {
    double* out = x_ + kept.begin;
    for (size_t k = 0; k < tensors_.size(); ++k) {
      const size_t begin = std::max(kept.begin, tensors_[k].begin);
      const size_t end = std::min(kept.end, tensors_[k].end);
      if (begin >= end) continue;
      const double dot = partials_[k * kPartials];
      const double aa = partials_[k * kPartials + 1];
      const double bb = partials_[k * kPartials + 2];
      const double ca = aa == 0 ? 1.0 : 1.0 - dot / (2 * aa);
      const double cb = bb == 0 ? 1.0 : 1.0 - dot / (2 * bb);
      for (size_t g = begin; g < end; ++g) {
        const size_t i = g - kept.begin;
        out[i] = ca * a[i] + cb * b[i];
      }
    }
  }

  Transport& t_;
  double* const x_;
  const size_t total_;
  double* const theirs_;
  const std::vector<ElementRange>& tensors_;
  std::vector<double> partials_;
  std::vector<double> other_;
  ByteVector message_;  // exchange's scratch
};

}  // namespace

Status adasum(const AdasumOptions& o) {
  ZEN_CHECK_ARG(o.transport != nullptr, "adasum: no transport");
  ZEN_CHECK_ARG(o.dtype == DataType::kFloat16 || o.dtype == DataType::kBFloat16 ||
                    o.dtype == DataType::kFloat32 || o.dtype == DataType::kFloat64,
                "adasum: needs a floating-point dtype, not {}", dataTypeName(o.dtype));
  Transport& t = *o.transport;
  const int n = t.size();
  ZEN_CHECK_ARG((n & (n - 1)) == 0, "adasum: needs a power-of-two number of ranks, not {}", n);

  auto start = Clock::now();
  std::vector<ElementRange> ranges;
  size_t total = 0;
  for (const AdasumTensor& x : o.tensors) {
    ranges.push_back({total, total + x.count});
    total += x.count;
  }
  // The bucket, then room for the half received at the first level (the larger one).
  const size_t received = n > 1 ? total - total / 2 : 0;
  std::vector<double> local;
  std::vector<double>& buffer = o.scratch != nullptr ? *o.scratch : local;
  if (buffer.size() < total + received) buffer.resize(total + received);
  for (size_t k = 0; k < o.tensors.size(); ++k) {
    const AdasumTensor& x = o.tensors[k];
    double* to = buffer.data() + ranges[k].begin;
    if (x.input == nullptr) {
      std::fill(to, to + x.count, 0.0);  // joined: adasum(a, 0) = a
    } else {
      widen(x.input, to, x.count, o.dtype);
    }
  }
  if (o.phases) o.phases->push_back({"FUSE", start, Clock::now()});

  start = Clock::now();
  // Every rank has the same total: an empty bucket skips the wire everywhere.
  if (n > 1 && total > 0) {
    ZEN_RETURN_IF_ERROR(Halving(t, buffer.data(), total, buffer.data() + total, ranges).run());
  }
  if (o.phases) o.phases->push_back({"ADASUM", start, Clock::now()});

  start = Clock::now();
  for (size_t k = 0; k < o.tensors.size(); ++k) {
    const AdasumTensor& x = o.tensors[k];
    if (x.output != nullptr) narrow(buffer.data() + ranges[k].begin, x.output, x.count, o.dtype);
  }
  if (o.phases) o.phases->push_back({"UNFUSE", start, Clock::now()});
  return Status::ok();
}

}  // namespace zen::ops
