#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/dtype.h"
#include "core/message.h"

namespace zen::ops {

// The dtype allreduce moves on the wire: 16-bit floats travel and accumulate as fp32 so
// that a sum is rounded once, at the end (never accumulate in fp16/bf16).
DataType wireDataType(DataType dtype);

// acc[i] += in[i] for `count` elements of a wire dtype (fp32, fp64, int32, int64); int32 and
// int64 wrap like two's complement instead of overflowing.
void sumInto(void* acc, const void* in, size_t count, DataType dtype);
// acc[i] = min(acc[i], in[i]) / max / acc[i] * in[i], same dtypes. Products of int32 and int64
// wrap like two's complement. Min and max take in[i] only when it compares strictly
// smaller/larger, so with NaNs the result depends on the order (as MPI's and NCCL's); every rank
// still gets identical bits because each element is reduced once.
void minInto(void* acc, const void* in, size_t count, DataType dtype);
void maxInto(void* acc, const void* in, size_t count, DataType dtype);
void productInto(void* acc, const void* in, size_t count, DataType dtype);
// Dispatches on op: kSum and kAverage sum (the caller divides for an average).
void reduceInto(void* acc, const void* in, size_t count, DataType dtype, ReduceOp op);

// Fills `count` elements of `dtype` (any dtype, 16-bit floats included) with op's identity:
// 0 for sum/average, +inf (largest integer) for min, -inf (lowest integer) for max, 1 for
// product. What a rank without the tensor (joined) contributes.
void fillIdentity(void* data, size_t count, DataType dtype, ReduceOp op);

// A reduction's buffer in its wire dtype (wireDataType): 16-bit floats are widened into an
// fp32 copy on construction and rounded back once by narrow(), so every backend reduces them
// in fp32; the other dtypes are reduced in place (narrow() does nothing).
class WireBuffer {
 public:
  WireBuffer(void* data, size_t count, DataType dtype);
  uint8_t* data() const { return buffer_; }
  DataType dtype() const { return wire_; }
  void narrow();

 private:
  void* original_;
  DataType dtype_;
  DataType wire_;
  std::vector<float> wide_;
  uint8_t* buffer_;
};

// The ring allreduce's chunking: chunk i of n covers elements [begin, end) of `count`; the
// first count % n chunks are one element longer (reducescatter's split, core/message.h).
struct ElementRange {
  size_t begin = 0;
  size_t end = 0;
  size_t size() const { return end - begin; }
};
ElementRange ringChunk(size_t count, int n, int i);

// The ring reduce-scatter over blocks of counts[p] elements (rank p ends with block p): in step
// s = 0..n-2 rank r sends block r-s-1 to its right neighbour, so it sends every block but its
// own once. Bytes rank `rank` sends right (and receives from its left, as much as its left
// neighbour sends): (sum of counts - counts[rank]) · elementSize.
uint64_t ringReducescatterBytesSent(const std::vector<size_t>& counts,
                                    size_t elementSize,
                                    int rank);

// Bytes a rank sends to its right neighbour in a ring allreduce (reduce-scatter into the
// ringChunk blocks, then allgather: in step s rank r passes block r-s on) of `count` elements
// of `elementSize` bytes; it receives what its left neighbour sends. Each chunk moves n-1
// times per phase, so the ranks together send 2(n-1)·count·size.
uint64_t ringAllreduceBytesSent(size_t count, size_t elementSize, int n, int rank);

}  // namespace zen::ops
