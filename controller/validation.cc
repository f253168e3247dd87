// Ready table entry -> Response or a precise error Response (controller/validation.h).

#include "controller/validation.h"

#include <fmt/format.h>

#include <functional>
#include <optional>
#include <utility>

namespace zen::controller {
namespace {

bool isReduction(OpType op) {
  return op == OpType::kAllreduce || op == OpType::kSparseAllreduce;
}

// Shape everything after the first dimension, which allgather lets differ.
std::string trailingDims(const Request& q) {
  if (q.shape.rank() == 0) return "scalar";
  std::vector<int64_t> rest(q.shape.dims().begin() + 1, q.shape.dims().end());
  return fmt::format("{}:{}", q.shape.rank(), TensorShape(rest).toString());
}

struct Field {
  const char* what;                                  // "dtype", "dense shape", ...
  std::function<std::string(const Request&)> key;    // what must agree
  std::function<std::string(const Request&)> shown;  // what the message prints
};

// Groups the posters by field value; when they disagree, says who sent what, the groups that
// differ from the lowest poster first and that poster's group last.
std::optional<std::string> disagreement(const std::string& name,
                                        const std::vector<const Request*>& posters,
                                        const Field& field) {
  std::vector<std::pair<std::string, std::vector<int>>> groups;  // key -> ranks, first-seen
  std::vector<std::string> shown;
  for (const Request* q : posters) {
    const std::string key = field.key(*q);
    size_t g = 0;
    while (g < groups.size() && groups[g].first != key) ++g;
    if (g == groups.size()) {
      groups.emplace_back(key, std::vector<int>{});
      shown.push_back(field.shown(*q));
    }
    groups[g].second.push_back(q->rank);
  }
  if (groups.size() <= 1) return std::nullopt;
  std::string msg = fmt::format("tensor '{}': {} sent {} {}", name, formatRanks(groups[1].second),
                                field.what, shown[1]);
  for (size_t g = 2; g < groups.size(); ++g) {
    msg += fmt::format(", {} {}", formatRanks(groups[g].second), shown[g]);
  }
  msg += fmt::format(", {} {}", formatRanks(groups[0].second), shown[0]);
  return msg;
}

std::string deviceKind(const Request& q) {
  return q.device.kind == Device::Kind::kCpu ? "cpu" : "cuda";
}

std::optional<std::string> firstDisagreement(const std::string& name,
                                             const std::vector<const Request*>& posters) {
  const OpType op = posters.front()->op;
  std::vector<Field> fields = {
      {"op", [](const Request& q) { return std::string(opTypeName(q.op)); },
       [](const Request& q) { return std::string(opTypeName(q.op)); }},
      {"dtype", [](const Request& q) { return std::string(dataTypeName(q.dtype)); },
       [](const Request& q) { return std::string(dataTypeName(q.dtype)); }},
      {"device kind", deviceKind, deviceKind},
  };
  const auto shapeText = [](const Request& q) { return q.shape.toString(); };
  if (op == OpType::kAllgather) {
    fields.push_back({"shape (all dimensions but the first must match)", trailingDims, shapeText});
  } else if (op != OpType::kBarrier) {
    fields.push_back({"dense shape", shapeText, shapeText});
  }
  if (isReduction(op)) {
    fields.push_back({"reduce op",
                      [](const Request& q) { return std::string(reduceOpName(q.reduceOp)); },
                      [](const Request& q) { return std::string(reduceOpName(q.reduceOp)); }});
  }
  if (op == OpType::kSparseAllreduce) {
    const auto rowSize = [](const Request& q) { return std::to_string(q.rowSize); };
    fields.push_back({"row size", rowSize, rowSize});
  }
  if (op == OpType::kBroadcast) {
    const auto root = [](const Request& q) { return std::to_string(q.rootRank); };
    fields.push_back({"root rank", root, root});
  }
  // Op first: when ops differ, the other fields' differences are only a symptom.
  for (const Field& f : fields) {
    if (auto msg = disagreement(name, posters, f)) return msg;
  }
  return std::nullopt;
}

}  // namespace

std::string formatRanks(const std::vector<int>& ranks) {
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (i > 0) out += ", ";
    out += j == i ? fmt::format("{}", ranks[i]) : fmt::format("{}-{}", ranks[i], ranks[j]);
    i = j + 1;
  }
  return out;
}

Status checkRequest(const Request& q, int size) {
  ZEN_CHECK_ARG(q.rank >= 0 && q.rank < size, "tensor '{}': rank {} outside [0, {})", q.name,
                q.rank, size);
  ZEN_CHECK_ARG(!q.name.empty(), "a {} request needs a tensor name", opTypeName(q.op));
  switch (q.op) {
    case OpType::kSparseAllreduce:
      ZEN_CHECK_ARG(q.shape.rank() >= 1,
                    "tensor '{}': a sparse tensor needs a dense shape [rows, ...], got {}", q.name,
                    q.shape.toString());
      ZEN_CHECK_ARG(q.rowSize >= 1 && q.rowSize == q.shape.rowSize(),
                    "tensor '{}': row size {} does not match dense shape {} (rows of {})", q.name,
                    q.rowSize, q.shape.toString(), q.shape.rowSize());
      ZEN_CHECK_ARG(q.reduceOp == ReduceOp::kSum || q.reduceOp == ReduceOp::kAverage,
                    "tensor '{}': sparse allreduce reduces with sum or average, not {} (min, max "
                    "and product are for dense tensors)",
                    q.name, reduceOpName(q.reduceOp));
      break;
    case OpType::kAllgather:
      ZEN_CHECK_ARG(q.shape.rank() >= 1, "tensor '{}': allgather needs at least one dimension",
                    q.name);
      break;
    case OpType::kBroadcast:
      ZEN_CHECK_ARG(q.rootRank >= 0 && q.rootRank < size,
                    "tensor '{}': broadcast root rank {} outside [0, {})", q.name, q.rootRank,
                    size);
      break;
    case OpType::kJoin:
      ZEN_CHECK_ARG(q.name == kJoinTensorName, "join requests are named '{}', got '{}'",
                    kJoinTensorName, q.name);
      break;
    case OpType::kAllreduce:
    case OpType::kBarrier:
      break;
  }
  return Status::ok();
}

Response errorResponse(const std::string& name, std::string message) {
  Response r;
  r.type = ResponseType::kError;
  r.tensorNames = {name};
  r.errorMessage = std::move(message);
  return r;
}

Response buildResponse(const std::string& name,
                       const TableEntry& entry,
                       const std::vector<bool>& joined) {
  const int size = static_cast<int>(entry.byRank.size());
  if (!entry.duplicateRanks.empty()) {
    return errorResponse(
        name, fmt::format("tensor '{}': {} posted it again while the previous one was still in "
                          "flight (names must be unique among pending tensors)",
                          name, formatRanks(entry.duplicateRanks)));
  }
  std::vector<const Request*> posters;
  for (const auto& q : entry.byRank) {
    if (q) posters.push_back(&*q);
  }
  if (posters.empty())
    return errorResponse(name, fmt::format("tensor '{}': no rank posted it", name));
  for (const Request* q : posters) {
    Status s = checkRequest(*q, size);
    if (!s.isOk())
      return errorResponse(name, fmt::format("{} (from rank {})", s.message(), q->rank));
  }
  if (auto msg = firstDisagreement(name, posters)) return errorResponse(name, std::move(*msg));

  const Request& ref = *posters.front();
  if (ref.op == OpType::kBroadcast && joined[static_cast<size_t>(ref.rootRank)] &&
      !entry.byRank[static_cast<size_t>(ref.rootRank)]) {
    return errorResponse(name, fmt::format("tensor '{}': broadcast root rank {} has joined and has "
                                           "no tensor to send",
                                           name, ref.rootRank));
  }

  Response r;
  r.type = responseTypeFor(ref.op);
  r.tensorNames = {name};
  r.dtype = ref.dtype;
  r.reduceOp = ref.reduceOp;
  r.rootRank = ref.rootRank;
  r.rowSize = ref.rowSize;
  r.devices.reserve(static_cast<size_t>(size));
  for (const auto& q : entry.byRank) r.devices.push_back(q ? q->device : ref.device);
  r.shapes = {ref.shape};
  if (ref.op == OpType::kAllgather) {
    // Joined ranks contribute no rows; the output's first dimension is the sum.
    int64_t total = 0;
    for (const auto& q : entry.byRank) {
      const int64_t rows = q ? q->shape.dim(0) : 0;
      r.gatherRows.push_back(rows);
      total += rows;
    }
    std::vector<int64_t> dims = ref.shape.dims();
    dims[0] = total;
    r.shapes = {TensorShape(std::move(dims))};
  }
  if (ref.op == OpType::kSparseAllreduce) {
    r.rowOffsets = {0};
    r.totalRows = ref.shape.numRows();
  }
  return r;
}

}  // namespace zen::controller
