// The C API (bindings/c_api.h) between real processes over TCP: forked ranks call only zen_*
// functions on the process's Api. One job initializes through zen_init() from the
// environment as zenrun sets it; the others through the Api with an ephemeral control port
// (so parallel test runs never collide). Every wait is bounded; children that outlive the
// limit are killed.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "bindings/c_api.h"
#include "test/bindings/bindings_test_util.h"

// Host tensors are written {data, dtype, ndims, shape}, leaving the device fields zero (host
// memory), as C callers do.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

extern "C" int zen_c_smoke(void);

namespace zen::testing {
namespace {

using Body = std::function<int(int rank, int size)>;

// Removes every ZEN_* variable from this (child) process's environment.
void clearZenEnvironment() {
  std::vector<std::string> names;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string entry(*e);
    if (entry.rfind("ZEN_", 0) == 0) names.push_back(entry.substr(0, entry.find('=')));
  }
  for (const std::string& name : names) unsetenv(name.c_str());
}

[[noreturn]] void finishChild(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  _exit(code);
}

// Waits for the children (killing them after limitSeconds); their exit codes, -signal when
// killed by one.
std::vector<int> reap(const std::vector<pid_t>& pids, double limitSeconds) {
  std::vector<int> codes(pids.size(), -SIGKILL);
  std::vector<pid_t> running = pids;
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(limitSeconds);
  for (;;) {
    bool any = false;
    for (size_t r = 0; r < running.size(); ++r) {
      if (running[r] <= 0) continue;
      int status = 0;
      if (waitpid(running[r], &status, WNOHANG) == running[r]) {
        codes[r] = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
        running[r] = -1;
      } else {
        any = true;
      }
    }
    if (!any) return codes;
    if (std::chrono::steady_clock::now() > until) {
      for (pid_t pid : running) {
        if (pid <= 0) continue;
        kill(pid, SIGKILL);
        waitpid(pid, nullptr, 0);
      }
      return codes;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// Extra ZEN_* variables of a rank (its hand-set placement).
using RankEnv = std::function<std::map<std::string, std::string>(int rank)>;

// n ranks; each initializes the process's Api over TCP (rank 0 on an ephemeral port it
// reports through a pipe before the others start), then runs body with the C API.
std::vector<int> forkRanks(int n, double limitSeconds, const Body& body, const RankEnv& env = {}) {
  int fds[2];
  if (pipe(fds) != 0) return {};
  std::fflush(stdout);
  std::fflush(stderr);
  auto child = [&](int rank, const std::string& address, int portFd) {
    clearZenEnvironment();
    std::map<std::string, std::string> vars =
        env ? env(rank) : std::map<std::string, std::string>{};
    vars.insert({{"ZEN_RANK", std::to_string(rank)},
                 {"ZEN_SIZE", std::to_string(n)},
                 {"ZEN_CONTROLLER_ADDR", address},
                 {"ZEN_SECRET", "c-api-test"}});
    Config config = bindingsConfig(vars);
    auto factory = [portFd](const Config& c) {
      auto onListening = [portFd](uint16_t port) {
        if (write(portFd, &port, sizeof(port)) != sizeof(port)) _exit(92);
        close(portFd);
      };
      return bindings::createTcpRuntime(
          c, portFd >= 0 ? std::function<void(uint16_t)>(onListening) : nullptr);
    };
    const Status s = bindings::processApi().init(config, factory, "tcp");
    if (!s.isOk()) {
      std::fprintf(stderr, "rank %d: init: %s\n", rank, s.toString().c_str());
      finishChild(90);
    }
    finishChild(body(rank, n));
  };
  std::vector<pid_t> pids(static_cast<size_t>(n), -1);
  pids[0] = fork();
  if (pids[0] == 0) {
    close(fds[0]);
    child(0, "127.0.0.1:0", fds[1]);
  }
  close(fds[1]);
  uint16_t port = 0;
  pollfd readable{fds[0], POLLIN, 0};
  if (poll(&readable, 1, static_cast<int>(limitSeconds * 1000)) == 1 &&
      read(fds[0], &port, sizeof(port)) == sizeof(port)) {
    for (int r = 1; r < n; ++r) {
      pids[static_cast<size_t>(r)] = fork();
      if (pids[static_cast<size_t>(r)] == 0) child(r, "127.0.0.1:" + std::to_string(port), -1);
    }
  }
  close(fds[0]);
  return reap(pids, limitSeconds);
}

// Ports p and p + 1 on 127.0.0.1 (the control port and the data plane's usual rendezvous),
// for a job that reads ZEN_CONTROLLER_ADDR from the environment. Both stay bound, with
// SO_REUSEADDR but not listening, for the test's lifetime: closing them after the probe would
// let another process (ctest -j) take a port before rank 0 binds it. Linux lets a second
// SO_REUSEADDR socket bind and listen on a port held that way (rank 0's does:
// ops/tcp_rendezvous.cc openListener), refuses everything else, and never hands it out as an
// ephemeral port.
class HeldPorts {
 public:
  HeldPorts() {
    for (int attempt = 0; attempt < 50 && port_ == 0; ++attempt) {
      fds_[0] = bindLoopback(0);
      const int port = fds_[0] >= 0 ? boundPort(fds_[0]) : 0;
      fds_[1] = port > 0 && port < 65535 ? bindLoopback(port + 1) : -1;
      if (fds_[1] >= 0) {
        port_ = port;
      } else {
        closeAll();
      }
    }
  }
  ~HeldPorts() { closeAll(); }
  HeldPorts(const HeldPorts&) = delete;
  HeldPorts& operator=(const HeldPorts&) = delete;

  // p; 0 when no pair was found.
  int port() const { return port_; }
  // Makes the socket on p + offset listen (zenrun's controller socket, or another job holding
  // the port); its descriptor, still owned here, or -1.
  int listenOn(int offset) {
    const int fd = fds_[offset];
    return fd >= 0 && listen(fd, 16) == 0 ? fd : -1;
  }

 private:
  static int bindLoopback(int port) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    const int on = 1;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on)) != 0 ||
        bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      if (fd >= 0) close(fd);
      return -1;
    }
    return fd;
  }
  static int boundPort(int fd) {
    sockaddr_in addr{};
    socklen_t len = sizeof(addr);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return 0;
    return ntohs(addr.sin_port);
  }
  void closeAll() {
    for (int& fd : fds_) {
      if (fd >= 0) close(fd);
      fd = -1;
    }
  }

  int fds_[2] = {-1, -1};
  int port_ = 0;
};

#define CHILD_CHECK(cond, code)                                                             \
  do {                                                                                      \
    if (!(cond)) {                                                                          \
      std::fprintf(stderr, "rank %d: check failed at line %d: %s (last error: %s)\n", rank, \
                   __LINE__, #cond, zen_last_error());                                      \
      return code;                                                                          \
    }                                                                                       \
  } while (0)

void countCompletion(zen_handle_t, int32_t code, const char*, void* user) {
  if (code == ZEN_OK) ++*static_cast<std::atomic<int>*>(user);
}

// Every C function once, on every rank.
int everyFunction(int rank, int n) {
  CHILD_CHECK(zen_is_initialized() == 1, 10);
  CHILD_CHECK(zen_rank() == rank && zen_size() == n, 11);
  CHILD_CHECK(zen_local_rank() == rank && zen_local_size() == n, 12);
  CHILD_CHECK(zen_cross_rank() == 0 && zen_cross_size() == 1, 13);
  CHILD_CHECK(std::string(zen_backend()) == "tcp", 14);
  CHILD_CHECK(std::string(zen_version()).size() > 0, 15);
  CHILD_CHECK(zen_init() == ZEN_OK, 16);  // idempotent
  std::atomic<int> completions{0};
  const zen_completion_t count{countCompletion, &completions};

  // Allreduce: sum and average, float and int64, with completions.
  std::vector<float> f(6);
  std::vector<int64_t> l(3);
  for (size_t i = 0; i < f.size(); ++i) f[i] = static_cast<float>(rank + i);
  for (size_t i = 0; i < l.size(); ++i) l[i] = (rank + 1) * 1000 + static_cast<int64_t>(i);
  int64_t fShape[2] = {2, 3}, lShape[1] = {3};
  zen_tensor_t ft{f.data(), ZEN_FLOAT32, 2, fShape};
  zen_tensor_t lt{l.data(), ZEN_INT64, 1, lShape};
  std::vector<float> fOut(6, -1.0f);
  zen_tensor_t fo{fOut.data(), ZEN_FLOAT32, 2, fShape};
  zen_handle_t h1 = 0, h2 = 0;
  CHILD_CHECK(zen_enqueue_allreduce("c.f", &ft, &fo, ZEN_AVERAGE, count, &h1) == ZEN_OK, 20);
  CHILD_CHECK(zen_enqueue_allreduce("c.l", &lt, &lt, ZEN_SUM, count, &h2) == ZEN_OK, 21);
  CHILD_CHECK(h1 > 0 && h2 > h1, 22);
  CHILD_CHECK(zen_wait(h1, kWait) == ZEN_OK && zen_wait(h2, kWait) == ZEN_OK, 23);
  int done = 0;
  CHILD_CHECK(zen_poll(h1, &done) == ZEN_OK && done == 1, 24);
  CHILD_CHECK(completions.load() == 2, 25);
  for (size_t i = 0; i < 6; ++i) {
    CHILD_CHECK(std::fabs(fOut[i] - (static_cast<float>(i) + (n - 1) / 2.0f)) < 1e-6, 26);
  }
  for (size_t i = 0; i < 3; ++i) {
    CHILD_CHECK(l[i] == 1000 * n * (n + 1) / 2 + n * static_cast<int64_t>(i), 27);
  }
  CHILD_CHECK(zen_release(h1) == ZEN_OK && zen_release(h2) == ZEN_OK, 28);

  // Min, max, product (dense only): x_r[i] = (r + i) % 3 - 1 as int32 and float, in one group.
  {
    std::vector<int32_t> mn(5), mx(5);
    std::vector<float> pr(5);
    for (int i = 0; i < 5; ++i) mn[i] = mx[i] = (rank + i) % 3 - 1;
    for (int i = 0; i < 5; ++i) pr[i] = i == 0 ? 2.0f : static_cast<float>((rank + i) % 3 - 1);
    int64_t oShape[1] = {5};
    zen_op_t group[3] = {};
    const int32_t codes[3] = {ZEN_MIN, ZEN_MAX, ZEN_PRODUCT};
    const char* names[3] = {"c.min", "c.max", "c.prod"};
    void* data[3] = {mn.data(), mx.data(), pr.data()};
    for (int k = 0; k < 3; ++k) {
      group[k].kind = ZEN_OP_ALLREDUCE;
      group[k].name = names[k];
      group[k].input = zen_tensor_t{data[k], k == 2 ? ZEN_FLOAT32 : ZEN_INT32, 1, oShape};
      group[k].output = group[k].input;
      group[k].reduce_op = codes[k];
    }
    zen_handle_t hs[3];
    CHILD_CHECK(zen_enqueue_group(group, 3, hs) == ZEN_OK, 140);
    for (zen_handle_t h : hs) {
      CHILD_CHECK(zen_wait(h, kWait) == ZEN_OK && zen_release(h) == ZEN_OK, 141);
    }
    for (int i = 0; i < 5; ++i) {
      int32_t lo = 1, hi = -1;
      float prod = 1.0f;
      for (int p = 0; p < n; ++p) {
        lo = std::min(lo, (p + i) % 3 - 1);
        hi = std::max(hi, (p + i) % 3 - 1);
        prod *= i == 0 ? 2.0f : static_cast<float>((p + i) % 3 - 1);
      }
      CHILD_CHECK(mn[i] == lo && mx[i] == hi && pr[i] == prod, 142);
    }
    // Sparse allreduce refuses them at enqueue, on every rank.
    const int64_t spRows[2] = {1, 3};
    const float spValues[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    const zen_sparse_tensor_t sp{spRows, spValues, 2, 10, 4, ZEN_FLOAT32};
    for (int32_t op : {ZEN_MIN, ZEN_MAX, ZEN_PRODUCT, ZEN_ADASUM}) {
      CHILD_CHECK(zen_enqueue_sparse_allreduce("c.smin", &sp, op, nullptr, ZEN_NO_COMPLETION,
                                               &h1) == ZEN_INVALID_ARGUMENT,
                  143);
      CHILD_CHECK(
          std::strstr(zen_last_error(), "sparse allreduce reduces with sum or average") != nullptr,
          144);
    }
    CHILD_CHECK(
        zen_enqueue_allreduce("c.bad", &lt, &lt, 6, ZEN_NO_COMPLETION, &h1) == ZEN_INVALID_ARGUMENT,
        145);
    CHILD_CHECK(std::strstr(zen_last_error(), "ZEN_ADASUM") != nullptr, 146);
  }

  // Alltoall (rank r sends p + r rows of [r * 100 + p, i] to rank p) and a reducescatter of
  // 2n + 1 rows (uneven pieces), both in flight at once; then bad splits on one rank.
  {
    std::vector<int64_t> splits(static_cast<size_t>(n));
    int64_t rows = 0;
    for (int p = 0; p < n; ++p) rows += (splits[static_cast<size_t>(p)] = p + rank);
    std::vector<int64_t> sent;
    for (int p = 0; p < n; ++p) {
      for (int i = 0; i < p + rank; ++i) sent.insert(sent.end(), {rank * 100 + p, i});
    }
    int64_t aShape[2] = {rows, 2};
    zen_tensor_t at{sent.data(), ZEN_INT64, 2, aShape};
    const int64_t rsRows = 2 * n + 1;
    const int64_t mineRows = zen_reducescatter_rows(rsRows, rank, n);
    std::vector<float> rs(static_cast<size_t>(rsRows * 3)),
        rsOut(static_cast<size_t>(mineRows * 3));
    for (size_t i = 0; i < rs.size(); ++i) rs[i] = static_cast<float>(rank + i);
    int64_t rsShape[2] = {rsRows, 3}, outShape[2] = {mineRows, 3};
    zen_tensor_t rin{rs.data(), ZEN_FLOAT32, 2, rsShape},
        rout{rsOut.data(), ZEN_FLOAT32, 2, outShape};
    CHILD_CHECK(
        zen_enqueue_alltoall("c.a2a", &at, splits.data(), n, ZEN_NO_COMPLETION, &h1) == ZEN_OK,
        150);
    CHILD_CHECK(
        zen_enqueue_reducescatter("c.rs", &rin, &rout, ZEN_SUM, ZEN_NO_COMPLETION, &h2) == ZEN_OK,
        151);
    CHILD_CHECK(zen_wait(h1, kWait) == ZEN_OK && zen_wait(h2, kWait) == ZEN_OK, 152);
    zen_alltoall_result_t ar;
    CHILD_CHECK(zen_alltoall_result(h1, &ar) == ZEN_OK && ar.num_ranks == n, 153);
    const auto* got = static_cast<const int64_t*>(ar.output.data);
    int64_t k = 0;
    for (int s = 0; s < n; ++s) {
      CHILD_CHECK(ar.received_splits[s] == s + rank, 154);
      for (int i = 0; i < s + rank; ++i, ++k) {
        CHILD_CHECK(got[2 * k] == s * 100 + rank && got[2 * k + 1] == i, 155);
      }
    }
    CHILD_CHECK(ar.output.ndims == 2 && ar.output.shape[0] == k && ar.output.shape[1] == 2 &&
                    ar.output.bytes == static_cast<size_t>(k * 2) * sizeof(int64_t),
                156);
    int64_t offset = 0;
    for (int p = 0; p < rank; ++p) offset += zen_reducescatter_rows(rsRows, p, n);
    for (size_t e = 0; e < rsOut.size(); ++e) {
      const float at0 = static_cast<float>(offset * 3 + static_cast<int64_t>(e));
      CHILD_CHECK(rsOut[e] == static_cast<float>(n * (n - 1) / 2) + n * at0, 157);
    }
    CHILD_CHECK(zen_release(h1) == ZEN_OK && zen_release(h2) == ZEN_OK, 158);
    if (n > 1) {
      std::vector<int64_t> bad = splits;
      if (rank == n - 1) bad.pop_back();
      CHILD_CHECK(
          zen_enqueue_alltoall("c.a2a.bad", &at, bad.data(), static_cast<int32_t>(bad.size()),
                               ZEN_NO_COMPLETION, &h1) == ZEN_OK,
          159);
      CHILD_CHECK(zen_wait(h1, kWait) == ZEN_INVALID_ARGUMENT, 160);
      CHILD_CHECK(std::strstr(zen_last_error(), "alltoall splits do not fit") != nullptr, 161);
      CHILD_CHECK(zen_release(h1) == ZEN_OK, 162);
    }
    CHILD_CHECK(zen_reducescatter_rows(7, 0, 3) == 3 && zen_reducescatter_rows(7, 2, 3) == 2 &&
                    zen_reducescatter_rows(1, 0, 0) == -1,
                163);
  }

  // Sparse allreduce with overlapping and repeated rows: sparse and dense results.
  std::vector<Rows> rows;
  for (int p = 0; p < n; ++p) rows.push_back(makeRows(100 + p, 64, 4, 30));
  const std::vector<float> want = denseSum(rows);
  const Rows& mine = rows[static_cast<size_t>(rank)];
  zen_sparse_tensor_t st{
      mine.indices.data(), mine.values.data(), static_cast<int64_t>(mine.indices.size()), 64, 4,
      ZEN_FLOAT32};
  std::vector<float> dense(64 * 4, -1.0f);
  int64_t dShape[2] = {64, 4};
  zen_tensor_t dt{dense.data(), ZEN_FLOAT32, 2, dShape};
  CHILD_CHECK(zen_enqueue_sparse_allreduce("c.s", &st, ZEN_SUM, nullptr, count, &h1) == ZEN_OK, 30);
  CHILD_CHECK(zen_enqueue_sparse_allreduce("c.sd", &st, ZEN_SUM, &dt, count, &h2) == ZEN_OK, 31);
  CHILD_CHECK(zen_wait(h1, kWait) == ZEN_OK && zen_wait(h2, kWait) == ZEN_OK, 32);
  zen_sparse_result_t sr;
  CHILD_CHECK(zen_sparse_result(h1, &sr) == ZEN_OK, 33);
  CHILD_CHECK(sr.num_rows == 64 && sr.row_size == 4 && sr.dtype == ZEN_FLOAT32, 34);
  for (int64_t k = 1; k < sr.nnz; ++k) CHILD_CHECK(sr.indices[k - 1] < sr.indices[k], 35);
  CHILD_CHECK(densify(sr.indices, static_cast<const float*>(sr.values), sr.nnz, 64, 4) == want, 36);
  // The placed getter: the same host result, said to be on the host (CUDA inputs: a device).
  zen_sparse_result_t placed;
  int32_t placedType = -1;
  int32_t placedIndex = -1;
  CHILD_CHECK(zen_sparse_result_placed(h1, &placed, &placedType, &placedIndex) == ZEN_OK, 170);
  CHILD_CHECK(placed.indices == sr.indices && placed.values == sr.values && placed.nnz == sr.nnz &&
                  placed.num_rows == 64 && placedType == ZEN_DEVICE_CPU && placedIndex == 0,
              171);
  CHILD_CHECK(zen_sparse_result_placed(h1, &placed, nullptr, nullptr) == ZEN_OK, 172);
  CHILD_CHECK(zen_sparse_result_placed(999999, &placed, nullptr, nullptr) == ZEN_UNKNOWN_HANDLE,
              173);
  CHILD_CHECK(dense == want, 37);
  zen_gathered_t wrong;
  CHILD_CHECK(zen_allgather_result(999999, &wrong) == ZEN_UNKNOWN_HANDLE, 38);
  CHILD_CHECK(zen_release(h1) == ZEN_OK && zen_release(h2) == ZEN_OK, 39);

  // Allgather (rank + 1 rows each) and broadcast from the last rank.
  std::vector<int32_t> g(static_cast<size_t>(2 * (rank + 1)), rank);
  int64_t gShape[2] = {rank + 1, 2};
  zen_tensor_t gt{g.data(), ZEN_INT32, 2, gShape};
  std::vector<double> b(5, rank);
  int64_t bShape[1] = {5};
  zen_tensor_t bt{b.data(), ZEN_FLOAT64, 1, bShape};
  CHILD_CHECK(zen_enqueue_allgather("c.g", &gt, count, &h1) == ZEN_OK, 40);
  CHILD_CHECK(zen_enqueue_broadcast("c.b", &bt, n - 1, count, &h2) == ZEN_OK, 41);
  CHILD_CHECK(zen_wait(h1, kWait) == ZEN_OK && zen_wait(h2, kWait) == ZEN_OK, 42);
  zen_gathered_t gr;
  CHILD_CHECK(zen_allgather_result(h1, &gr) == ZEN_OK, 43);
  CHILD_CHECK(gr.ndims == 2 && gr.shape[0] == n * (n + 1) / 2 && gr.shape[1] == 2, 44);
  CHILD_CHECK(gr.bytes == static_cast<size_t>(gr.shape[0] * 2) * sizeof(int32_t), 45);
  CHILD_CHECK(gr.device_type == ZEN_DEVICE_CPU && gr.device_index == 0, 45);  // host inputs
  const auto* gv = static_cast<const int32_t*>(gr.data);
  for (int p = 0, at = 0; p < n; ++p) {
    for (int k = 0; k < 2 * (p + 1); ++k) CHILD_CHECK(gv[at++] == p, 46);
  }
  for (double v : b) CHILD_CHECK(v == n - 1, 47);
  CHILD_CHECK(zen_release(h1) == ZEN_OK && zen_release(h2) == ZEN_OK, 48);

  // A group: two dense tensors and a sparse one, fused where they can be.
  std::vector<float> a(4, 1.0f), c(4, 2.0f);
  int64_t vShape[1] = {4};
  zen_op_t ops[3];
  std::memset(ops, 0, sizeof(ops));
  ops[0].kind = ZEN_OP_ALLREDUCE;
  ops[0].name = "c.ga";
  ops[0].input = zen_tensor_t{a.data(), ZEN_FLOAT32, 1, vShape};
  ops[0].output = ops[0].input;
  ops[0].reduce_op = ZEN_SUM;
  ops[0].done = count;
  ops[1] = ops[0];
  ops[1].name = "c.gc";
  ops[1].input.data = c.data();
  ops[1].output.data = c.data();
  ops[2].kind = ZEN_OP_SPARSE_ALLREDUCE;
  ops[2].name = "c.gs";
  ops[2].sparse = st;
  ops[2].reduce_op = ZEN_AVERAGE;
  ops[2].done = count;
  zen_handle_t group[3];
  CHILD_CHECK(zen_enqueue_group(ops, 3, group) == ZEN_OK, 50);
  for (zen_handle_t h : group) CHILD_CHECK(zen_wait(h, kWait) == ZEN_OK, 51);
  for (float v : a) CHILD_CHECK(v == static_cast<float>(n), 52);
  for (float v : c) CHILD_CHECK(v == static_cast<float>(2 * n), 53);
  CHILD_CHECK(zen_sparse_result(group[2], &sr) == ZEN_OK, 54);
  const std::vector<float> mean =
      densify(sr.indices, static_cast<const float*>(sr.values), sr.nnz, 64, 4);
  for (size_t i = 0; i < mean.size(); ++i) {
    CHILD_CHECK(std::fabs(mean[i] - want[i] / static_cast<float>(n)) < 1e-5, 55);
  }
  for (zen_handle_t h : group) CHILD_CHECK(zen_release(h) == ZEN_OK, 56);
  CHILD_CHECK(completions.load() == 9, 57);

  // Errors. Enqueue-time: a name in flight, bad arguments.
  // "c.dup.<rank>" is posted by this rank alone first: with peers it waits for their posts,
  // which come only after "c.dup.tried", which completes once every rank has tried its
  // duplicate, so an accepted second post fails the check (a peer running ahead could
  // otherwise post it in between). With one rank it can complete before the second post
  // (nobody to wait for); then both ran legitimately and the pair is tried again.
  const auto dupName = [](int p) { return "c.dup." + std::to_string(p); };
  int dupCode = ZEN_OK;
  for (int attempt = 0; attempt < 20 && dupCode == ZEN_OK; ++attempt) {
    CHILD_CHECK(zen_enqueue_allreduce(dupName(rank).c_str(), &ft, &ft, ZEN_SUM, ZEN_NO_COMPLETION,
                                      &h1) == ZEN_OK,
                60);
    dupCode =
        zen_enqueue_allreduce(dupName(rank).c_str(), &ft, &ft, ZEN_SUM, ZEN_NO_COMPLETION, &h2);
    if (dupCode == ZEN_OK) {
      CHILD_CHECK(n == 1, 64);
      CHILD_CHECK(zen_wait(h1, kWait) == ZEN_OK && zen_release(h1) == ZEN_OK, 65);
      CHILD_CHECK(zen_wait(h2, kWait) == ZEN_OK && zen_release(h2) == ZEN_OK, 66);
    }
  }
  CHILD_CHECK(dupCode == ZEN_INVALID_ARGUMENT, 61);
  CHILD_CHECK(std::strstr(zen_last_error(), "already in flight") != nullptr, 62);
  std::vector<float> triedData(1, 1.0f);
  int64_t triedShape[1] = {1};
  zen_tensor_t tried{triedData.data(), ZEN_FLOAT32, 1, triedShape};
  CHILD_CHECK(zen_enqueue_allreduce("c.dup.tried", &tried, &tried, ZEN_SUM, ZEN_NO_COMPLETION,
                                    &h2) == ZEN_OK,
              60);
  CHILD_CHECK(zen_wait(h2, kWait) == ZEN_OK && zen_release(h2) == ZEN_OK, 63);
  std::vector<zen_handle_t> peers;
  for (int p = 0; p < n; ++p) {
    if (p == rank) continue;
    peers.emplace_back();
    CHILD_CHECK(zen_enqueue_allreduce(dupName(p).c_str(), &ft, &ft, ZEN_SUM, ZEN_NO_COMPLETION,
                                      &peers.back()) == ZEN_OK,
                60);
  }
  peers.push_back(h1);
  for (zen_handle_t h : peers) {
    CHILD_CHECK(zen_wait(h, kWait) == ZEN_OK && zen_release(h) == ZEN_OK, 63);
  }
  zen_tensor_t badType{f.data(), 42, 2, fShape};
  CHILD_CHECK(zen_enqueue_allreduce("c.bad", &badType, &badType, ZEN_SUM, ZEN_NO_COMPLETION, &h1) ==
                  ZEN_INVALID_ARGUMENT,
              64);
  CHILD_CHECK(std::strstr(zen_last_error(), "dtype") != nullptr, 65);
  CHILD_CHECK(
      zen_enqueue_allreduce("c.bad", &ft, &ft, 7, ZEN_NO_COMPLETION, &h1) == ZEN_INVALID_ARGUMENT,
      66);
  CHILD_CHECK(zen_enqueue_allreduce(nullptr, &ft, &ft, ZEN_SUM, ZEN_NO_COMPLETION, &h1) ==
                  ZEN_INVALID_ARGUMENT,
              67);
  // Completion-time: mismatched dtypes and shapes fail on every rank with the daemon's words.
  std::vector<double> fd(6, 1.0);
  if (n > 1) {
    zen_tensor_t mixed = rank == 0 ? ft : zen_tensor_t{fd.data(), ZEN_FLOAT64, 2, fShape};
    CHILD_CHECK(
        zen_enqueue_allreduce("c.mixed", &mixed, &mixed, ZEN_SUM, ZEN_NO_COMPLETION, &h1) == ZEN_OK,
        68);
    CHILD_CHECK(zen_wait(h1, kWait) == ZEN_INVALID_ARGUMENT, 69);
    CHILD_CHECK(std::strstr(zen_last_error(), "c.mixed") != nullptr, 70);
    CHILD_CHECK(zen_release(h1) == ZEN_OK, 71);
    int64_t otherShape[2] = {3, 2 + rank};
    zen_tensor_t shaped{fd.data(), ZEN_FLOAT64, 2, rank == 0 ? fShape : otherShape};
    std::vector<double> big(32, 0.0);
    shaped.data = big.data();
    CHILD_CHECK(zen_enqueue_allreduce("c.shape", &shaped, &shaped, ZEN_SUM, ZEN_NO_COMPLETION,
                                      &h1) == ZEN_OK,
                72);
    CHILD_CHECK(zen_wait(h1, kWait) == ZEN_INVALID_ARGUMENT, 73);
    CHILD_CHECK(zen_release(h1) == ZEN_OK, 74);
  }
  CHILD_CHECK(zen_wait(h1, 0) == ZEN_UNKNOWN_HANDLE && zen_poll(h1, &done) == ZEN_UNKNOWN_HANDLE,
              75);

  // Pending: rank 0 posts its barrier first and sees ZEN_PENDING; the others post theirs only
  // after "c.pending.seen", which rank 0 posts after its checks (a sleep on the others would
  // not do: a rank 0 descheduled longer would find the barrier complete).
  std::vector<float> seenData(1, 1.0f);
  int64_t seenShape[1] = {1};
  zen_tensor_t seen{seenData.data(), ZEN_FLOAT32, 1, seenShape};
  if (rank == 0) {
    CHILD_CHECK(zen_enqueue_barrier(ZEN_NO_COMPLETION, &h1) == ZEN_OK, 80);
    if (n > 1) {
      CHILD_CHECK(zen_wait(h1, 0.05) == ZEN_PENDING, 81);
      CHILD_CHECK(zen_poll(h1, &done) == ZEN_OK && done == 0, 82);
    }
  }
  CHILD_CHECK(zen_enqueue_allreduce("c.pending.seen", &seen, &seen, ZEN_SUM, ZEN_NO_COMPLETION,
                                    &h2) == ZEN_OK,
              80);
  CHILD_CHECK(zen_wait(h2, kWait) == ZEN_OK && zen_release(h2) == ZEN_OK, 83);
  if (rank != 0) CHILD_CHECK(zen_enqueue_barrier(ZEN_NO_COMPLETION, &h1) == ZEN_OK, 80);
  CHILD_CHECK(zen_wait(h1, kWait) == ZEN_OK && zen_release(h1) == ZEN_OK, 83);

  // Timeline and stats.
  const std::string path = ::testing::TempDir() + "zen_c_api_" + std::to_string(getppid());
  CHILD_CHECK(zen_start_timeline((path + ".json").c_str(), 1) == ZEN_OK, 90);
  CHILD_CHECK(
      zen_enqueue_allreduce("c.traced", &ft, &ft, ZEN_SUM, ZEN_NO_COMPLETION, &h1) == ZEN_OK, 91);
  CHILD_CHECK(zen_wait(h1, kWait) == ZEN_OK && zen_release(h1) == ZEN_OK, 92);
  CHILD_CHECK(zen_stop_timeline() == ZEN_OK, 93);
  std::ifstream trace(path + ".rank" + std::to_string(rank) + ".json");
  std::stringstream text;
  text << trace.rdbuf();
  CHILD_CHECK(text.str().find("c.traced") != std::string::npos, 94);
  zen_stats_t stats;
  CHILD_CHECK(zen_stats(&stats) == ZEN_OK, 95);
  CHILD_CHECK(stats.completed >= 12 && stats.failed >= (n > 1 ? 2u : 0u) && stats.cycles > 0, 96);
  CHILD_CHECK(n == 1 || stats.bytes_sent > 0, 97);
  char* json = nullptr;
  CHILD_CHECK(zen_stats_json(&json) == ZEN_OK, 98);
  const std::string js(json);
  zen_free(json);
  CHILD_CHECK(js.find("\"c.s\"") != std::string::npos &&
                  js.find("\"buckets_by_scheme\"") != std::string::npos &&
                  js.find("\"fusion_threshold_bytes\"") != std::string::npos,
              99);

  // Join: rank 0 first; the others reduce without it, then join.
  std::vector<float> j(2, 1.0f);
  int64_t jShape[1] = {2};
  zen_tensor_t jt{j.data(), ZEN_FLOAT32, 1, jShape};
  if (rank != 0) {
    CHILD_CHECK(zen_enqueue_allreduce("c.j", &jt, &jt, ZEN_SUM, ZEN_NO_COMPLETION, &h1) == ZEN_OK,
                100);
    CHILD_CHECK(zen_wait(h1, kWait) == ZEN_OK && j[0] == static_cast<float>(n - 1), 101);
  }
  CHILD_CHECK(zen_enqueue_join(count, &h2) == ZEN_OK, 102);
  CHILD_CHECK(zen_wait(h2, kWait) == ZEN_OK, 103);
  int32_t last = -2;
  CHILD_CHECK(zen_join_result(h2, &last) == ZEN_OK, 104);
  CHILD_CHECK(n == 1 ? last == 0 : (last >= 1 && last < n), 105);

  // Shutdown: this rank's request or a peer's; afterwards nothing is initialized.
  const int down = zen_shutdown();
  CHILD_CHECK(down == ZEN_OK || (down == ZEN_ABORTED &&
                                 std::strstr(zen_last_error(), "at user request") != nullptr),
              110);
  CHILD_CHECK(zen_is_initialized() == 0 && zen_rank() == -1, 111);
  CHILD_CHECK(zen_enqueue_barrier(ZEN_NO_COMPLETION, &h1) == ZEN_NOT_INITIALIZED, 112);
  CHILD_CHECK(zen_stats(&stats) == ZEN_NOT_INITIALIZED, 113);
  CHILD_CHECK(zen_join_result(h2, &last) == ZEN_OK && zen_release(h2) == ZEN_OK, 114);
  CHILD_CHECK(zen_shutdown() == ZEN_OK, 115);
  return 0;
}

TEST(CApi, EveryFunctionAcrossForkedTcpRanks) {
  for (int n : {1, 2, 3}) {
    const std::vector<int> codes = forkRanks(n, 120, everyFunction);
    ASSERT_EQ(codes.size(), static_cast<size_t>(n));
    for (int r = 0; r < n; ++r)
      EXPECT_EQ(codes[static_cast<size_t>(r)], 0) << n << " ranks, rank " << r;
  }
}

// A dense float operation of kind over process set ps, posted through zen_enqueue_group (the
// single-operation functions run over every rank); its handle, 0 when refused.
zen_handle_t enqueueInSet(int32_t kind,
                          const char* name,
                          zen_tensor_t* in,
                          zen_tensor_t* out,
                          int32_t ps,
                          int32_t root = 0) {
  zen_op_t op{};
  op.kind = kind;
  op.name = name;
  op.input = *in;
  if (out != nullptr) op.output = *out;
  op.reduce_op = ZEN_SUM;
  op.root_rank = root;
  op.process_set = ps;
  zen_handle_t h = 0;
  return zen_enqueue_group(&op, 1, &h) == ZEN_OK ? h : 0;
}

bool waitAndRelease(zen_handle_t h) {
  return h > 0 && zen_wait(h, kWait) == ZEN_OK && zen_release(h) == ZEN_OK;
}

// Process sets on 4 ranks: {0, 1} and {2, 3} added, the same names running in both at once,
// a global allreduce between, the refusals (a non-member, an unknown set, join in a set,
// the global set's removal), {1, 2, 3} added and removed; results against the members'
// known inputs (x_r = r + 1).
int processSets(int rank, int n) {
  const int32_t pairs[2][2] = {{0, 1}, {2, 3}};
  int32_t ids[2] = {-1, -1};
  CHILD_CHECK(zen_add_process_set(pairs[0], 2, &ids[0]) == ZEN_OK, 10);
  const int32_t reversed[2] = {3, 2};  // any order: the set is {2, 3}
  CHILD_CHECK(zen_add_process_set(reversed, 2, &ids[1]) == ZEN_OK, 11);
  CHILD_CHECK(ids[0] == 1 && ids[1] == 2, 12);  // rank 0 numbers them in order
  int32_t count = -1;
  int32_t members[4] = {-1, -1, -1, -1};
  CHILD_CHECK(zen_process_set_ranks(ids[1], nullptr, 0, &count) == ZEN_OK && count == 2, 13);
  CHILD_CHECK(zen_process_set_ranks(ids[1], members, 4, &count) == ZEN_OK && members[0] == 2 &&
                  members[1] == 3 && members[2] == -1,
              14);
  CHILD_CHECK(
      zen_process_set_ranks(0, members, 4, &count) == ZEN_OK && count == n && members[3] == 3, 15);
  const int mine = rank / 2;
  const int32_t ps = ids[mine];
  const int other = 1 - mine;

  // Allreduce and broadcast (root 1: the set's second rank) under the same names in both sets.
  float x[3], y[3];
  int64_t shape[1] = {3};
  for (int i = 0; i < 3; ++i) x[i] = y[i] = static_cast<float>((rank + 1) * (i + 1));
  zen_tensor_t xt{x, ZEN_FLOAT32, 1, shape}, yt{y, ZEN_FLOAT32, 1, shape};
  const zen_handle_t hx = enqueueInSet(ZEN_OP_ALLREDUCE, "ps.x", &xt, &xt, ps);
  const zen_handle_t hy = enqueueInSet(ZEN_OP_BROADCAST, "ps.y", &yt, nullptr, ps, 1);
  CHILD_CHECK(waitAndRelease(hx) && waitAndRelease(hy), 20);
  const float setSum = static_cast<float>(pairs[mine][0] + 1 + pairs[mine][1] + 1);
  for (int i = 0; i < 3; ++i) {
    CHILD_CHECK(x[i] == setSum * (i + 1), 21);
    CHILD_CHECK(y[i] == static_cast<float>((pairs[mine][1] + 1) * (i + 1)), 22);
  }

  // A global allreduce between the sets' collectives.
  float g = 1.0f;
  int64_t one[1] = {1};
  zen_tensor_t gt{&g, ZEN_FLOAT32, 1, one};
  zen_handle_t h = 0;
  CHILD_CHECK(
      zen_enqueue_allreduce("ps.global", &gt, &gt, ZEN_SUM, ZEN_NO_COMPLETION, &h) == ZEN_OK, 30);
  CHILD_CHECK(waitAndRelease(h) && g == static_cast<float>(n), 31);

  // Allgather over the set: the members' rows in set order.
  float row = static_cast<float>(rank);
  zen_tensor_t rt{&row, ZEN_FLOAT32, 1, one};
  h = enqueueInSet(ZEN_OP_ALLGATHER, "ps.gather", &rt, nullptr, ps);
  CHILD_CHECK(h > 0 && zen_wait(h, kWait) == ZEN_OK, 40);
  zen_gathered_t gathered{};
  CHILD_CHECK(zen_allgather_result(h, &gathered) == ZEN_OK && gathered.shape[0] == 2, 41);
  const float* rows = static_cast<const float*>(gathered.data);
  CHILD_CHECK(rows[0] == pairs[mine][0] && rows[1] == pairs[mine][1], 42);
  CHILD_CHECK(zen_release(h) == ZEN_OK, 43);

  // Refused at enqueue, on this rank alone: the other set, an unknown set, join in a set.
  CHILD_CHECK(enqueueInSet(ZEN_OP_ALLREDUCE, "ps.foreign", &xt, &xt, ids[other]) == 0, 50);
  CHILD_CHECK(std::strstr(zen_last_error(), "not in process set") != nullptr, 51);
  CHILD_CHECK(enqueueInSet(ZEN_OP_ALLREDUCE, "ps.unknown", &xt, &xt, 77) == 0, 52);
  CHILD_CHECK(std::strstr(zen_last_error(), "does not exist") != nullptr, 53);
  zen_op_t join{};
  join.kind = ZEN_OP_JOIN;
  join.process_set = ps;
  CHILD_CHECK(zen_enqueue_group(&join, 1, &h) == ZEN_INVALID_ARGUMENT, 54);
  CHILD_CHECK(zen_remove_process_set(0) == ZEN_INVALID_ARGUMENT, 55);
  CHILD_CHECK(zen_process_set_ranks(77, members, 4, &count) == ZEN_INVALID_ARGUMENT, 56);

  // A set of three, added after the others (id 3) and removed: gone everywhere.
  const int32_t three[3] = {1, 2, 3};
  int32_t id3 = -1;
  CHILD_CHECK(zen_add_process_set(three, 3, &id3) == ZEN_OK && id3 == 3, 60);
  if (rank >= 1) {
    float z = static_cast<float>(rank);
    zen_tensor_t zt{&z, ZEN_FLOAT32, 1, one};
    CHILD_CHECK(waitAndRelease(enqueueInSet(ZEN_OP_ALLREDUCE, "ps.z", &zt, &zt, id3)), 61);
    CHILD_CHECK(z == 6.0f, 62);
  }
  CHILD_CHECK(zen_remove_process_set(id3) == ZEN_OK, 63);
  CHILD_CHECK(zen_process_set_ranks(id3, members, 4, &count) == ZEN_INVALID_ARGUMENT, 64);
  CHILD_CHECK(enqueueInSet(ZEN_OP_ALLREDUCE, "ps.removed", &xt, &xt, id3) == 0, 65);

  // Ranks outside the job fail the add on every rank.
  const int32_t outside[2] = {0, 9};
  int32_t bad = -1;
  CHILD_CHECK(zen_add_process_set(outside, 2, &bad) == ZEN_INVALID_ARGUMENT, 70);

  const int down = zen_shutdown();
  CHILD_CHECK(down == ZEN_OK || down == ZEN_ABORTED, 80);
  return 0;
}

TEST(CApi, ProcessSetsAcrossFourForkedTcpRanks) {
  const std::vector<int> codes = forkRanks(4, 120, processSets);
  ASSERT_EQ(codes.size(), 4u);
  for (int r = 0; r < 4; ++r) EXPECT_EQ(codes[static_cast<size_t>(r)], 0) << "rank " << r;
}

// One init of a job: the control port, and the listening socket rank 0 gets as
// ZEN_CONTROLLER_FD (zenrun's socket, inherited; -1: none).
struct EnvironmentRound {
  int port = 0;
  int controllerFd = -1;
};

// zen_init() from the environment zenrun sets (ZEN_RANK, ZEN_SIZE, ZEN_CONTROLLER_ADDR), once
// per round in the same two processes, as an elastic worker re-initializes: an allreduce and
// a shutdown in each.
void expectEnvironmentJob(const std::vector<EnvironmentRound>& rounds) {
  constexpr int n = 2;
  std::vector<pid_t> pids;
  std::fflush(stdout);
  std::fflush(stderr);
  for (int rank = 0; rank < n; ++rank) {
    const pid_t pid = fork();
    if (pid == 0) {
      clearZenEnvironment();
      setenv("ZEN_RANK", std::to_string(rank).c_str(), 1);
      setenv("ZEN_SIZE", std::to_string(n).c_str(), 1);
      setenv("ZEN_LOCAL_RANK", std::to_string(rank).c_str(), 1);
      setenv("ZEN_LOCAL_SIZE", std::to_string(n).c_str(), 1);
      setenv("ZEN_SECRET", "from-env", 1);
      setenv("ZEN_TIMEOUT", "20", 1);
      int code = 0;
      for (size_t round = 0; round < rounds.size() && code == 0; ++round) {
        const EnvironmentRound& r = rounds[round];
        setenv("ZEN_CONTROLLER_ADDR", ("127.0.0.1:" + std::to_string(r.port)).c_str(), 1);
        unsetenv("ZEN_CONTROLLER_FD");
        if (rank == 0 && r.controllerFd >= 0) {
          setenv("ZEN_CONTROLLER_FD", std::to_string(r.controllerFd).c_str(), 1);
        }
        if (zen_init() != ZEN_OK) {
          std::fprintf(stderr, "rank %d round %zu: zen_init: %s\n", rank, round, zen_last_error());
          code = 90;
          break;
        }
        std::vector<float> x(3, 1.0f);
        int64_t shape[1] = {3};
        zen_tensor_t t{x.data(), ZEN_FLOAT32, 1, shape};
        zen_handle_t h = 0;
        if (zen_rank() != rank || zen_size() != n) code = 91;
        if (!code && zen_enqueue_allreduce("env.x", &t, &t, ZEN_SUM, ZEN_NO_COMPLETION, &h)) {
          code = 92;
        }
        if (!code && (zen_wait(h, kWait) != ZEN_OK || x[0] != n)) code = 93;
        const int down = zen_shutdown();
        if (!code && down != ZEN_OK && down != ZEN_ABORTED) code = 94;
      }
      finishChild(code);
    }
    pids.push_back(pid);
  }
  const std::vector<int> codes = reap(pids, 60);
  for (int r = 0; r < n; ++r) EXPECT_EQ(codes[static_cast<size_t>(r)], 0) << "rank " << r;
}

void expectEnvironmentJob(int port, int controllerFd = -1) {
  expectEnvironmentJob({EnvironmentRound{port, controllerFd}});
}

TEST(CApi, InitFromTheEnvironment) {
  HeldPorts ports;
  ASSERT_GT(ports.port(), 0);
  expectEnvironmentJob(ports.port());
}

// Another job on this host holds the control port + 1 (the data plane's usual rendezvous):
// rank 0 takes any free port and tells the others over the control transport.
TEST(CApi, InitWhenTheDataPortIsTaken) {
  HeldPorts ports;
  ASSERT_GT(ports.port(), 0);
  ASSERT_GE(ports.listenOn(1), 0);
  expectEnvironmentJob(ports.port());
}

// zenrun's controller socket: this process listens on the port (so nothing else can bind it,
// rank 0 included) and rank 0 inherits the socket as ZEN_CONTROLLER_FD and accepts on it.
TEST(CApi, InitOnTheControllerSocketZenrunHandsOver) {
  HeldPorts ports;
  ASSERT_GT(ports.port(), 0);
  const int listener = ports.listenOn(0);
  ASSERT_GE(listener, 0);
  expectEnvironmentJob(ports.port(), listener);
}

// A ZEN_CONTROLLER_FD that is no socket listening on the port (a closed one after a re-init,
// or a stray file) is left alone: rank 0 binds the port as usual.
TEST(CApi, InitIgnoresAControllerFdThatIsNotTheListener) {
  HeldPorts ports;
  ASSERT_GT(ports.port(), 0);
  const int file = open("/dev/null", O_RDONLY);
  ASSERT_GE(file, 0);
  expectEnvironmentJob(ports.port(), file);
  close(file);
  HeldPorts others;
  ASSERT_GT(others.port(), 0);
  expectEnvironmentJob(others.port(), 1000);  // not open at all
}

// An elastic worker that is rank 0 in every round hands a fresh listening socket each time
// and keeps its own descriptor open until zen_init returns (nothing else can take the port):
// each init must take its round's socket, since binding that port would fail. The middle
// round names the first round's descriptor again: closed by the first runtime (or reused for
// another file), it is left alone and rank 0 binds its port.
TEST(CApi, EveryInitTakesItsRoundsControllerSocket) {
  HeldPorts ports[3];
  std::vector<EnvironmentRound> rounds;
  for (int round = 0; round < 3; ++round) {
    ASSERT_GT(ports[round].port(), 0);
    const int listener = round == 1 ? -1 : ports[round].listenOn(0);
    if (round != 1) {
      ASSERT_GE(listener, 0);
    }
    rounds.push_back({ports[round].port(), round == 1 ? rounds.front().controllerFd : listener});
  }
  expectEnvironmentJob(rounds);
}

// A C program (compiled as C) running a job of one through zen_init().
// The NCCL_VERSION_CODE of the nccl.h this build compiled against (CMake passes its path,
// "" without NCCL), read from the header itself: 0 without NCCL.
int buildNcclVersion() {
  const std::string header = ZENTEST_NCCL_HEADER;
  if (header.empty()) return 0;
  std::ifstream in(header);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string define, name;
    int value = -1;
    if (words >> define >> name >> value && define == "#define" && name == "NCCL_VERSION_CODE")
      return value;
  }
  ADD_FAILURE() << "no NCCL_VERSION_CODE in " << header;
  return -1;
}

TEST(CApi, BuildInfoMatchesTheBuild) {
  EXPECT_EQ(zen_mpi_built(), ZENTEST_WITH_MPI);
  EXPECT_EQ(zen_nccl_built(), buildNcclVersion());
  EXPECT_EQ(zen_cuda_built(), zen_nccl_built() != 0 ? 1 : 0);
  EXPECT_EQ(ZEN_C_API_VERSION, 7);
}

// Every rank reports `expected` from zen_is_homogeneous, -1 before init, and 0 from
// zen_mpi_threads_supported (TCP).
Body expectHomogeneous(int expected) {
  return [expected](int rank, int) {
    if (zen_is_homogeneous() != expected || zen_mpi_threads_supported() != 0) {
      std::fprintf(stderr, "rank %d: homogeneous %d (expected %d), mpi threads %d\n", rank,
                   zen_is_homogeneous(), expected, zen_mpi_threads_supported());
      return 1;
    }
    (void)zen_shutdown();  // not ZEN_OK where another rank stopped the job first
    return zen_is_homogeneous() == -1 && zen_mpi_threads_supported() == -1 ? 0 : 3;
  };
}

// Hand-set placement on "hosts" of the given slot counts, filled in rank order; cross rank and
// size among the hosts that have this local rank (Horovod's).
RankEnv hostsOf(std::vector<int> slots) {
  return [slots](int rank) {
    size_t host = 0;
    int first = 0;
    while (rank >= first + slots[host]) first += slots[host++];
    const int local = rank - first;
    int crossRank = 0;
    int crossSize = 0;
    for (size_t h = 0; h < slots.size(); ++h) {
      if (slots[h] <= local) continue;
      if (h < host) ++crossRank;
      ++crossSize;
    }
    return std::map<std::string, std::string>{{"ZEN_LOCAL_RANK", std::to_string(local)},
                                              {"ZEN_LOCAL_SIZE", std::to_string(slots[host])},
                                              {"ZEN_CROSS_RANK", std::to_string(crossRank)},
                                              {"ZEN_CROSS_SIZE", std::to_string(crossSize)}};
  };
}

// Horovod's is_homogeneous: every host the same number of ranks, the same answer on every
// rank. Hosts of 4 and 2 slots are not (size % local_size == 0 on the 2-slot host would say
// they were); hosts of 2 and 2, one host, and a job of one are.
TEST(CApi, IsHomogeneousComparesEveryHostsRanks) {
  struct Case {
    std::vector<int> slots;
    int expected;
  };
  for (const Case& c :
       {Case{{4, 2}, 0}, Case{{2, 1}, 0}, Case{{2, 2}, 1}, Case{{3}, 1}, Case{{1}, 1}}) {
    int n = 0;
    for (int s : c.slots) n += s;
    const std::vector<int> codes =
        forkRanks(n, 120, expectHomogeneous(c.expected), hostsOf(c.slots));
    ASSERT_EQ(codes.size(), static_cast<size_t>(n));
    for (int r = 0; r < n; ++r)
      EXPECT_EQ(codes[static_cast<size_t>(r)], 0) << n << " ranks, rank " << r;
  }
  EXPECT_EQ(zen_is_homogeneous(), -1);  // this process never initialized
}

TEST(CApi, CProgramRunsAJobOfOne) {
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid == 0) {
    clearZenEnvironment();
    unsetenv("OMPI_COMM_WORLD_RANK");
    unsetenv("OMPI_COMM_WORLD_SIZE");
    unsetenv("PMI_RANK");
    unsetenv("PMI_SIZE");
    finishChild(zen_c_smoke());
  }
  EXPECT_EQ(reap({pid}, 60).front(), 0);
}

}  // namespace
}  // namespace zen::testing
