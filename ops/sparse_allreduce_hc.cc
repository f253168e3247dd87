// Hierarchical Centralization (SparCML: recursive doubling with incremental merge),
// ALGORITHMS.md §2 and §6.
//
// Steps (n ranks, p = the largest power of two <= n, e = n - p extra ranks):
//   0. coalesce: sort this rank's rows by index and sum repeated ones (ops/sparse_rows.h,
//      rounded to the dtype there, as Zen's Push does). From here partial sums are kept and
//      sent in the accumulator type A (fp32 for 16-bit floats, int64 for integers), so the
//      sum over ranks is rounded to the dtype once.
//   1. fold (only when e > 0): extra rank p + i sends its set to rank i, which merges it.
//   2. log2 p doubling steps: in step s rank r < p swaps its merged set with rank r xor 2^s
//      and merges what it gets; afterwards each set covers 2^(s+1) of the p groups.
//   3. unfold (only when e > 0): rank i sends the final set to rank p + i.
//   4. scale (Average: 1/n) and round once to the dtype, into sparse or dense output.
// Every exchange is one Transport::sendRecv between the partners only: full duplex on every
// backend; a rank with no partner in a step skips it.
//
// Encoding: a set travels as COO (16-byte header; per row a 4-byte index, 8 when |G| > 2^32,
// and rowSize A values) until the dense form (header, a ceil(|G| / 8)-byte occupancy bitmap
// that keeps the union of the rows any rank sent, and |G| rows) is no larger. From then on
// the rank stays dense (merged sets only grow), and a dense set received turns a sparse one
// dense: SparCML's dense switch. The encodings and their validating decoder: ops/hc_wire.h.
//
// Bytes sent per rank r < p (k_s = distinct rows of r's set before step s, rowBytes in A):
//   sum_{s=0..log2 p - 1} min(16 + k_s * (indexBytes + rowBytes), 16 + |G| / 8 + |G| * rowBytes)
// = the paper's 2 * sum_i gamma_{2^(i-1)} * d * M (indexBytes = rowBytes), capped by the dense
// size; plus, for ranks i < e, the unfold message (the full result). Extra ranks send their
// own set once and receive the result once.
#include <fmt/format.h>

#include <algorithm>
#include <tuple>
#include <utility>

#include "core/bitmap_popcount.h"
#include "ops/byte_io.h"
#include "ops/hc_wire.h"
#include "ops/sparse_allreduce.h"
#include "ops/sparse_rows.h"

namespace zen::ops {
namespace {

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Ascending unique indices and their rows [size x rowSize].
template <typename V>
struct RowList {
  std::vector<int64_t> indices;
  std::vector<V> values;

  void clear() {
    indices.clear();
    values.clear();
  }
};

// A merged set's memory in accumulator type A; cleared between calls, never shrunk.
template <typename A>
struct SetMemory {
  RowList<A> sparse;
  RowList<A> merged;           // mergeSparse's output, swapped with sparse
  std::vector<A> denseValues;  // [numRows x rowSize] when dense
  std::vector<uint64_t> bits;  // occupancy, bit r = row r, when dense
};

}  // namespace

// The hc scheme's memory, kept across calls (SparseAllreduceWorkspace::hc()) so that a
// steady-state call allocates nothing of its own: one set's memory per accumulator type.
struct SparseAllreduceWorkspace::Hc {
  SparseTensor coalesced;  // the input's rows, before they are widened into the set
  ByteVector out;
  ByteVector in;
  std::tuple<SetMemory<float>, SetMemory<double>, SetMemory<int64_t>> sets;
};

SparseAllreduceWorkspace::Hc& SparseAllreduceWorkspace::hc() {
  if (hc_ == nullptr) hc_.reset(new Hc());
  return *hc_;
}

void SparseAllreduceWorkspace::Release::operator()(Hc* hc) const {
  delete hc;
}

namespace {

using Hc = SparseAllreduceWorkspace::Hc;

// One rank's merged set, sparse (ascending rows) or dense (all rows plus occupancy bits), in
// the memory `ws` keeps.
template <typename T>
class MergedSet {
 public:
  using A = AccumulatorT<T>;
  using Rows = RowList<A>;

  MergedSet(int64_t numRows, int64_t rowSize, Hc* ws)
      : numRows_(numRows),
        rowSize_(rowSize),
        format_{numRows, rowSize, sizeof(A)},
        bitmapBytes_(format_.bitmapBytes()),
        coalesced_(ws->coalesced),
        memory_(std::get<SetMemory<A>>(ws->sets)),
        sparse_(memory_.sparse),
        merged_(memory_.merged),
        denseValues_(memory_.denseValues),
        bits_(memory_.bits) {
    sparse_.clear();
    merged_.clear();
    denseValues_.clear();
    bits_.clear();
  }

  Status start(const SparseView& input, CoalesceScratch* scratch) {
    ZEN_RETURN_IF_ERROR(coalesceRows({input}, 1, &coalesced_, scratch));
    const T* values = reinterpret_cast<const T*>(coalesced_.values.data());
    sparse_.values.resize(coalesced_.indices.size() * static_cast<size_t>(rowSize_));
    std::transform(values, values + sparse_.values.size(), sparse_.values.begin(),
                   [](T v) { return toAccumulator<A>(v); });
    sparse_.indices.assign(coalesced_.indices.begin(), coalesced_.indices.end());
    return Status::ok();
  }

  bool dense() const { return dense_; }
  int64_t rows() const {
    if (!dense_) return static_cast<int64_t>(sparse_.indices.size());
    return static_cast<int64_t>(bitmapPopcount(bits_.data(), bits_.size() * sizeof(uint64_t)));
  }

  // Serializes the set in the smaller form, switching this rank to dense if that is it.
  void encode(ByteVector* out) {
    if (!dense_ && format_.denseBytes() <= format_.sparseBytes(sparse_.indices.size())) {
      makeDense();
    }
    if (dense_) {
      encodeHcDense(format_, bits_.data(), denseValues_.data(), out);
    } else {
      encodeHcSparse(format_, sparse_.indices.data(), sparse_.values.data(), sparse_.indices.size(),
                     out);
    }
  }

  // Adds a peer's encoded set to this one (replace: take it as the result instead). The whole
  // message is validated before any of it is read.
  Status merge(const ByteVector& msg, int peer, bool replace) {
    const Result<HcSetView> decoded = decodeHcSet(msg.data(), msg.size(), format_);
    if (!decoded.isOk()) {
      return ZEN_ERROR(StatusCode::kIoError, "hc: corrupt set from rank {}: {}", peer,
                       decoded.status().message());
    }
    const HcSetView& m = decoded.value();
    if (replace) {
      dense_ = false;
      sparse_.clear();
      denseValues_.clear();
      bits_.clear();
    }
    if (m.dense) {
      if (!dense_) makeDense();
      for (size_t b = 0; b < bitmapBytes_; ++b)
        bits_[b / 8] |= uint64_t{m.bitmap[b]} << (8 * (b % 8));
      for (size_t i = 0; i < denseValues_.size(); ++i) denseValues_[i] += loadAt<A>(m.values, i);
    } else if (dense_) {
      for (uint64_t k = 0; k < m.count; ++k) {
        const int64_t index = m.index(k);
        bits_[index / 64] |= uint64_t{1} << (index % 64);
        A* dst = denseValues_.data() + index * rowSize_;
        for (int64_t e = 0; e < rowSize_; ++e) dst[e] += loadAt<A>(m.values, k * rowSize_ + e);
      }
    } else {
      mergeSparse(m);
    }
    return Status::ok();
  }

  // Divides (Average: by n), rounds once and writes the set into `dense` (zeroed unless the set
  // is dense, which writes every row), or into the result's sparse output when that is null.
  void output(int divisor, const DenseRows* dense, SparseAllreduceResult* result) const {
    const size_t rowElems = static_cast<size_t>(rowSize_);
    if (dense != nullptr) {
      if (dense_) {
        for (const DensePiece& piece : dense->pieces()) {
          T* out = reinterpret_cast<T*>(piece.data);
          for (int64_t r = 0; r < piece.rows; ++r) {
            finishRow<T>(denseValues_.data() + (piece.firstRow + r) * rowSize_, rowSize_, divisor,
                         out + r * rowSize_);
          }
        }
      } else {
        for (size_t k = 0; k < sparse_.indices.size(); ++k) {
          finishRow<T>(sparse_.values.data() + k * rowElems, rowSize_, divisor,
                       reinterpret_cast<T*>(dense->row(sparse_.indices[k])));
        }
      }
      return;
    }
    SparseTensor& s = result->sparse;
    if (!dense_) {
      s.indices = sparse_.indices;
    } else {
      s.indices.clear();
      for (size_t w = 0; w < bits_.size(); ++w) {
        for (uint64_t m = bits_[w]; m != 0; m &= m - 1) {
          s.indices.push_back(static_cast<int64_t>(w * 64) + __builtin_ctzll(m));
        }
      }
    }
    s.values.resize(s.indices.size() * rowElems * sizeof(T));
    T* out = reinterpret_cast<T*>(s.values.data());
    for (size_t k = 0; k < s.indices.size(); ++k) {
      const A* src = dense_ ? denseValues_.data() + s.indices[k] * rowSize_
                            : sparse_.values.data() + k * rowElems;
      finishRow<T>(src, rowSize_, divisor, out + k * rowElems);
    }
  }

 private:
  // Two ascending row lists into one; rows present in both are summed.
  void mergeSparse(const HcSetView& m) {
    const size_t rowElems = static_cast<size_t>(rowSize_);
    const size_t mine = sparse_.indices.size();
    merged_.indices.resize(mine + m.count);
    merged_.values.resize((mine + m.count) * rowElems);
    size_t i = 0;
    uint64_t k = 0;
    size_t w = 0;
    for (; i < mine || k < m.count; ++w) {
      const int64_t a = i < mine ? sparse_.indices[i] : numRows_;
      const int64_t b = k < m.count ? m.index(k) : numRows_;
      const int64_t index = std::min(a, b);
      merged_.indices[w] = index;
      A* dst = merged_.values.data() + w * rowElems;
      if (a == index) {
        std::copy_n(sparse_.values.data() + i * rowElems, rowElems, dst);
        ++i;
      } else {
        std::fill_n(dst, rowElems, A{0});
      }
      if (b == index) {
        for (size_t e = 0; e < rowElems; ++e) dst[e] += loadAt<A>(m.values, k * rowElems + e);
        ++k;
      }
    }
    merged_.indices.resize(w);
    merged_.values.resize(w * rowElems);
    std::swap(sparse_, merged_);
  }

  void makeDense() {
    denseValues_.assign(static_cast<size_t>(numRows_ * rowSize_), A{0});
    bits_.assign(static_cast<size_t>((numRows_ + 63) / 64), 0);
    for (size_t k = 0; k < sparse_.indices.size(); ++k) {
      const int64_t index = sparse_.indices[k];
      bits_[index / 64] |= uint64_t{1} << (index % 64);
      std::copy_n(sparse_.values.begin() + k * rowSize_, rowSize_,
                  denseValues_.begin() + index * rowSize_);
    }
    sparse_.clear();
    dense_ = true;
  }

  const int64_t numRows_;
  const int64_t rowSize_;
  const HcSetFormat format_;
  const size_t bitmapBytes_;
  bool dense_ = false;
  SparseTensor& coalesced_;
  SetMemory<A>& memory_;
  Rows& sparse_;
  Rows& merged_;
  std::vector<A>& denseValues_;
  std::vector<uint64_t>& bits_;
};

template <typename T>
Status runHc(const SparseAllreduceOptions& options, SparseAllreduceResult* result) {
  Transport& t = *options.transport;
  const int n = t.size();
  const int rank = t.rank();
  int p = 1;
  while (p * 2 <= n) p *= 2;
  const int extras = n - p;
  std::vector<std::pair<std::string, double>>& phases = result->stats.phases;

  auto start = Clock::now();
  Hc local;  // without a workspace the memory is per call
  Hc& ws = options.workspace != nullptr ? options.workspace->hc() : local;
  MergedSet<T> set(options.input.numRows, options.input.rowSize, &ws);
  ZEN_RETURN_IF_ERROR(set.start(options.input, coalesceScratch(options)));
  phases.emplace_back("coalesce", secondsSince(start));

  ByteVector& out = ws.out;
  ByteVector& in = ws.in;
  // One exchange step; the phase name records the form this rank sent ("recv": it only
  // received, "idle": an extra rank waiting out a doubling step).
  auto step = [&](const std::string& name, int to, int from, bool replace) -> Status {
    start = Clock::now();
    out.clear();
    const char* form = from >= 0 ? "recv" : "idle";
    if (to >= 0) {
      set.encode(&out);
      form = set.dense() ? "dense" : "sparse";
    }
    if (to >= 0 || from >= 0)
      ZEN_RETURN_IF_ERROR(t.sendRecv(to, out.data(), out.size(), from, &in, kHcTag));
    if (from >= 0) ZEN_RETURN_IF_ERROR(set.merge(in, from, replace));
    phases.emplace_back(fmt::format("{} {}", name, form), secondsSince(start));
    return Status::ok();
  };

  const bool extra = rank >= p;
  if (extras > 0) {
    ZEN_RETURN_IF_ERROR(
        step("fold", extra ? rank - p : -1, !extra && rank < extras ? rank + p : -1, false));
  }
  for (int mask = 1, s = 1; mask < p; mask <<= 1, ++s) {
    const int partner = extra ? -1 : rank ^ mask;
    ZEN_RETURN_IF_ERROR(step(fmt::format("step {}", s), partner, partner, false));
  }
  if (extras > 0) {
    ZEN_RETURN_IF_ERROR(
        step("unfold", !extra && rank < extras ? rank + p : -1, extra ? rank - p : -1, true));
  }

  start = Clock::now();
  // emptyLike's shape, keeping the buffers' capacity as the dispatcher does.
  SparseTensor& sparse = result->sparse;
  sparse.numRows = options.input.numRows;
  sparse.rowSize = options.input.rowSize;
  sparse.dtype = options.input.dtype;
  sparse.indices.clear();
  sparse.values.clear();
  DenseRows dense;
  if (options.denseOutput) {
    dense = set.dense() ? denseOutputRows(options, result) : zeroedDenseOutput(options, result);
  }
  set.output(options.op == ReduceOp::kAverage ? n : 1, options.denseOutput ? &dense : nullptr,
             result);
  result->stats.outputNnz = set.rows();
  phases.emplace_back("output", secondsSince(start));
  return Status::ok();
}

}  // namespace

Status sparseAllreduceHc(const SparseAllreduceOptions& options, SparseAllreduceResult* result) {
  // The dispatcher fills bytes, seconds and the scheme around this call.
  return dispatchDataType(options.input.dtype,
                          [&](auto tag) { return runHc<decltype(tag)>(options, result); });
}

}  // namespace zen::ops
