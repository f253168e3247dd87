// Greedy fusion of ready responses into buckets (controller/fusion_planner.h).

#include "controller/fusion_planner.h"

#include <deque>
#include <utility>

namespace zen::controller {
namespace {

bool fitsTogether(const Response& a, const Response& b) {
  // Different process sets run over different ranks: never one bucket, even when their
  // devices (indexed by rank within the set) happen to match.
  if (a.type != b.type || a.processSet != b.processSet || a.dtype != b.dtype ||
      a.devices != b.devices) {
    return false;
  }
  if (a.type == ResponseType::kAllgather) return true;
  if (a.reduceOp != b.reduceOp) return false;
  return a.type != ResponseType::kSparseAllreduce || a.rowSize == b.rowSize;
}

void append(Response* bucket, Response&& next) {
  for (auto& name : next.tensorNames) bucket->tensorNames.push_back(std::move(name));
  for (auto& shape : next.shapes) bucket->shapes.push_back(std::move(shape));
  bucket->gatherRows.insert(bucket->gatherRows.end(), next.gatherRows.begin(),
                            next.gatherRows.end());
}

// Concatenated index spaces: each tensor's rows follow the rows of those before it.
void setRowOffsets(Response* r) {
  r->rowOffsets.clear();
  int64_t rows = 0;
  for (const auto& shape : r->shapes) {
    r->rowOffsets.push_back(rows);
    rows += shape.numRows();
  }
  r->totalRows = rows;
}

}  // namespace

bool isFusible(ResponseType type) {
  return type == ResponseType::kAllreduce || type == ResponseType::kSparseAllreduce ||
         type == ResponseType::kAllgather || type == ResponseType::kReducescatter;
}

int64_t responseBytes(const Response& response) {
  int64_t bytes = 0;
  for (size_t i = 0; i < response.shapes.size(); ++i) bytes += denseBytes(response, i);
  return bytes;
}

std::vector<Response> fuseResponses(std::vector<Response> responses, int64_t thresholdBytes) {
  std::deque<Response> queue(std::make_move_iterator(responses.begin()),
                             std::make_move_iterator(responses.end()));
  std::vector<Response> out;
  while (!queue.empty()) {
    Response bucket = std::move(queue.front());
    queue.pop_front();
    if (isFusible(bucket.type) && thresholdBytes > 0) {
      int64_t fused = responseBytes(bucket);
      int64_t skipped = 0;
      std::deque<Response> skippedResponses;
      while (!queue.empty()) {
        Response& next = queue.front();
        const int64_t bytes = responseBytes(next);
        if (fitsTogether(bucket, next) && fused + bytes <= thresholdBytes) {
          fused += bytes;
          append(&bucket, std::move(next));
          queue.pop_front();
        } else {
          // Look ahead past a mismatch only while the wait it may cause stays within one
          // bucket's worth of bytes.
          skipped += bytes;
          if (fused + skipped > thresholdBytes) break;
          skippedResponses.push_back(std::move(next));
          queue.pop_front();
        }
      }
      while (!skippedResponses.empty()) {
        queue.push_front(std::move(skippedResponses.back()));
        skippedResponses.pop_back();
      }
    }
    if (bucket.type == ResponseType::kSparseAllreduce) setRowOffsets(&bucket);
    out.push_back(std::move(bucket));
  }
  return out;
}

}  // namespace zen::controller
