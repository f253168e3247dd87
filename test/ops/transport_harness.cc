// Runs a transport test body on every rank of a job: ranks as threads (in-process, TCP over
// 127.0.0.1), as forked processes (TCP), or as the MPI processes mpirun started. Every wait
// here is bounded, so a hung rank turns into a test failure.
#include "test/ops/transport_harness.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <future>
#include <mutex>
#include <thread>

#include "ops/inprocess_transport.h"

namespace zen::ops::testing {
namespace {

constexpr double kMeetingSeconds = 30.0;

// Where the rank threads meet before tearing their transports down.
class Meeting {
 public:
  explicit Meeting(int n) : remaining_(n) {}
  void arriveAndWait(double seconds) {
    std::unique_lock<std::mutex> lock(mu_);
    if (--remaining_ == 0) cv_.notify_all();
    cv_.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return remaining_ == 0; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int remaining_;
};

void runThreads(const TransportParam& param,
                const RankOptions& options,
                const std::function<void(Transport&)>& fn) {
  const int n = param.ranks;
  auto hub = makeInProcessHub(n);
  std::promise<uint16_t> portPromise;
  std::shared_future<uint16_t> port = portPromise.get_future().share();
  std::once_flag portSet;
  auto publish = [&](uint16_t p) { std::call_once(portSet, [&] { portPromise.set_value(p); }); };
  Meeting meeting(n);
  std::vector<std::thread> threads;
  threads.reserve(n);
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      Result<std::unique_ptr<Transport>> transport = Status::ok();
      if (param.backend == Backend::kInProcess) {
        TransportOptions o;
        o.rank = r;
        o.size = n;
        o.timeoutSeconds = options.timeoutSeconds;
        transport = createInProcessTransport(hub, o);
      } else {
        TcpOptions o;
        o.rank = r;
        o.size = n;
        o.timeoutSeconds = options.timeoutSeconds;
        o.secret = "test-secret";
        o.rendezvousAddr = "127.0.0.1:0";
        o.onListening = publish;
        if (r > 0) {
          if (port.wait_for(std::chrono::duration<double>(options.timeoutSeconds)) !=
                  std::future_status::ready ||
              port.get() == 0) {
            ADD_FAILURE() << "rank " << r << ": rank 0 never listened";
            meeting.arriveAndWait(0);
            return;
          }
          o.rendezvousAddr = "127.0.0.1:" + std::to_string(port.get());
        }
        transport = createTcpTransport(o);
        if (r == 0) publish(0);  // no-op when listening worked; unblocks the others if not
      }
      if (!transport.isOk()) {
        ADD_FAILURE() << "rank " << r << ": " << transport.status().toString();
        meeting.arriveAndWait(0);
        return;
      }
      fn(*transport.value());
      // Not the transport timeout: ranks idle in a timeout test must outlive the waiting one.
      meeting.arriveAndWait(options.timeoutSeconds + kMeetingSeconds);
    });
  }
  for (auto& t : threads) t.join();
}

void runMpi(const RankOptions& options, const std::function<void(Transport&)>& fn) {
  MpiOptions o;
  o.timeoutSeconds = options.timeoutSeconds;
  o.maxChunkBytes = options.mpiMaxChunkBytes;
  Result<std::unique_ptr<Transport>> transport = createMpiTransport(o);
  ASSERT_TRUE(transport.isOk()) << transport.status().toString();
  fn(*transport.value());
}

[[noreturn]] void runChild(int rank,
                           const std::string& address,
                           int portFd,
                           const RankChild& child) {
  int code = 91;
  try {
    std::function<void(uint16_t)> report;
    if (portFd >= 0) {
      report = [portFd](uint16_t port) {
        if (write(portFd, &port, sizeof(port)) != sizeof(port)) _exit(92);
        close(portFd);
      };
    }
    code = child(rank, address, report);
  } catch (...) {
    code = 91;
  }
  std::fflush(stderr);
  _exit(code);
}

}  // namespace

const char* backendName(Backend backend) {
  switch (backend) {
    case Backend::kInProcess:
      return "inprocess";
    case Backend::kTcp:
      return "tcp";
    case Backend::kMpi:
      return "mpi";
  }
  return "unknown";
}

void PrintTo(const TransportParam& param, std::ostream* out) {
  *out << backendName(param.backend) << " with " << param.ranks << " ranks";
}

std::string paramName(const ::testing::TestParamInfo<TransportParam>& info) {
  if (info.param.ranks == 0) return backendName(info.param.backend);
  return std::string(backendName(info.param.backend)) + "_n" + std::to_string(info.param.ranks);
}

void runRanks(const TransportParam& param,
              const RankOptions& options,
              const std::function<void(Transport&)>& fn) {
  if (param.backend == Backend::kMpi) return runMpi(options, fn);
  runThreads(param, options, fn);
}

std::vector<ProcessEnd> forkRanks(int n,
                                  double limitSeconds,
                                  const RankChild& child,
                                  int lingering) {
  std::vector<ProcessEnd> ends(n);
  std::vector<pid_t> pids(n, -1);
  int fds[2];
  if (pipe(fds) != 0) {
    ADD_FAILURE() << "pipe failed";
    return ends;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  pids[0] = fork();
  if (pids[0] == 0) {
    close(fds[0]);
    runChild(0, "127.0.0.1:0", fds[1], child);
  }
  close(fds[1]);
  uint16_t port = 0;
  pollfd readable{fds[0], POLLIN, 0};
  if (poll(&readable, 1, static_cast<int>(limitSeconds * 1000)) == 1 &&
      read(fds[0], &port, sizeof(port)) == sizeof(port)) {
    for (int r = 1; r < n; ++r) {
      pids[r] = fork();
      if (pids[r] == 0) runChild(r, "127.0.0.1:" + std::to_string(port), -1, child);
    }
  } else {
    ADD_FAILURE() << "rank 0 never reported its port";
  }
  close(fds[0]);

  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(limitSeconds);
  int running = 0;
  for (pid_t pid : pids) running += pid > 0 ? 1 : 0;
  while (running > 0) {
    for (int r = 0; r < n; ++r) {
      int status = 0;
      if (pids[r] <= 0 || waitpid(pids[r], &status, WNOHANG) != pids[r]) continue;
      if (WIFEXITED(status)) ends[r].exitCode = WEXITSTATUS(status);
      if (WIFSIGNALED(status)) ends[r].signal = WTERMSIG(status);
      pids[r] = -1;
      --running;
    }
    const bool onlyLingererLeft = running == 1 && lingering >= 0 && pids[lingering] > 0;
    if (running > 0 && (onlyLingererLeft || std::chrono::steady_clock::now() > until)) {
      for (int r = 0; r < n; ++r) {
        if (pids[r] <= 0) continue;
        kill(pids[r], SIGKILL);
        int status = 0;
        waitpid(pids[r], &status, 0);
        ends[r].signal = SIGKILL;
        ends[r].killedByHarness = true;
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return ends;
}

std::vector<ProcessEnd> forkTcpRanks(int n,
                                     double timeoutSeconds,
                                     double limitSeconds,
                                     const std::function<int(Transport&)>& body,
                                     int lingering) {
  auto child = [&](int rank, const std::string& address, std::function<void(uint16_t)> report) {
    TcpOptions o;
    o.rank = rank;
    o.size = n;
    o.timeoutSeconds = timeoutSeconds;
    o.secret = "fork-secret";
    o.rendezvousAddr = address;
    o.onListening = std::move(report);
    Result<std::unique_ptr<Transport>> transport = createTcpTransport(o);
    if (!transport.isOk()) {
      std::fprintf(stderr, "rank %d: %s\n", rank, transport.status().toString().c_str());
      return 90;
    }
    return body(*transport.value());
  };
  return forkRanks(n, limitSeconds, child, lingering);
}

uint8_t patternByte(int from, int to, size_t i) {
  return static_cast<uint8_t>(from * 131 + to * 31 + i * 7 + (i >> 8));
}

uint64_t sumOverRanks(Transport& t, uint64_t value) {
  std::vector<ByteVector> all;
  EXPECT_TRUE(t.allgatherv(&value, sizeof(value), &all).isOk());
  uint64_t sum = 0;
  for (const ByteVector& v : all) {
    uint64_t x = 0;
    std::memcpy(&x, v.data(), sizeof(x));
    sum += x;
  }
  return sum;
}

}  // namespace zen::ops::testing
