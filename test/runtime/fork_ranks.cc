// Forked TCP ranks running a Runtime each (test/runtime/fork_ranks.h).
#include "test/runtime/fork_ranks.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "bindings/runtime_factory.h"

namespace zen::testing {
namespace {

[[noreturn]] void runChild(int rank,
                           int n,
                           std::map<std::string, std::string> env,
                           const std::string& address,
                           int portFd,
                           const std::function<int(Runtime&)>& body) {
  int code = 90;
  {
    env["ZEN_RANK"] = std::to_string(rank);
    env["ZEN_SIZE"] = std::to_string(n);
    env["ZEN_CONTROLLER_ADDR"] = address;
    env["ZEN_SECRET"] = "fork-runtime-secret";
    Result<Config> config = Config::parse(env);
    if (!config.isOk()) {
      std::fprintf(stderr, "rank %d: %s\n", rank, config.status().toString().c_str());
      std::fflush(stderr);
      _exit(code);
    }
    auto onListening = [portFd](uint16_t port) {
      if (write(portFd, &port, sizeof(port)) != sizeof(port)) _exit(92);
      close(portFd);
    };
    auto runtime = bindings::createTcpRuntime(
        config.value(), portFd >= 0 ? std::function<void(uint16_t)>(onListening) : nullptr);
    if (runtime.isOk()) {
      code = body(*runtime.value());
    } else {
      std::fprintf(stderr, "rank %d: %s\n", rank, runtime.status().toString().c_str());
    }
  }
  std::fflush(stderr);
  _exit(code);
}

}  // namespace

std::vector<RankEnd> forkRuntimeRanks(int n,
                                      const std::map<std::string, std::string>& env,
                                      double limitSeconds,
                                      const std::function<int(Runtime&)>& body) {
  std::vector<RankEnd> ends(static_cast<size_t>(n));
  std::vector<pid_t> pids(static_cast<size_t>(n), -1);
  int fds[2];
  if (pipe(fds) != 0) return ends;
  std::fflush(stdout);
  std::fflush(stderr);
  pids[0] = fork();
  if (pids[0] == 0) {
    close(fds[0]);
    runChild(0, n, env, "127.0.0.1:0", fds[1], body);
  }
  close(fds[1]);
  uint16_t port = 0;
  pollfd readable{fds[0], POLLIN, 0};
  if (poll(&readable, 1, static_cast<int>(limitSeconds * 1000)) == 1 &&
      read(fds[0], &port, sizeof(port)) == sizeof(port)) {
    for (int r = 1; r < n; ++r) {
      pids[static_cast<size_t>(r)] = fork();
      if (pids[static_cast<size_t>(r)] == 0) {
        runChild(r, n, env, "127.0.0.1:" + std::to_string(port), -1, body);
      }
    }
  }
  close(fds[0]);

  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(limitSeconds);
  int running = 0;
  for (pid_t pid : pids) running += pid > 0 ? 1 : 0;
  while (running > 0) {
    for (size_t r = 0; r < pids.size(); ++r) {
      int status = 0;
      if (pids[r] <= 0 || waitpid(pids[r], &status, WNOHANG) != pids[r]) continue;
      if (WIFEXITED(status)) ends[r].exitCode = WEXITSTATUS(status);
      if (WIFSIGNALED(status)) ends[r].signal = WTERMSIG(status);
      pids[r] = -1;
      --running;
    }
    if (running > 0 && std::chrono::steady_clock::now() > until) {
      for (size_t r = 0; r < pids.size(); ++r) {
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

}  // namespace zen::testing
