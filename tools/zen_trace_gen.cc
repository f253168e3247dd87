// zen-trace-gen: writes a synthetic multi-rank, multi-step timeline through the real
// Chrome-trace writer (core/timeline.h), for the zen-timeline tool's tests and README.
// Each rank has its own Timeline, writing OUT with ".rank<N>" before the extension
// (trace.json -> trace.rank0.json, ...), as the runtime does.
//
// --style threads (default): each rank is a thread recording "B"/"E" phases as they happen.
// Every step, every row (tensor or fused bucket) goes through the daemon's phases with
// their arguments:
//   NEGOTIATE  every rank, from posting the request until every rank has; rank 0 (the
//              coordinator) also records an instant "rank R ready" on the row when rank R
//              posts. --straggler R posts --straggler-ms after all the others, every time.
//   QUEUE, FUSE (bucket rows: args tensors, bucket)
//   sparse rows: SPARSE_ALLREDUCE (scheme, bucket, tensors; nnz on its end) holding the
//              executor's phases NONZERO (nnz, density), HASH (imbalance), PUSH
//              (bytes_sent, bytes_received, scheme), AGGREGATE, ENCODE, PULL
//              (bytes_sent, bytes_received), DECODE
//   agsparse:  SPARSE_ALLREDUCE holding NONZERO, ALLGATHER (bytes_sent, bytes_received),
//              AGGREGATE
//   dense:     ALLREDUCE (bytes_sent, bytes_received)
// Phase lengths are real sleeps, so the file holds the writer's real timestamps.
//
// --manifest M writes what was recorded (per tensor: ops, bytes, nnz, scheme, phase counts
// and the slept milliseconds, a lower bound of the recorded time) for the tests to compare
// with. --unmatched makes rank 1 write an "E" with no open phase and leave its last PULL
// open, as a killed process would.
//
// --style runtime: the same kind of job as core/runtime_loop.cc records it ("X" spans,
// ticks named by the rank number at cycle times, a fused bucket's phases on each of its
// tensors' rows), on a virtual clock, so the manifest holds every length exactly (see
// writeRuntimeStyle).
#include <fmt/format.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "core/timeline.h"

namespace po = boost::program_options;

namespace {

struct Args {
  std::string out;
  std::string manifest;
  int ranks = 4;
  int steps = 6;
  int straggler = 2;
  double stragglerMs = 5.0;
  double scale = 1.0;  // multiplies every phase length
  unsigned seed = 7;
  bool markCycles = false;
  bool unmatched = false;
  std::string style = "threads";
};

enum class Kind { kZen, kHc, kAgsparse, kDense };

struct RowSpec {
  std::string name;
  Kind kind;
  std::string scheme;
  int64_t rows;      // dense rows of the (virtual) tensor
  int64_t rowBytes;  // bytes per row (fp32 x width)
  double density;    // mean nonzero-row fraction per rank
  int fusedTensors;  // > 1: a fusion bucket
};

const std::vector<RowSpec>& rowSpecs() {
  static const std::vector<RowSpec> specs = {
      {"emb.user.weight", Kind::kZen, "zen", 2'000'000, 256, 0.004, 1},
      {"bucket.1", Kind::kHc, "hc", 600'000, 128, 0.01, 3},
      {"emb.tag.weight", Kind::kAgsparse, "agsparse", 100'000, 64, 0.02, 1},
      {"fc.weight", Kind::kDense, "dense", 1024, 4096, 1.0, 1},
  };
  return specs;
}

std::string rankPath(const std::string& out, int rank) {
  const auto slash = out.find_last_of('/');
  const auto dot = out.find_last_of('.');
  const std::string tag = ".rank" + std::to_string(rank);
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return out + tag;
  return out.substr(0, dot) + tag + out.substr(dot);
}

// A reusable barrier (std::barrier is C++20).
class Barrier {
 public:
  explicit Barrier(int n) : n_(n) {}
  void wait() {
    std::unique_lock<std::mutex> lock(mu_);
    const uint64_t gen = gen_;
    if (++count_ == n_) {
      count_ = 0;
      ++gen_;
      cv_.notify_all();
      return;
    }
    cv_.wait(lock, [&] { return gen_ != gen; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  const int n_;
  int count_ = 0;
  uint64_t gen_ = 0;
};

// What one rank recorded, summed into the manifest.
struct TensorTally {
  int64_t ops = 0;
  int64_t bytesSent = 0;
  int64_t bytesReceived = 0;
  int64_t nnz = 0;
  std::map<std::string, int64_t> phaseCounts;
  std::map<std::string, double> sleptMs;
};

struct RankTally {
  std::map<std::string, TensorTally> tensors;
};

class RankWriter {
 public:
  RankWriter(const Args& a,
             int rank,
             zen::Timeline* own,
             zen::Timeline* coordinator,
             Barrier* barrier,
             Barrier* posted,
             RankTally* tally)
      : a_(a),
        rank_(rank),
        tl_(own),
        coord_(coordinator),
        barrier_(barrier),
        posted_(posted),
        tally_(tally),
        rng_(a.seed * 1000003u + static_cast<unsigned>(rank)) {}

  void run() {
    for (int step = 0; step < a_.steps; ++step) {
      tl_->markCycle();
      for (const auto& spec : rowSpecs()) op(step, spec);
    }
    if (a_.unmatched && rank_ == 1) {
      // An "E" on a row with no open phase, then a PULL that never ends.
      tl_->end("fc.weight");
      tl_->begin("emb.user.weight", "PULL", {{"scheme", "zen"}, {"bytes_sent", "0"}});
    }
    tl_->flush();
  }

 private:
  double jitter(double base) {
    std::uniform_real_distribution<double> u(0.8, 1.2);
    return base * u(rng_) * a_.scale;
  }

  void phase(const RowSpec& spec,
             const std::string& name,
             double ms,
             zen::TimelineArgs begin,
             zen::TimelineArgs end = {}) {
    tl_->begin(spec.name, name, std::move(begin));
    sleepMs(ms);
    tl_->end(spec.name, std::move(end));
    auto& t = tally_->tensors[spec.name];
    t.phaseCounts[name] += 1;
    t.sleptMs[name] += ms;
  }

  void sleepMs(double ms) {
    std::this_thread::sleep_for(std::chrono::microseconds(static_cast<int64_t>(ms * 1000)));
  }

  static std::string num(double v) { return fmt::format("{:.6g}", v); }

  void op(int step, const RowSpec& spec) {
    auto& t = tally_->tensors[spec.name];
    const std::string bucket = std::to_string(&spec - rowSpecs().data());

    // The backward pass produces the gradient, then NEGOTIATE: this rank posts the request,
    // rank 0 ticks it, and all wait for the last rank. The straggler is late by stragglerMs
    // after every other rank's tick (it waits for them at `posted_` first): a sleep from its
    // own start alone would not do, as another rank descheduled longer would tick after it.
    const bool straggler = rank_ == a_.straggler;
    sleepMs(jitter(0.3));
    if (straggler) {
      posted_->wait();
      sleepMs(a_.stragglerMs);
    }
    tl_->begin(spec.name, "NEGOTIATE", {{"step", std::to_string(step)}});
    coord_->instant(spec.name, fmt::format("rank {} ready", rank_));  // Timeline is thread-safe
    if (!straggler && a_.straggler >= 0) posted_->wait();
    barrier_->wait();
    tl_->end(spec.name);
    t.phaseCounts["NEGOTIATE"] += 1;
    t.sleptMs["NEGOTIATE"] += 0.0;

    phase(spec, "QUEUE", jitter(0.1), {});
    if (spec.fusedTensors > 1) {
      phase(spec, "FUSE", jitter(0.4),
            {{"tensors", std::to_string(spec.fusedTensors)}, {"bucket", bucket}});
    }

    const int64_t denseBytes = spec.rows * spec.rowBytes;
    std::uniform_real_distribution<double> d(0.7, 1.3);
    const double density = spec.kind == Kind::kDense ? 1.0 : spec.density * d(rng_);
    const int64_t nnz = static_cast<int64_t>(spec.rows * density);
    const int64_t sparseBytes = nnz * (spec.rowBytes + 4);
    const int n = a_.ranks;
    const zen::TimelineArgs schemeArgs = {{"scheme", spec.scheme}, {"bucket", bucket}};

    // Sparse ops run their phases inside one SPARSE_ALLREDUCE span, as the runtime records
    // a response's executor phases inside the response's span.
    const bool sparse = spec.kind != Kind::kDense;
    double sleptBefore = 0;
    for (const auto& [p, ms] : t.sleptMs) sleptBefore += ms;
    if (sparse) {
      tl_->begin(spec.name, "SPARSE_ALLREDUCE",
                 {{"scheme", spec.scheme},
                  {"bucket", bucket},
                  {"tensors", std::to_string(spec.fusedTensors)}});
    }
    switch (spec.kind) {
      case Kind::kZen:
      case Kind::kHc: {
        const double imbalance = 1.0 + 0.08 * d(rng_);
        const int64_t push = sparseBytes * (n - 1) / n;
        const int64_t pushIn = static_cast<int64_t>(push * imbalance);
        const int64_t pull = (spec.rows / 8 + sparseBytes) * (n - 1) / n;
        const int64_t pullIn = pull + 4096 * rank_;
        auto a = schemeArgs;
        a.emplace_back("nnz", std::to_string(nnz));
        a.emplace_back("density", num(density));
        phase(spec, "NONZERO", jitter(0.3), a);
        phase(spec, "HASH", jitter(0.5), schemeArgs, {{"imbalance", num(imbalance)}});
        phase(spec, "PUSH", jitter(1.2),
              {{"scheme", spec.scheme},
               {"bytes_sent", std::to_string(push)},
               {"bytes_received", std::to_string(pushIn)}},
              {{"imbalance", num(imbalance)}});
        phase(spec, "AGGREGATE", jitter(0.4), schemeArgs);
        phase(spec, "ENCODE", jitter(0.3), schemeArgs);
        phase(spec, "PULL", jitter(1.0),
              {{"scheme", spec.scheme},
               {"bytes_sent", std::to_string(pull)},
               {"bytes_received", std::to_string(pullIn)}});
        phase(spec, "DECODE", jitter(0.3), schemeArgs);
        t.bytesSent += push + pull;
        t.bytesReceived += pushIn + pullIn;
        break;
      }
      case Kind::kAgsparse: {
        auto a = schemeArgs;
        a.emplace_back("nnz", std::to_string(nnz));
        a.emplace_back("density", num(density));
        phase(spec, "NONZERO", jitter(0.2), a);
        const int64_t in = sparseBytes * (n - 1);
        phase(spec, "ALLGATHER", jitter(0.8),
              {{"scheme", spec.scheme},
               {"bytes_sent", std::to_string(sparseBytes)},
               {"bytes_received", std::to_string(in)}});
        phase(spec, "AGGREGATE", jitter(0.3), schemeArgs);
        t.bytesSent += sparseBytes;
        t.bytesReceived += in;
        break;
      }
      case Kind::kDense: {
        const int64_t ring = 2 * denseBytes * (n - 1) / n;
        phase(spec, "ALLREDUCE", jitter(1.5),
              {{"scheme", spec.scheme},
               {"bucket", bucket},
               {"bytes_sent", std::to_string(ring)},
               {"bytes_received", std::to_string(ring)}});
        t.bytesSent += ring;
        t.bytesReceived += ring;
        break;
      }
    }
    if (sparse) {
      tl_->end(spec.name, {{"nnz", std::to_string(nnz)}});
      double sleptAfter = 0;
      for (const auto& [p, ms] : t.sleptMs) sleptAfter += ms;
      t.phaseCounts["SPARSE_ALLREDUCE"] += 1;
      t.sleptMs["SPARSE_ALLREDUCE"] += sleptAfter - sleptBefore;
      t.nnz += nnz;
    }
    t.ops += 1;
  }

  const Args& a_;
  const int rank_;
  zen::Timeline* tl_;
  zen::Timeline* coord_;
  Barrier* barrier_;
  Barrier* posted_;  // every rank's request posted, the straggler's last
  RankTally* tally_;
  std::mt19937 rng_;
};

std::string jsonQuote(const std::string& s) {
  return "\"" + s + "\"";  // names here are plain ASCII without quotes
}

bool writeManifest(const Args& a,
                   const std::vector<std::string>& files,
                   const std::vector<RankTally>& tallies) {
  std::string out = "{\n";
  out += fmt::format("  \"ranks\": {}, \"steps\": {}, \"straggler\": {}, \"straggler_ms\": {},\n",
                     a.ranks, a.steps, a.straggler, a.stragglerMs);
  out +=
      fmt::format("  \"style\": \"threads\", \"unmatched\": {},\n", a.unmatched ? "true" : "false");
  out += "  \"files\": [";
  for (size_t i = 0; i < files.size(); ++i) out += (i ? ", " : "") + jsonQuote(files[i]);
  out += "],\n  \"per_rank\": [\n";
  for (size_t r = 0; r < tallies.size(); ++r) {
    out += "    {";
    bool firstT = true;
    for (const auto& [name, t] : tallies[r].tensors) {
      out += firstT ? "\n" : ",\n";
      firstT = false;
      std::string scheme;
      for (const auto& s : rowSpecs()) {
        if (s.name == name) scheme = s.scheme;
      }
      out += fmt::format(
          "      {}: {{\"scheme\": {}, \"ops\": {}, \"bytes_sent\": {}, \"bytes_received\": {}, "
          "\"nnz\": {}, \"phase_counts\": {{",
          jsonQuote(name), jsonQuote(scheme), t.ops, t.bytesSent, t.bytesReceived, t.nnz);
      bool first = true;
      for (const auto& [p, c] : t.phaseCounts) {
        out += fmt::format("{}{}: {}", first ? "" : ", ", jsonQuote(p), c);
        first = false;
      }
      out += "}, \"slept_ms\": {";
      first = true;
      for (const auto& [p, ms] : t.sleptMs) {
        out += fmt::format("{}{}: {:.6f}", first ? "" : ", ", jsonQuote(p), ms);
        first = false;
      }
      out += "}}";
    }
    out += fmt::format("\n    }}{}\n", r + 1 < tallies.size() ? "," : "");
  }
  out += "  ]\n}\n";
  std::FILE* f = std::fopen(a.manifest.c_str(), "w");
  if (f == nullptr) return false;
  const bool ok = std::fwrite(out.data(), 1, out.size(), f) == out.size();
  return std::fclose(f) == 0 && ok;
}

// --style runtime: what core/runtime_loop.cc records, on a virtual clock. Every phase is an
// "X" span written with Timeline::span at whole-microsecond offsets from one time point,
// so each recorded length is exactly the one chosen here (the manifest's phase_us); the
// coordinator's ticks are instants named by the rank alone, at the background cycle
// (1 ms) in which each rank's request arrived; a fused bucket's phases appear on each of
// its tensors' rows. No sleeping: the whole job is written at once.
struct RuntimeRow {
  std::vector<std::string> tensors;  // > 1: a fused bucket
  std::string op;                    // the response's span: SPARSE_ALLREDUCE or ALLREDUCE
  std::string scheme;
  std::vector<std::pair<std::string, int64_t>> phases;  // executor phases, mean length in us
  int64_t rows;
  int64_t rowBytes;
  double density;
};

const std::vector<RuntimeRow>& runtimeRows() {
  static const std::vector<RuntimeRow> rows = {
      {{"emb.user.weight"},
       "SPARSE_ALLREDUCE",
       "zen",
       {{"NONZERO", 300},
        {"HASH", 500},
        {"PUSH", 1200},
        {"AGGREGATE", 400},
        {"ENCODE", 300},
        {"PULL", 1000},
        {"DECODE", 300}},
       2'000'000,
       256,
       0.004},
      {{"tag.0.weight", "tag.1.weight", "tag.2.weight"},
       "SPARSE_ALLREDUCE",
       "hc",
       {{"FUSE", 200},
        {"NONZERO", 250},
        {"PUSH", 900},
        {"AGGREGATE", 300},
        {"PULL", 800},
        {"UNFUSE", 100}},
       600'000,
       128,
       0.01},
      {{"emb.item.weight"},
       "SPARSE_ALLREDUCE",
       "agsparse",
       {{"NONZERO", 200}, {"ALLGATHER", 800}, {"AGGREGATE", 300}},
       100'000,
       64,
       0.02},
      {{"fc.weight"}, "ALLREDUCE", "allreduce", {{"ALLREDUCE", 1500}}, 1024, 4096, 1.0},
  };
  return rows;
}

struct RuntimeManifest {
  std::map<std::string, int64_t> eventUs;      // each bucket-level event once
  std::map<std::string, int64_t> eventCounts;  // likewise
  int64_t bytesSent = 0;
  int64_t bytesReceived = 0;
  struct Row {
    std::string scheme;
    int fused = 1;
    int64_t ops = 0;
    std::map<std::string, int64_t> phaseUs;  // as recorded on this row (shared spans whole)
    int64_t bytesSent = 0, bytesReceived = 0, nnz = 0;
  };
  std::map<std::string, Row> rows;
  std::map<int, int64_t> lagUs;  // per rank, summed over negotiations
  int64_t negotiations = 0;
};

RuntimeManifest writeRuntimeStyle(const Args& a, std::vector<std::unique_ptr<zen::Timeline>>& tl) {
  using Clock = zen::Timeline::Clock;
  const Clock::time_point t0 = Clock::now();
  const auto at = [&](int64_t us) { return t0 + std::chrono::microseconds(us); };
  const int n = a.ranks;
  const int64_t cycleUs = 1000;
  const int64_t stragglerUs = static_cast<int64_t>(a.stragglerMs * 1000);
  std::mt19937 rng(a.seed);
  const auto jitter = [&](int64_t base) {
    return std::max<int64_t>(
        1, std::uniform_int_distribution<int64_t>(base * 8 / 10, base * 12 / 10)(rng));
  };
  RuntimeManifest m;
  int64_t cursor = 1000;
  int64_t bucket = 0;
  for (int step = 0; step < a.steps; ++step) {
    for (const RuntimeRow& row : runtimeRows()) {
      const int k = static_cast<int>(row.tensors.size());
      // Each rank posts each tensor; rank 0 learns of it in the next cycle (its tick).
      std::vector<std::vector<int64_t>> post(n, std::vector<int64_t>(k));
      std::vector<std::vector<int64_t>> tick(n, std::vector<int64_t>(k));
      int64_t planned = 0;
      for (int r = 0; r < n; ++r) {
        for (int i = 0; i < k; ++i) {
          post[r][i] = cursor + jitter(300) + 7 * i + (r == a.straggler ? stragglerUs : 0);
          tick[r][i] = (post[r][i] / cycleUs + 1) * cycleUs;
          planned = std::max(planned, tick[r][i] + 40);
        }
      }
      for (int i = 0; i < k; ++i) {
        int64_t first = tick[0][i];
        for (int r = 0; r < n; ++r) first = std::min(first, tick[r][i]);
        for (int r = 0; r < n; ++r) {
          m.lagUs[r] += tick[r][i] - first;
          tl[0]->instantAt(row.tensors[i], std::to_string(r), at(tick[r][i]));
        }
        ++m.negotiations;
      }
      int64_t stepEnd = planned;
      const int64_t start = planned + 60;
      const int64_t dense = row.rows * row.rowBytes * k;
      for (int r = 0; r < n; ++r) {
        // The executor's phases one after another inside the response's span.
        std::vector<std::tuple<std::string, int64_t, int64_t>> phases;
        int64_t t = start;
        for (const auto& [name, us] : row.phases) {
          const int64_t d = jitter(us);
          phases.emplace_back(name, t, t + d);
          t += d + 3;
        }
        const int64_t end = t;
        stepEnd = std::max(stepEnd, end);
        const double density =
            row.density >= 1.0
                ? 1.0
                : row.density * std::uniform_real_distribution<double>(0.7, 1.3)(rng);
        const int64_t nnz = row.density >= 1.0 ? 0 : static_cast<int64_t>(row.rows * k * density);
        const int64_t wire =
            row.density >= 1.0 ? 2 * dense * (n - 1) / n : nnz * (row.rowBytes + 4) * (n - 1) / n;
        const int64_t sent = wire;
        const int64_t received = wire + 512 * r;
        zen::TimelineArgs args = {
            {"bucket", std::to_string(bucket)},     {"tensors", std::to_string(k)},
            {"bytes_sent", std::to_string(sent)},   {"bytes_received", std::to_string(received)},
            {"dense_bytes", std::to_string(dense)}, {"scheme", row.scheme}};
        if (row.op == "SPARSE_ALLREDUCE") {
          args.insert(args.end(), {{"nnz", std::to_string(nnz)},
                                   {"density", fmt::format("{:.6g}", density)},
                                   {"imbalance", "1.05"}});
        }
        for (int i = 0; i < k; ++i) {
          const std::string& name = row.tensors[i];
          auto& mr = m.rows[name];
          mr.scheme = row.scheme;
          mr.fused = k;
          mr.ops += 1;
          mr.bytesSent += sent;
          mr.bytesReceived += received;
          mr.nnz += nnz;
          tl[r]->span(name, "NEGOTIATE", at(post[r][i]), at(planned),
                      {{"op", row.op == "ALLREDUCE" ? "allreduce" : "sparse_allreduce"}});
          tl[r]->span(name, "QUEUE", at(planned), at(start));
          tl[r]->span(name, row.op, at(start), at(end), args);
          for (const auto& [p, b, e] : phases) tl[r]->span(name, p, at(b), at(e));
          mr.phaseUs["NEGOTIATE"] += planned - post[r][i];
          mr.phaseUs["QUEUE"] += start - planned;
          mr.phaseUs[row.op] += end - start;
          for (const auto& [p, b, e] : phases) mr.phaseUs[p] += e - b;
          // Per tensor: NEGOTIATE and QUEUE; once per bucket: the rest.
          m.eventUs["NEGOTIATE"] += planned - post[r][i];
          m.eventUs["QUEUE"] += start - planned;
          m.eventCounts["NEGOTIATE"] += 1;
          m.eventCounts["QUEUE"] += 1;
        }
        m.eventUs[row.op] += end - start;
        m.eventCounts[row.op] += 1;
        for (const auto& [p, b, e] : phases) {
          m.eventUs[p] += e - b;
          m.eventCounts[p] += 1;
        }
        m.bytesSent += sent;
        m.bytesReceived += received;
      }
      ++bucket;
      cursor = stepEnd + 200;
    }
  }
  return m;
}

std::string jsonMap(const std::map<std::string, int64_t>& m) {
  std::string out = "{";
  for (const auto& [k, v] : m) out += fmt::format("{}\"{}\": {}", out.size() > 1 ? ", " : "", k, v);
  return out + "}";
}

bool writeRuntimeManifest(const Args& a,
                          const std::vector<std::string>& files,
                          const RuntimeManifest& m) {
  std::string out = "{\n";
  out += fmt::format(
      "  \"style\": \"runtime\", \"ranks\": {}, \"steps\": {}, \"straggler\": {}, "
      "\"straggler_ms\": {},\n",
      a.ranks, a.steps, a.straggler, a.stragglerMs);
  out += "  \"files\": [";
  for (size_t i = 0; i < files.size(); ++i) out += fmt::format("{}\"{}\"", i ? ", " : "", files[i]);
  out += "],\n";
  out += fmt::format("  \"event_us\": {},\n  \"event_counts\": {},\n", jsonMap(m.eventUs),
                     jsonMap(m.eventCounts));
  out += fmt::format("  \"bytes_sent\": {}, \"bytes_received\": {}, \"negotiations\": {},\n",
                     m.bytesSent, m.bytesReceived, m.negotiations);
  out += "  \"lag_us\": {";
  for (const auto& [r, us] : m.lagUs) out += fmt::format("{}\"{}\": {}", r ? ", " : "", r, us);
  out += "},\n  \"rows\": {";
  bool first = true;
  for (const auto& [name, r] : m.rows) {
    out += fmt::format(
        "{}\n    \"{}\": {{\"scheme\": \"{}\", \"fused\": {}, \"ops\": {}, \"bytes_sent\": {}, "
        "\"bytes_received\": {}, \"nnz\": {}, \"phase_us\": {}}}",
        first ? "" : ",", name, r.scheme, r.fused, r.ops, r.bytesSent, r.bytesReceived, r.nnz,
        jsonMap(r.phaseUs));
    first = false;
  }
  out += "\n  }\n}\n";
  std::FILE* f = std::fopen(a.manifest.c_str(), "w");
  if (f == nullptr) return false;
  const bool ok = std::fwrite(out.data(), 1, out.size(), f) == out.size();
  return std::fclose(f) == 0 && ok;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  po::options_description desc(
      "zen-trace-gen: a synthetic multi-rank timeline through core/timeline.h\n"
      "writes OUT with .rank<N> before the extension, one file per rank");
  desc.add_options()("help,h", "show this help")("out,o", po::value(&a.out)->required(),
                                                 "trace path, e.g. /tmp/trace.json")(
      "ranks,n", po::value(&a.ranks)->default_value(a.ranks), "ranks (threads)")(
      "steps,s", po::value(&a.steps)->default_value(a.steps), "training steps")(
      "straggler", po::value(&a.straggler)->default_value(a.straggler),
      "rank that is always late to NEGOTIATE (-1: none)")(
      "straggler-ms", po::value(&a.stragglerMs)->default_value(a.stragglerMs),
      "how late it is, ms")("scale", po::value(&a.scale)->default_value(a.scale),
                            "multiplies every phase length (1 = about 5 ms per sparse op)")(
      "seed", po::value(&a.seed)->default_value(a.seed), "seed of nnz and jitter")(
      "mark-cycles", po::bool_switch(&a.markCycles), "a CYCLE_START instant per step")(
      "unmatched", po::bool_switch(&a.unmatched),
      "rank 1 writes an unmatched E and leaves a PULL open")(
      "manifest", po::value(&a.manifest), "write what was recorded to this JSON file")(
      "style", po::value(&a.style)->default_value(a.style),
      "threads: ranks as threads, B/E phases, real sleeps; runtime: X spans and rank-number "
      "ticks as core/runtime_loop.cc records them, on a virtual clock (exact lengths)");
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, desc), vm);
    if (vm.count("help")) {
      std::cout << desc << "\n";
      return 0;
    }
    po::notify(vm);
  } catch (const std::exception& e) {
    fmt::print(stderr, "zen-trace-gen: {}\n", e.what());
    return 2;
  }
  if (a.style != "threads" && a.style != "runtime") {
    fmt::print(stderr, "zen-trace-gen: --style is threads or runtime, not '{}'\n", a.style);
    return 2;
  }
  if (a.ranks < 1 || a.steps < 1 || a.straggler >= a.ranks || a.scale <= 0) {
    fmt::print(stderr,
               "zen-trace-gen: need ranks >= 1, steps >= 1, straggler < ranks, scale > 0\n");
    return 2;
  }

  std::vector<std::unique_ptr<zen::Timeline>> timelines;
  std::vector<std::string> files;
  for (int r = 0; r < a.ranks; ++r) {
    files.push_back(rankPath(a.out, r));
    auto t = zen::Timeline::open(files.back(), r, a.markCycles);
    if (!t.isOk()) {
      fmt::print(stderr, "zen-trace-gen: {}\n", t.status().toString());
      return 1;
    }
    timelines.push_back(std::move(t).value());
  }

  if (a.style == "runtime") {
    const RuntimeManifest m = writeRuntimeStyle(a, timelines);
    for (auto& t : timelines) t->flush();
    timelines.clear();
    if (!a.manifest.empty() && !writeRuntimeManifest(a, files, m)) {
      fmt::print(stderr, "zen-trace-gen: cannot write manifest '{}'\n", a.manifest);
      return 1;
    }
    for (const auto& f : files) fmt::print("{}\n", f);
    return 0;
  }

  Barrier barrier(a.ranks);
  Barrier posted(a.ranks);
  std::vector<RankTally> tallies(a.ranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < a.ranks; ++r) {
    threads.emplace_back([&, r] {
      RankWriter(a, r, timelines[r].get(), timelines[0].get(), &barrier, &posted, &tallies[r])
          .run();
    });
  }
  for (auto& t : threads) t.join();
  for (auto& t : timelines) t->flush();
  timelines.clear();

  if (!a.manifest.empty() && !writeManifest(a, files, tallies)) {
    fmt::print(stderr, "zen-trace-gen: cannot write manifest '{}'\n", a.manifest);
    return 1;
  }
  for (const auto& f : files) fmt::print("{}\n", f);
  return 0;
}
