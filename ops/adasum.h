#pragma once

// Horovod's Adasum allreduce on the CPU (Maleki et al., "Scaling Distributed Training with
// Adaptive Summation", MLSys 2021), for one tensor or a fused bucket of them. Two vectors
// combine as
//   adasum(a, b) = (1 - a·b / (2‖a‖²)) a + (1 - a·b / (2‖b‖²)) b
// (a coefficient is 1 when its vector is zero, so adasum(a, 0) = a), over the ranks as a binary
// tree: level 1 combines ranks (0,1), (2,3), ...; level 2 those results pairwise, and so on.
// Dot products and norms are per tensor, also inside a fused bucket. Needs a power-of-two
// number of ranks; computes in fp64 (16-bit and fp32 inputs are widened once and rounded once).
//
// Steps (vector-halving distance-doubling, as Horovod's CPU Adasum):
//   1. FUSE: every tensor widened to fp64, back to back (a rank without a tensor, joined,
//      contributes zeros: the identity).
//   2. HALVING, levels l = 0 .. log2(n)-1, distance d = 2^l, partner rank ^ d: the pair holds
//      the same segment of its two subtrees' vectors (a: the side whose rank has bit l clear,
//      b: the other); the lower rank keeps the first half (the shorter one when odd), the upper
//      the second, and each sends the other half to its partner. Each rank computes a·b, ‖a‖²,
//      ‖b‖² per tensor on its half; those partials are summed over the 2d ranks sharing the
//      vector (recursive doubling with ranks ^ 1, ^ 2, ... ^ d: identical bits on all of them),
//      and every rank updates its half with its tensors' coefficients.
//   3. ALLGATHER: the halving in reverse, partners swap their halves, so every rank ends with
//      the whole result, each element computed by one rank: identical bits everywhere.
//   4. UNFUSE: rounded once into each output's dtype.
// Bytes on the wire per rank for N elements and T tensors: (1 - 1/n)·8N sent in the halving
// and as much in the allgather, 2(n-1)/n·8N in all as a ring allreduce of fp64, plus
// 24T·(1 + 2 + ... + log2 n) bytes of partials. Each pairwise exchange is ordered (the lower
// rank sends first) so that a backend whose send waits for the receiver cannot deadlock.

#include <cstddef>
#include <vector>

#include "core/dtype.h"
#include "core/executor.h"
#include "core/status.h"
#include "ops/transport.h"

namespace zen::ops {

// One tensor of the bucket; count is the same on every rank.
struct AdasumTensor {
  const void* input = nullptr;  // count elements; null: this rank contributes zeros (joined)
  void* output = nullptr;       // the result, count elements; null: not kept
  size_t count = 0;
};

struct AdasumOptions {
  Transport* transport = nullptr;            // size() a power of two
  std::vector<AdasumTensor> tensors;         // the same order on every rank
  DataType dtype = DataType::kFloat32;       // float16, bfloat16, float32 or float64
  std::vector<double>* scratch = nullptr;    // the fp64 bucket and the half received (1.5x
                                             // its elements), grown as needed (null: per call)
  std::vector<ExecPhase>* phases = nullptr;  // optional: FUSE, ADASUM, UNFUSE
};

Status adasum(const AdasumOptions& options);

}  // namespace zen::ops
