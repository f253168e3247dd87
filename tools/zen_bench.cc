// zen-bench: the sparse allreduce schemes side by side, nccl-tests style (CONVENTIONS.md §10).
//
//   zen-bench --scheme all --transport inprocess -n 8 --rows 1000000 --density 0.001,0.01,0.1
//             --skew zipf --link-gbps 25
//
// Ranks: --transport inprocess runs n threads over one in-process hub; tcp runs n threads
// over 127.0.0.1, or, when started with ZEN_RANK, ZEN_SIZE and ZEN_CONTROLLER_ADDR set (one
// process per rank), this process's rank; mpi runs under mpirun, one rank per process. Rank
// 0 prints the table; the exit code is 1 when any result differs from the dense scheme's, 2
// on errors.
#include <fmt/format.h>

#include <boost/program_options.hpp>
#include <chrono>
#include <cstdio>
#include <future>
#include <iostream>
#include <mutex>
#include <sstream>
#include <thread>

#include "ops/inprocess_transport.h"
#include "ops/mpi_transport.h"
#include "ops/tcp_transport.h"
#include "tools/zen_bench_report.h"
#include "tools/zen_bench_run.h"

#ifdef ZEN_HAVE_MPI
#include <mpi.h>
#endif

namespace po = boost::program_options;

namespace zen::bench {
namespace {

constexpr Scheme kAllSchemes[] = {Scheme::kZen, Scheme::kHc, Scheme::kAgSparse, Scheme::kBlocks,
                                  Scheme::kDense};

std::vector<std::string> splitList(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty()) items.push_back(item);
  }
  return items;
}

Result<std::vector<Scheme>> parseSchemes(const std::string& text) {
  if (text == "all") return std::vector<Scheme>(std::begin(kAllSchemes), std::end(kAllSchemes));
  std::vector<Scheme> schemes;
  for (const std::string& name : splitList(text)) {
    if (name == schemeName(Scheme::kAuto)) {
      schemes.push_back(Scheme::kAuto);
      continue;
    }
    auto it = std::find_if(std::begin(kAllSchemes), std::end(kAllSchemes),
                           [&](Scheme s) { return name == schemeName(s); });
    ZEN_CHECK_ARG(it != std::end(kAllSchemes),
                  "unknown scheme '{}' (expected auto, zen, hc, agsparse, blocks, dense or all)",
                  name);
    schemes.push_back(*it);
  }
  ZEN_CHECK_ARG(!schemes.empty(), "--scheme lists no scheme");
  return schemes;
}

Result<DataType> parseType(const std::string& text) {
  if (text == "f32") return DataType::kFloat32;
  if (text == "f16") return DataType::kFloat16;
  if (text == "bf16") return DataType::kBFloat16;
  if (text == "f64") return DataType::kFloat64;
  return parseDataType(text);
}

// The transport-independent part of a rank: measure, then rank 0 reports. Returns the
// process exit code (the same on every rank).
int rankMain(ops::Transport& t, const BenchOptions& o, const std::string& transportName) {
  std::vector<std::vector<Sample>> all;
  const Status status = runRank(t, o, &all);
  if (!status.isOk()) {
    fmt::print(stderr, "zen-bench: rank {}: {}\n", t.rank(), status.toString());
    return 2;
  }
  const std::vector<Row> rows = reduceSamples(o, t.size(), all);
  double wrong = 0;
  for (const Row& r : rows) wrong += r.wrong;
  if (t.rank() == 0) {
    printTable(stdout, o, t.size(), transportName, rows);
    std::fflush(stdout);
    if (!o.json.empty()) {
      const Status written = writeJson(o.json, o, t.size(), transportName, rows);
      if (!written.isOk()) {
        fmt::print(stderr, "zen-bench: {}\n", written.toString());
        return 2;
      }
    }
  }
  return wrong == 0 ? 0 : 1;
}

// n ranks as threads of this process (in-process hub, or TCP over 127.0.0.1 with rank 0 on
// an ephemeral port that it hands to the others).
int runThreads(const BenchOptions& o, bool tcp) {
  const int n = o.ranks;
  auto hub = ops::makeInProcessHub(n);
  std::promise<uint16_t> portPromise;
  std::shared_future<uint16_t> port = portPromise.get_future().share();
  std::once_flag portSet;
  auto publish = [&](uint16_t p) { std::call_once(portSet, [&] { portPromise.set_value(p); }); };
  std::vector<int> codes(n, 2);
  std::vector<std::thread> threads;
  threads.reserve(n);
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      Result<std::unique_ptr<ops::Transport>> transport = Status::ok();
      if (!tcp) {
        ops::TransportOptions to;
        to.rank = r;
        to.size = n;
        to.timeoutSeconds = o.timeoutSeconds;
        transport = ops::createInProcessTransport(hub, to);
      } else {
        ops::TcpOptions to;
        to.rank = r;
        to.size = n;
        to.timeoutSeconds = o.timeoutSeconds;
        to.secret = "zen-bench";
        to.rendezvousAddr = "127.0.0.1:0";
        to.onListening = publish;
        if (r > 0) {
          const bool ready = port.wait_for(std::chrono::duration<double>(o.timeoutSeconds)) ==
                             std::future_status::ready;
          if (!ready || port.get() == 0) {
            fmt::print(stderr, "zen-bench: rank {}: rank 0 never listened\n", r);
            return;
          }
          to.rendezvousAddr = fmt::format("127.0.0.1:{}", port.get());
        }
        transport = ops::createTcpTransport(to);
        if (r == 0) publish(0);  // no-op once listening worked; releases the others if not
      }
      if (!transport.isOk()) {
        fmt::print(stderr, "zen-bench: rank {}: {}\n", r, transport.status().toString());
        return;
      }
      codes[r] = rankMain(*transport.value(), o, tcp ? "tcp (threads)" : "inprocess");
    });
  }
  for (std::thread& t : threads) t.join();
  return *std::max_element(codes.begin(), codes.end());
}

// One rank per process: TCP with the launcher's ZEN_* variables.
int runTcpProcess(const BenchOptions& o, const Config& config) {
  ops::TcpOptions to = ops::TcpOptions::fromConfig(config);
  to.timeoutSeconds = o.timeoutSeconds;
  auto transport = ops::createTcpTransport(to);
  if (!transport.isOk()) {
    fmt::print(stderr, "zen-bench: {}\n", transport.status().toString());
    return 2;
  }
  return rankMain(*transport.value(), o, "tcp (processes)");
}

int runMpi(const BenchOptions& o, int* argc, char*** argv) {
#ifdef ZEN_HAVE_MPI
  // The level the library's MPI backend asks for (ZEN_MPI_THREADS_DISABLE), so that its cost
  // shows here: MULTIPLE by default, SERIALIZED with --mpi-threads serialized.
  int provided = 0;
  MPI_Init_thread(argc, argv, o.mpiThreadMultiple ? MPI_THREAD_MULTIPLE : MPI_THREAD_SERIALIZED,
                  &provided);
  int code = 2;
  {
    ops::MpiOptions mo;
    mo.timeoutSeconds = o.timeoutSeconds;
    auto transport = ops::createMpiTransport(mo);
    if (transport.isOk()) {
      code = rankMain(*transport.value(), o,
                      provided == MPI_THREAD_MULTIPLE ? "mpi, MPI_THREAD_MULTIPLE"
                                                      : "mpi, MPI_THREAD_SERIALIZED or below");
    } else {
      fmt::print(stderr, "zen-bench: {}\n", transport.status().toString());
    }
  }
  int worst = code;
  MPI_Allreduce(&code, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return worst;
#else
  (void)o;
  (void)argc;
  (void)argv;
  fmt::print(stderr, "zen-bench: built without MPI (ZEN_WITH_MPI=OFF)\n");
  return 2;
#endif
}

}  // namespace
}  // namespace zen::bench

int main(int argc, char** argv) {
  using namespace zen;
  bench::BenchOptions o;
  std::string schemes = "all";
  std::string densities = "0.01";
  std::string skew = "uniform";
  std::string dtype = "float32";
  std::string op = "sum";
  std::string output = "dense";
  std::string mpiThreads = "multiple";
  std::string autoSchemes = "zen,hc,agsparse";
  po::options_description desc(
      "zen-bench: sparse allreduce schemes side by side (nccl-tests style)");
  desc.add_options()("help,h", "show this help")(
      "scheme", po::value(&schemes)->default_value(schemes),
      "auto,zen,hc,agsparse,blocks,dense (comma list) or all (every one but auto)")(
      "auto-schemes", po::value(&autoSchemes)->default_value(autoSchemes),
      "auto's candidates, in order (as ZEN_AUTO_SCHEMES)")(
      "auto-profile-calls", po::value(&o.autoProfileCalls)->default_value(o.autoProfileCalls),
      "auto: timed calls per candidate before choosing (as ZEN_AUTO_PROFILE_CALLS)")(
      "transport", po::value(&o.transport)->default_value(o.transport), "inprocess, tcp or mpi")(
      "mpi-threads", po::value(&mpiThreads)->default_value(mpiThreads),
      "mpi: the thread level asked of MPI_Init_thread, multiple or serialized (the library's "
      "MPI backend: multiple, serialized with ZEN_MPI_THREADS_DISABLE=1)")(
      "ranks,n", po::value(&o.ranks)->default_value(o.ranks),
      "ranks as threads (inprocess, tcp without ZEN_RANK)")(
      "phases", po::bool_switch(&o.phases),
      "print each scheme's phases (us per call) under the table")(
      "threads", po::value(&o.threads)->default_value(o.threads),
      "CPU threads per rank for the schemes' work (the runtime's ZEN_THREADS; 1: the rank's "
      "own thread only)")("rows", po::value(&o.rows)->default_value(o.rows),
                          "|G|: rows of the dense tensor")(
      "tensors", po::value(&o.tensors)->default_value(o.tensors),
      "dense and split output: the rows as this many tensors, a fused bucket's")(
      "row-size", po::value(&o.rowSize)->default_value(o.rowSize), "elements per row")(
      "density", po::value(&densities)->default_value(densities),
      "non-zero rows per rank / |G| (comma list: one table row each)")(
      "overlap", po::value(&o.overlap)->default_value(o.overlap),
      "fraction of each rank's rows taken from one shared pool")(
      "skew", po::value(&skew)->default_value(skew), "uniform or zipf")(
      "zipf-s", po::value(&o.zipfS)->default_value(o.zipfS), "Zipf exponent")(
      "dtype", po::value(&dtype)->default_value(dtype),
      "float32|f32, float16|f16, bfloat16|bf16, "
      "float64|f64")("op", po::value(&op)->default_value(op), "sum or average")(
      "output", po::value(&output)->default_value(output),
      "dense (written into a tensor in place, as the runtime's buckets of dense outputs), "
      "sparse, or split (the sparse result split into the tensor, as the runtime's buckets "
      "with a sparse output)")("iters", po::value(&o.iters)->default_value(o.iters),
                               "timed iterations")(
      "warmup", po::value(&o.warmup)->default_value(o.warmup), "untimed iterations first")(
      "seed", po::value(&o.seed)->default_value(o.seed), "input seed")(
      "timeout", po::value(&o.timeoutSeconds)->default_value(o.timeoutSeconds),
      "seconds any wait on a peer may take")("json", po::value(&o.json),
                                             "also write the rows to this JSON file")(
      "link-gbps", po::value(&o.linkGbps),
      "add modeled time = busiest rank's bytes / this link (Gbit/s)");
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, desc), vm);
    po::notify(vm);
  } catch (const std::exception& e) {
    fmt::print(stderr, "zen-bench: {}\n", e.what());
    return 2;
  }
  if (vm.count("help")) {
    std::cout << desc << "\n";
    return 0;
  }
  auto fail = [](const Status& s) {
    fmt::print(stderr, "zen-bench: {}\n", s.message());
    return 2;
  };
  auto parsedSchemes = bench::parseSchemes(schemes);
  if (!parsedSchemes.isOk()) return fail(parsedSchemes.status());
  o.schemes = parsedSchemes.value();
  // The library's own parser and checks (core/config.cc).
  auto autoConfig = Config::parse({{"ZEN_AUTO_SCHEMES", autoSchemes},
                                   {"ZEN_AUTO_PROFILE_CALLS", std::to_string(o.autoProfileCalls)}});
  if (!autoConfig.isOk()) return fail(autoConfig.status());
  o.autoSchemes = autoConfig.value().autoSchemes;
  auto parsedType = bench::parseType(dtype);
  if (!parsedType.isOk()) return fail(parsedType.status());
  o.dtype = parsedType.value();
  o.densities.clear();
  for (const std::string& d : bench::splitList(densities)) {
    try {
      o.densities.push_back(std::stod(d));
    } catch (const std::exception&) {
      return fail(ZEN_ERROR(StatusCode::kInvalidArgument, "--density '{}' is not a number", d));
    }
  }
  for (double d : o.densities) {
    if (!(d >= 0 && d <= 1))
      return fail(ZEN_ERROR(StatusCode::kInvalidArgument, "--density {} is outside [0, 1]", d));
  }
  if (o.densities.empty()) return fail(ZEN_ERROR(StatusCode::kInvalidArgument, "no --density"));
  if (skew != "uniform" && skew != "zipf") {
    return fail(ZEN_ERROR(StatusCode::kInvalidArgument, "--skew must be uniform or zipf"));
  }
  o.zipf = skew == "zipf";
  if (op != "sum" && op != "average") {
    return fail(ZEN_ERROR(StatusCode::kInvalidArgument, "--op must be sum or average"));
  }
  o.op = op == "sum" ? ops::ReduceOp::kSum : ops::ReduceOp::kAverage;
  if (output != "dense" && output != "sparse" && output != "split") {
    return fail(ZEN_ERROR(StatusCode::kInvalidArgument, "--output must be dense, sparse or split"));
  }
  o.output = output == "dense"    ? bench::BenchOutput::kDense
             : output == "sparse" ? bench::BenchOutput::kSparse
                                  : bench::BenchOutput::kSplit;
  if (mpiThreads != "multiple" && mpiThreads != "serialized") {
    return fail(
        ZEN_ERROR(StatusCode::kInvalidArgument, "--mpi-threads must be multiple or serialized"));
  }
  o.mpiThreadMultiple = mpiThreads == "multiple";
  if (o.rows < 1 || o.rowSize < 1 || o.ranks < 1 || o.threads < 1 || o.iters < 1 || o.warmup < 0 ||
      o.overlap < 0 || o.overlap > 1 || o.linkGbps < 0 || o.tensors < 1 || o.tensors > o.rows) {
    return fail(
        ZEN_ERROR(StatusCode::kInvalidArgument,
                  "need rows, row-size, ranks, threads, iters >= 1, warmup >= 0, overlap in "
                  "[0, 1], link-gbps >= 0, tensors in [1, rows]"));
  }

  if (o.transport == "inprocess") return bench::runThreads(o, false);
  if (o.transport == "mpi") return bench::runMpi(o, &argc, &argv);
  if (o.transport != "tcp") {
    return fail(ZEN_ERROR(StatusCode::kInvalidArgument,
                          "--transport must be inprocess, tcp or mpi, not '{}'", o.transport));
  }
  // TCP: processes when a launcher set the ZEN_* placement, threads otherwise.
  auto config = Config::fromEnvironment();
  if (!config.isOk()) return fail(config.status());
  const Config& c = config.value();
  if (c.rank && c.size && !c.controllerAddr.empty()) return bench::runTcpProcess(o, c);
  return bench::runThreads(o, true);
}
