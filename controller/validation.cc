// Ready table entry -> Response or a precise error Response (controller/validation.h).

#include "controller/validation.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <functional>
#include <optional>
#include <utility>

namespace zen::controller {
namespace {

bool isReduction(OpType op) {
  return op == OpType::kAllreduce || op == OpType::kSparseAllreduce || op == OpType::kReducescatter;
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

template <typename T>
std::string joinInts(const std::vector<T>& v) {
  return fmt::format("[{}]", fmt::join(v, ", "));
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
  if (op == OpType::kAllgather || op == OpType::kAlltoall) {
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
  if (op == OpType::kAddProcessSet) {
    const auto members = [](const Request& q) { return joinInts(q.members); };
    fields.push_back({"members", members, members});
  }
  if (op == OpType::kRemoveProcessSet) {
    const auto set = [](const Request& q) { return std::to_string(q.processSet); };
    fields.push_back({"process set", set, set});
  }
  // Op first: when ops differ, the other fields' differences are only a symptom.
  for (const Field& f : fields) {
    if (auto msg = disagreement(name, posters, f)) return msg;
  }
  return std::nullopt;
}

// What is wrong with one rank's alltoall splits for a job of `size` ranks, "" when nothing:
// size entries, none negative, summing to the first dimension (empty: that dimension splits
// equally).
std::string splitsProblem(const Request& q, int size) {
  const int64_t rows = q.shape.dim(0);
  if (q.splits.empty()) {
    if (rows % size == 0) return "";
    return fmt::format("{} rows, which do not split equally over {} ranks (pass splits)", rows,
                       size);
  }
  if (q.splits.size() != static_cast<size_t>(size)) {
    return fmt::format("splits {} ({} entries) for {} ranks", joinInts(q.splits), q.splits.size(),
                       size);
  }
  int64_t sum = 0;
  for (int64_t v : q.splits) {
    if (v < 0) return fmt::format("splits {} with a negative entry", joinInts(q.splits));
    sum += v;
  }
  if (sum == rows) return "";
  return fmt::format("splits {} summing to {} for a first dimension of {}", joinInts(q.splits), sum,
                     rows);
}

// Every poster's splits, the ranks grouped by what is wrong: "tensor 'x': alltoall splits do
// not fit: rank 1 sent splits [1, 1] (2 entries) for 3 ranks; ranks 2-3 sent ...".
std::optional<std::string> splitsDisagreement(const std::string& name,
                                              const std::vector<const Request*>& posters,
                                              int size) {
  std::vector<std::pair<std::string, std::vector<int>>> groups;
  for (const Request* q : posters) {
    std::string problem = splitsProblem(*q, size);
    if (problem.empty()) continue;
    size_t g = 0;
    while (g < groups.size() && groups[g].first != problem) ++g;
    if (g == groups.size()) groups.emplace_back(std::move(problem), std::vector<int>{});
    groups[g].second.push_back(q->rank);
  }
  if (groups.empty()) return std::nullopt;
  std::string msg = fmt::format("tensor '{}': alltoall splits do not fit: ", name);
  for (size_t g = 0; g < groups.size(); ++g) {
    msg +=
        fmt::format("{}{} sent {}", g ? "; " : "", formatRanks(groups[g].second), groups[g].first);
  }
  return msg;
}

// Adasum (ops/adasum.h) combines pairs of ranks level by level and measures angles, so it needs
// floating-point values and a power-of-two number of ranks (as Horovod).
Status checkAdasum(const Request& q, int size) {
  ZEN_CHECK_ARG(q.dtype != DataType::kInt32 && q.dtype != DataType::kInt64,
                "tensor '{}': adasum needs a floating-point tensor (float16, bfloat16, float32 or "
                "float64), not {}",
                q.name, dataTypeName(q.dtype));
  ZEN_CHECK_ARG(size > 0 && (size & (size - 1)) == 0,
                "tensor '{}': adasum needs a power-of-two number of ranks, this job has {}", q.name,
                size);
  return Status::ok();
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
  ZEN_CHECK_ARG(q.processSet >= 0, "tensor '{}': process set {} (ids are 0, the job, or >= 1)",
                q.name, q.processSet);
  ZEN_CHECK_ARG(q.members.empty() || q.op == OpType::kAddProcessSet,
                "tensor '{}': members are for add_process_set, not {}", q.name, opTypeName(q.op));
  switch (q.op) {
    case OpType::kSparseAllreduce:
      ZEN_CHECK_ARG(q.shape.rank() >= 1,
                    "tensor '{}': a sparse tensor needs a dense shape [rows, ...], got {}", q.name,
                    q.shape.toString());
      ZEN_CHECK_ARG(q.rowSize >= 1 && q.rowSize == q.shape.rowSize(),
                    "tensor '{}': row size {} does not match dense shape {} (rows of {})", q.name,
                    q.rowSize, q.shape.toString(), q.shape.rowSize());
      ZEN_CHECK_ARG(q.reduceOp == ReduceOp::kSum || q.reduceOp == ReduceOp::kAverage,
                    "tensor '{}': sparse allreduce reduces with sum or average, not {} (min, max, "
                    "product and adasum are for dense tensors)",
                    q.name, reduceOpName(q.reduceOp));
      break;
    case OpType::kReducescatter:
      ZEN_CHECK_ARG(q.reduceOp != ReduceOp::kAdasum,
                    "tensor '{}': reducescatter does not take adasum (it is for dense allreduce)",
                    q.name);
      [[fallthrough]];
    case OpType::kAllgather:
    case OpType::kAlltoall:
      ZEN_CHECK_ARG(q.shape.rank() >= 1, "tensor '{}': {} needs at least one dimension", q.name,
                    opTypeName(q.op));
      break;
    case OpType::kBroadcast:
      ZEN_CHECK_ARG(q.rootRank >= 0 && q.rootRank < size,
                    "tensor '{}': broadcast root rank {} outside [0, {})", q.name, q.rootRank,
                    size);
      break;
    case OpType::kJoin:
      ZEN_CHECK_ARG(q.name == kJoinTensorName, "join requests are named '{}', got '{}'",
                    kJoinTensorName, q.name);
      ZEN_CHECK_ARG(q.processSet == kGlobalProcessSet,
                    "join is for the whole job, not process set {}", q.processSet);
      break;
    case OpType::kAddProcessSet:
      // The member list itself is judged by rank 0 against every rank's (set_registration.h):
      // a rank refused here would leave the others waiting.
      ZEN_CHECK_ARG(q.processSet == kGlobalProcessSet,
                    "'{}': every rank of the job adds a process set (process set 0), not {}",
                    q.name, q.processSet);
      break;
    case OpType::kRemoveProcessSet:
      ZEN_CHECK_ARG(q.processSet != kGlobalProcessSet,
                    "'{}': process set 0 (the whole job) cannot be removed", q.name);
      break;
    case OpType::kAllreduce:
      if (q.reduceOp == ReduceOp::kAdasum) ZEN_RETURN_IF_ERROR(checkAdasum(q, size));
      break;
    case OpType::kBarrier:
      break;
  }
  // Splits are checked by rank 0 against every rank's (buildResponse), so that a bad one
  // fails the tensor on every rank rather than leave the others waiting.
  ZEN_CHECK_ARG(q.splits.empty() || q.op == OpType::kAlltoall,
                "tensor '{}': splits are for alltoall, not {}", q.name, opTypeName(q.op));
  return Status::ok();
}

Response errorResponse(const std::string& name, std::string message) {
  Response r;
  r.type = ResponseType::kError;
  r.tensorNames = {name};
  r.errorMessage = std::move(message);
  return r;
}

std::optional<std::string> entryProblem(const std::string& name, const TableEntry& entry) {
  const int size = static_cast<int>(entry.byRank.size());
  if (!entry.duplicateRanks.empty()) {
    return fmt::format(
        "tensor '{}': {} posted it again while the previous one was still in "
        "flight (names must be unique among pending tensors)",
        name, formatRanks(entry.duplicateRanks));
  }
  const std::vector<const Request*> posters = postersOf(entry);
  if (posters.empty()) return fmt::format("tensor '{}': no rank posted it", name);
  for (const Request* q : posters) {
    Status s = checkRequest(*q, size);
    if (!s.isOk()) return fmt::format("{} (from rank {})", s.message(), q->rank);
  }
  return firstDisagreement(name, posters);
}

std::vector<const Request*> postersOf(const TableEntry& entry) {
  std::vector<const Request*> posters;
  for (const auto& q : entry.byRank) {
    if (q) posters.push_back(&*q);
  }
  return posters;
}

Response buildResponse(const std::string& name,
                       const TableEntry& entry,
                       const std::vector<bool>& joined) {
  const int size = static_cast<int>(entry.byRank.size());
  if (auto msg = entryProblem(name, entry)) return errorResponse(name, std::move(*msg));
  const std::vector<const Request*> posters = postersOf(entry);
  const Request& ref = *posters.front();
  if (ref.op == OpType::kAlltoall) {
    std::vector<int> joinedRanks;
    for (int r = 0; r < size; ++r) {
      if (!entry.byRank[static_cast<size_t>(r)]) joinedRanks.push_back(r);
    }
    if (!joinedRanks.empty()) {
      return errorResponse(name, fmt::format("tensor '{}': alltoall while {} {} joined is not "
                                             "supported (a joined rank has no tensor to send "
                                             "or receive)",
                                             name, formatRanks(joinedRanks),
                                             joinedRanks.size() == 1 ? "has" : "have"));
    }
    if (auto msg = splitsDisagreement(name, posters, size)) {
      return errorResponse(name, std::move(*msg));
    }
  }
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
  if (ref.op == OpType::kAlltoall) {
    // Every rank's splits (posters are in rank order and all ranks posted), an equal split
    // where a rank gave none; the tensor's shape: every row sent, then the trailing dims.
    int64_t total = 0;
    for (const Request* q : posters) {
      const int64_t rows = q->shape.dim(0);
      for (int d = 0; d < size; ++d) {
        r.splits.push_back(q->splits.empty() ? rows / size : q->splits[static_cast<size_t>(d)]);
      }
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
