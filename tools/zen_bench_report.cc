// zen-bench's table and JSON (see zen_bench_report.h). Bandwidths use GB = 1e9 bytes, as
// nccl-tests: algbw counts the dense-equivalent buffer, busbw scales it by the allreduce
// factor 2 (n - 1) / n, wirebw counts the bytes a rank actually sent.
#include "tools/zen_bench_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace zen::bench {
namespace {

std::string describe(const BenchOptions& o, int ranks, const std::string& transportName) {
  std::string schemes;
  for (Scheme s : o.schemes)
    schemes += fmt::format("{}{}", schemes.empty() ? "" : ",", schemeName(s));
  std::string text = fmt::format(
      "schemes {}, transport {}, {} ranks x {} threads, |G| {} rows x {} {}, skew {}, overlap {}, "
      "op {}, {} output, {} iters after {} warm-up",
      schemes, transportName, ranks, o.threads, o.rows, o.rowSize, dataTypeName(o.dtype),
      o.zipf ? fmt::format("zipf (s {})", o.zipfS) : "uniform", o.overlap, ops::reduceOpName(o.op),
      o.tensors > 1 ? fmt::format("{} ({} tensors)", benchOutputName(o.output), o.tensors)
                    : benchOutputName(o.output),
      o.iters, o.warmup);
  if (o.linkGbps > 0) text += fmt::format(", modeled link {} Gbps", o.linkGbps);
  return text;
}

// "name": us, ... of a row's phases (names are the schemes' own identifiers).
std::string phasesJson(const Row& r) {
  std::string text;
  for (const auto& [name, seconds] : r.phases) {
    text += fmt::format("{}\"{}\": {}", text.empty() ? "" : ", ", name, seconds * 1e6);
  }
  return text;
}

}  // namespace

std::vector<Row> reduceSamples(const BenchOptions& o,
                               int ranks,
                               const std::vector<std::vector<Sample>>& all) {
  const std::vector<Scheme> order = runOrder(o);
  const double size = static_cast<double>(o.rows * o.rowSize * dataTypeSize(o.dtype));
  const double factor = ranks > 1 ? 2.0 * (ranks - 1) / ranks : 0.0;
  std::vector<Row> rows;
  for (size_t d = 0; d < o.densities.size(); ++d) {
    std::vector<Row> block;
    for (size_t s = 0; s < order.size(); ++s) {
      const size_t k = d * order.size() + s;
      Row row;
      row.density = o.densities[d];
      row.scheme = order[s];
      row.sizeBytes = size;
      row.count = static_cast<double>(o.rows * o.rowSize);
      for (const std::vector<Sample>& rank : all) {
        const Sample& x = rank[k];
        row.seconds += x.seconds / ranks;
        row.inputNnz += x.inputNnz / ranks;
        row.outputNnz += x.outputNnz / ranks;
        row.bytesPerRank += x.bytesSent / ranks;
        row.imbalance += x.imbalance / ranks;
        row.busiestBytes = std::max({row.busiestBytes, x.bytesSent, x.bytesReceived});
        row.wrong += x.wrong;
      }
      const Sample& first = all.front()[k];
      for (int i = 0; i < first.phaseCount; ++i) {
        double seconds = 0;
        for (const std::vector<Sample>& rank : all) seconds += rank[k].phaseSeconds[i] / ranks;
        row.phases.emplace_back(first.phaseNames[i], seconds);
      }
      if (row.scheme == Scheme::kAuto) {
        const bool agreed = std::all_of(all.begin(), all.end(), [&](const std::vector<Sample>& r) {
          return r[k].autoChoice == first.autoChoice;
        });
        row.autoChoice =
            agreed ? static_cast<Scheme>(static_cast<int>(first.autoChoice)) : Scheme::kAuto;
      }
      row.algbw = size / row.seconds / 1e9;
      row.busbw = row.algbw * factor;
      row.wirebw = row.bytesPerRank / row.seconds / 1e9;
      if (o.linkGbps > 0) row.modelSeconds = row.busiestBytes * 8 / (o.linkGbps * 1e9);
      block.push_back(row);
    }
    const Row& dense = block.front();  // runOrder puts dense first
    for (Row& row : block) {
      row.speedup = dense.seconds / row.seconds;
      if (o.linkGbps > 0 && row.modelSeconds > 0) {
        row.modelSpeedup = dense.modelSeconds / row.modelSeconds;
      }
      if (std::find(o.schemes.begin(), o.schemes.end(), row.scheme) != o.schemes.end()) {
        rows.push_back(row);
      }
    }
  }
  return rows;
}

void printTable(std::FILE* out,
                const BenchOptions& o,
                int ranks,
                const std::string& transportName,
                const std::vector<Row>& rows) {
  const bool model = o.linkGbps > 0;
  fmt::print(out, "# zen-bench: {}\n#\n", describe(o, ranks, transportName));
  fmt::print(out,
             "# {:>10} {:>10} {:>8} {:>8} {:>9} {:>9} {:>8} {:>10} {:>7} {:>7} {:>7} {:>11} "
             "{:>9} {:>7}",
             "size(B)", "count", "type", "density", "nnz", "out-nnz", "scheme", "time(us)", "algbw",
             "busbw", "wirebw", "bytes/rank", "imbalance", "speedup");
  if (model) fmt::print(out, " {:>10} {:>8}", "model(us)", "m-speedup");
  fmt::print(out, " {:>7}\n", "#wrong");
  fmt::print(out, "# {:>10} {:>10} {:>8} {:>8} {:>9} {:>9} {:>8} {:>10} {:>7} {:>7} {:>7} {:>11}\n",
             "", "(elements)", "", "", "(rank)", "", "", "", "(GB/s)", "(GB/s)", "(GB/s)", "(B)");
  double wrong = 0;
  double busbw = 0;
  for (const Row& r : rows) {
    fmt::print(out,
               "  {:>10.0f} {:>10.0f} {:>8} {:>8.4f} {:>9.0f} {:>9.0f} {:>8} {:>10.1f} {:>7.2f} "
               "{:>7.2f} {:>7.2f} {:>11.0f} {:>9.2f} {:>7.2f}",
               r.sizeBytes, r.count, dataTypeName(o.dtype), r.density, r.inputNnz, r.outputNnz,
               schemeName(r.scheme), r.seconds * 1e6, r.algbw, r.busbw, r.wirebw, r.bytesPerRank,
               r.imbalance, r.speedup);
    if (model) fmt::print(out, " {:>10.1f} {:>8.2f}", r.modelSeconds * 1e6, r.modelSpeedup);
    fmt::print(out, " {:>7.0f}\n", r.wrong);
    wrong += r.wrong;
    busbw += r.busbw;
  }
  for (const Row& r : rows) {
    if (r.scheme != Scheme::kAuto) continue;
    fmt::print(out, "# auto at density {:.4f}: {}\n", r.density,
               r.autoChoice == Scheme::kAuto ? "the ranks chose differently (a bug)"
                                             : schemeName(r.autoChoice));
  }
  if (o.phases) {
    fmt::print(out, "# Phases, us per call (mean over ranks):\n");
    for (const Row& r : rows) {
      fmt::print(out, "#   {:.4f} {:>8}:", r.density, schemeName(r.scheme));
      for (const auto& [name, seconds] : r.phases)
        fmt::print(out, " {} {:.1f}", name, seconds * 1e6);
      fmt::print(out, "\n");
    }
  }
  fmt::print(out, "# Wrong elements vs dense: {:.0f} {}\n", wrong, wrong == 0 ? "OK" : "FAILED");
  fmt::print(out, "# Avg bus bandwidth    : {:.3f} GB/s\n",
             rows.empty() ? 0.0 : busbw / static_cast<double>(rows.size()));
}

Status writeJson(const std::string& path,
                 const BenchOptions& o,
                 int ranks,
                 const std::string& transportName,
                 const std::vector<Row>& rows) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) {
    return ZEN_ERROR(StatusCode::kIoError, "cannot write {}: {}", path, std::strerror(errno));
  }
  fmt::print(f, "{{\n  \"config\": {{\"transport\": \"{}\", \"ranks\": {}, \"rows\": {}, ",
             transportName, ranks, o.rows);
  fmt::print(
      f,
      "\"rowSize\": {}, \"dtype\": \"{}\", \"skew\": \"{}\", \"zipfS\": {}, \"overlap\": {}, "
      "\"op\": \"{}\", \"output\": \"{}\", \"iters\": {}, \"warmup\": {}, \"linkGbps\": "
      "{}}},\n  \"rows\": [",
      o.rowSize, dataTypeName(o.dtype), o.zipf ? "zipf" : "uniform", o.zipfS, o.overlap,
      ops::reduceOpName(o.op), benchOutputName(o.output), o.iters, o.warmup, o.linkGbps);
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    fmt::print(f,
               "{}\n    {{\"sizeBytes\": {}, \"count\": {}, \"dtype\": \"{}\", \"density\": {}, "
               "\"nnz\": {}, \"outputNnz\": {}, \"scheme\": \"{}\", \"timeUs\": {}, \"algbw\": {}, "
               "\"busbw\": {}, \"wirebw\": {}, \"bytesPerRank\": {}, \"busiestBytes\": {}, "
               "\"imbalance\": {}, \"speedupVsDense\": {}, \"modelUs\": {}, "
               "\"modelSpeedupVsDense\": {}, \"wrong\": {}, \"autoChoice\": \"{}\", "
               "\"phasesUs\": {{{}}}}}",
               i == 0 ? "" : ",", r.sizeBytes, r.count, dataTypeName(o.dtype), r.density,
               r.inputNnz, r.outputNnz, schemeName(r.scheme), r.seconds * 1e6, r.algbw, r.busbw,
               r.wirebw, r.bytesPerRank, r.busiestBytes, r.imbalance, r.speedup,
               r.modelSeconds * 1e6, r.modelSpeedup, r.wrong,
               r.scheme == Scheme::kAuto ? schemeName(r.autoChoice) : "", phasesJson(r));
  }
  fmt::print(f, "\n  ]\n}}\n");
  const bool ok = std::fclose(f) == 0;
  if (!ok) return ZEN_ERROR(StatusCode::kIoError, "cannot finish {}", path);
  return Status::ok();
}

}  // namespace zen::bench
