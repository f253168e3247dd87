// Adasum of a bucket by vector-halving distance-doubling over Transport send/recv
// (ops/adasum.h).
#include "ops/adasum.h"

#include <algorithm>
#include <type_traits>

namespace zen::ops {
namespace {

// Below Transport::kMaxUserTag; collectives run one at a time, so they cannot meet others'.
constexpr uint32_t kTagHalf = 0x3ad1;
constexpr uint32_t kTagPartials = 0x3ad2;
constexpr uint32_t kTagGather = 0x3ad3;

// Per tensor: a·b, ‖a‖², ‖b‖².
constexpr size_t kPartials = 3;

template <typename T>
void widenTyped(const void* in, double* out, size_t count) {
  const T* x = static_cast<const T*>(in);
  for (size_t i = 0; i < count; ++i) {
    if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
      out[i] = static_cast<double>(toFloat(x[i]));
    } else {
      out[i] = static_cast<double>(x[i]);
    }
  }
}

template <typename T>
void narrowTyped(const double* in, void* out, size_t count) {
  T* y = static_cast<T*>(out);
  for (size_t i = 0; i < count; ++i) {
    if constexpr (std::is_same_v<T, Half>) {
      y[i] = toHalf(static_cast<float>(in[i]));
    } else if constexpr (std::is_same_v<T, BFloat16>) {
      y[i] = toBFloat16(static_cast<float>(in[i]));
    } else {
      y[i] = static_cast<T>(in[i]);
    }
  }
}

void widen(const void* in, double* out, size_t count, DataType dtype) {
  switch (dtype) {
    case DataType::kFloat16:
      return widenTyped<Half>(in, out, count);
    case DataType::kBFloat16:
      return widenTyped<BFloat16>(in, out, count);
    case DataType::kFloat32:
      return widenTyped<float>(in, out, count);
    default:
      return widenTyped<double>(in, out, count);
  }
}

void narrow(const double* in, void* out, size_t count, DataType dtype) {
  switch (dtype) {
    case DataType::kFloat16:
      return narrowTyped<Half>(in, out, count);
    case DataType::kBFloat16:
      return narrowTyped<BFloat16>(in, out, count);
    case DataType::kFloat32:
      return narrowTyped<float>(in, out, count);
    default:
      return narrowTyped<double>(in, out, count);
  }
}

// Sends `sendCount` doubles to peer and receives `recvCount` from it; the lower rank sends
// first, so a backend whose send waits for the matching receive (MPI) cannot deadlock.
Status exchange(Transport& t,
                int peer,
                const double* send,
                size_t sendCount,
                double* recv,
                size_t recvCount,
                uint32_t tag) {
  if (t.rank() < peer) {
    ZEN_RETURN_IF_ERROR(t.send(peer, send, sendCount * sizeof(double), tag));
    return t.recv(peer, recv, recvCount * sizeof(double), tag);
  }
  ZEN_RETURN_IF_ERROR(t.recv(peer, recv, recvCount * sizeof(double), tag));
  return t.send(peer, send, sendCount * sizeof(double), tag);
}

struct Range {
  size_t begin = 0;
  size_t end = 0;
  size_t size() const { return end - begin; }
};

// One halving level as this rank saw it: the segment it held and the half it kept (the first
// on the lower rank of the pair).
struct Level {
  int peer = 0;
  bool low = true;
  Range held;
  Range kept;
};

class Halving {
 public:
  Halving(Transport& t, std::vector<double>& x, const std::vector<Range>& tensors)
      : t_(t),
        x_(x),
        tensors_(tensors),
        partials_(tensors.size() * kPartials),
        other_(partials_.size()) {}

  Status run() {
    const int me = t_.rank();
    Range held{0, x_.size()};
    std::vector<Level> levels;
    for (int d = 1; d < t_.size(); d <<= 1) {
      const bool low = (me & d) == 0;
      const size_t mid = held.begin + held.size() / 2;
      const Range kept = low ? Range{held.begin, mid} : Range{mid, held.end};
      const Range given = low ? Range{mid, held.end} : Range{held.begin, mid};
      levels.push_back({me ^ d, low, held, kept});
      theirs_.resize(kept.size());
      ZEN_RETURN_IF_ERROR(exchange(t_, me ^ d, x_.data() + given.begin, given.size(),
                                   theirs_.data(), kept.size(), kTagHalf));
      // a is the low subtree's vector on every rank of the group, so the partials add up.
      const double* mine = x_.data() + kept.begin;
      const double* a = low ? mine : theirs_.data();
      const double* b = low ? theirs_.data() : mine;
      computePartials(kept, a, b);
      ZEN_RETURN_IF_ERROR(sumPartials(d));
      combine(kept, a, b);
      held = kept;
    }
    // The allgather: the halving in reverse, each pair swapping the halves it kept.
    for (auto level = levels.rbegin(); level != levels.rend(); ++level) {
      const Range& kept = level->kept;
      const Range other =
          level->low ? Range{kept.end, level->held.end} : Range{level->held.begin, kept.begin};
      ZEN_RETURN_IF_ERROR(exchange(t_, level->peer, x_.data() + kept.begin, kept.size(),
                                   x_.data() + other.begin, other.size(), kTagGather));
    }
    return Status::ok();
  }

 private:
  // a and b hold the elements of `kept`.
  void computePartials(const Range& kept, const double* a, const double* b) {
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
                                   other_.data(), other_.size(), kTagPartials));
      for (size_t i = 0; i < partials_.size(); ++i) partials_[i] += other_[i];
    }
    return Status::ok();
  }

  // The kept half becomes ca·a + cb·b, with its tensors' coefficients.
  void combine(const Range& kept, const double* a, const double* b) {
    combined_.resize(kept.size());
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
        combined_[i] = ca * a[i] + cb * b[i];
      }
    }
    // a or b points into x_: write back only once both were read.
    std::copy(combined_.begin(), combined_.end(), x_.begin() + static_cast<ptrdiff_t>(kept.begin));
  }

  Transport& t_;
  std::vector<double>& x_;
  const std::vector<Range>& tensors_;
  std::vector<double> partials_;
  std::vector<double> other_;
  std::vector<double> theirs_;
  std::vector<double> combined_;
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
  std::vector<Range> ranges;
  size_t total = 0;
  for (const AdasumTensor& x : o.tensors) {
    ranges.push_back({total, total + x.count});
    total += x.count;
  }
  std::vector<double> local;
  std::vector<double>& buffer = o.scratch != nullptr ? *o.scratch : local;
  buffer.resize(total);
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
  if (n > 1 && total > 0) ZEN_RETURN_IF_ERROR(Halving(t, buffer, ranges).run());
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
