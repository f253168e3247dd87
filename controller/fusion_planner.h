#pragma once

// Tensor fusion (Horovod's FuseResponses): greedy, in the global order, merges ready
// single-tensor responses into buckets of the same process set, op, dtype, devices, reduce op
// and (sparse) row size, while the bucket's dense bytes stay within the threshold
// (ZEN_FUSION_THRESHOLD, 128 MiB by default; a larger tensor goes alone; 0 disables fusion). Like
// Horovod it looks ahead past responses that do not match (mixed precision interleaves fp16 and
// fp32) as long as fused plus skipped bytes stay within the threshold; the skipped ones keep their
// order.
//
// A sparse bucket is one virtual tensor: the tensors' index spaces are concatenated, tensor i
// starting at rowOffsets[i], totalRows in all, so one Push/Pull serves the whole bucket.
// Reducescatters fuse like allreduces (same dtype, devices and reduce op): the executor lays
// every tensor's piece for rank p in rank p's block, one reduce-scatter serves the bucket.
// Alltoalls are never fused (as in Horovod): each carries its own splits.

#include <cstdint>
#include <vector>

#include "core/message.h"

namespace zen::controller {

// Responses of these types may share a bucket; alltoalls, broadcasts, joins, barriers,
// errors and process set registrations never do.
bool isFusible(ResponseType type);

// Dense bytes of all of a response's tensors.
int64_t responseBytes(const Response& response);

std::vector<Response> fuseResponses(std::vector<Response> responses, int64_t thresholdBytes);

}  // namespace zen::controller
