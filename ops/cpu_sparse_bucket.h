#pragma once

// A bucket of sparse tensors as one virtual tensor (ARCHITECTURE.md "Data flow of one sparse
// tensor"): tensor i's rows are shifted by Response::rowOffsets[i], so one sparse allreduce
// over Response::totalRows rows serves the bucket; the coalesced result is split back.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/message.h"
#include "core/tensor.h"
#include "core/tensor_queue.h"
#include "core/thread_pool.h"

namespace zen::ops {

class SparseBucket {
 public:
  // The bucket's input on this rank. A single tensor is passed through as it is; otherwise
  // indices and rows are copied into buffers kept across steps. A tensor this rank did not
  // post (joined) adds no rows. An index outside its own tensor's rows would land in a
  // neighbour's range once shifted, so it becomes -1, which the sparse allreduce then
  // reports on every rank; *badIndex says precisely what was wrong (empty when nothing).
  SparseView fuse(const Response& response,
                  const std::vector<TensorEntry*>& entries,
                  std::string* badIndex);

  // Splits the coalesced result (indices ascending, over totalRows) into each present
  // entry's output: its dense output view (large ones in pieces on `pool`, when given), or the
  // handle's SparseTensor.
  static void split(const Response& response,
                    const std::vector<TensorEntry*>& entries,
                    const SparseTensor& result,
                    ThreadPool* pool = nullptr);

 private:
  std::vector<int64_t> indices_;
  std::vector<std::byte> values_;
};

}  // namespace zen::ops
