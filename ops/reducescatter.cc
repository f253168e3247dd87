// Reducescatter of a bucket over Transport::reducescatter (ops/reducescatter.h).
#include "ops/reducescatter.h"

#include <cstring>

#include "ops/reduce.h"
#include "ops/sparse_rows.h"

namespace zen::ops {

ElementRange scatterPiece(const ReducescatterTensor& x, int size, int rank) {
  ElementRange r;
  r.begin = static_cast<size_t>(scatterOffset(x.rows, size, rank) * x.rowElements);
  r.end = r.begin + static_cast<size_t>(scatterRows(x.rows, size, rank) * x.rowElements);
  return r;
}

std::vector<size_t> scatterBlocks(const std::vector<ReducescatterTensor>& tensors, int size) {
  std::vector<size_t> blocks(static_cast<size_t>(size), 0);
  for (int p = 0; p < size; ++p) {
    for (const ReducescatterTensor& x : tensors) blocks[p] += scatterPiece(x, size, p).size();
  }
  return blocks;
}

Status reducescatter(const ReducescatterOptions& o) {
  ZEN_CHECK_ARG(o.transport != nullptr, "reducescatter: no transport");
  ZEN_CHECK_ARG(o.dtype <= DataType::kInt64, "reducescatter: unknown dtype code {}",
                static_cast<int>(o.dtype));
  ZEN_CHECK_ARG(static_cast<int>(o.op) < kNumReduceOps, "reducescatter: unknown op code {}",
                static_cast<int>(o.op));
  Transport& t = *o.transport;
  const int n = t.size();
  const int me = t.rank();
  const size_t width = dataTypeSize(o.dtype);
  for (const ReducescatterTensor& x : o.tensors) {
    ZEN_CHECK_ARG(x.rows >= 0 && x.rowElements >= 0, "reducescatter: a tensor of {} rows of {}",
                  x.rows, x.rowElements);
  }
  const std::vector<size_t> counts = scatterBlocks(o.tensors, n);
  size_t total = 0;
  std::vector<size_t> blockBegin;
  for (size_t c : counts) {
    blockBegin.push_back(total);
    total += c;
  }

  auto start = Clock::now();
  std::vector<std::byte> local;
  std::vector<std::byte>& buffer = o.scratch != nullptr ? *o.scratch : local;
  if (buffer.size() < total * width) buffer.resize(total * width);
  std::vector<size_t> cursor = blockBegin;
  for (const ReducescatterTensor& x : o.tensors) {
    for (int p = 0; p < n; ++p) {
      const ElementRange piece = scatterPiece(x, n, p);
      const size_t count = piece.size();
      std::byte* to = buffer.data() + cursor[p] * width;
      if (x.input == nullptr) {
        fillIdentity(to, count, o.dtype, o.op);
      } else if (count > 0) {
        std::memcpy(to, static_cast<const std::byte*>(x.input) + piece.begin * width,
                    count * width);
      }
      cursor[p] += count;
    }
  }
  if (o.phases) o.phases->push_back({"FUSE", start, Clock::now()});

  start = Clock::now();
  std::byte* mine = buffer.data() + blockBegin[me] * width;
  if (n > 1) {
    const ReduceOp op = o.op == ReduceOp::kAverage ? ReduceOp::kSum : o.op;
    ZEN_RETURN_IF_ERROR(t.reducescatter(buffer.data(), counts, o.dtype, op));
  }
  if (o.op == ReduceOp::kAverage) divideInPlace(mine, counts[me], o.dtype, n);
  if (o.phases) o.phases->push_back({wirePhaseName(t, "reducescatter"), start, Clock::now()});

  start = Clock::now();
  size_t at = 0;
  for (const ReducescatterTensor& x : o.tensors) {
    const size_t bytes = scatterPiece(x, n, me).size() * width;
    if (x.output != nullptr && bytes > 0) std::memcpy(x.output, mine + at, bytes);
    at += bytes;
  }
  if (o.phases) o.phases->push_back({"UNFUSE", start, Clock::now()});
  return Status::ok();
}

}  // namespace zen::ops
