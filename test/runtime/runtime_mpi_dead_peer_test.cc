// What a dead peer does to a job under MPI (docs/architecture.md "Failure semantics"): Open
// MPI reports no error to the survivors; mpirun notices the killed process and terminates the
// whole job. This test runs `mpirun -np 3 zen_runtime_mpi_test --dead-peer=1` and checks
// exactly that: the job ends non-zero within a bound, after rank 1 said it was dying, and no
// rank "survived" (returned an error instead of being killed).
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

namespace zen::testing {
namespace {

struct CommandEnd {
  int exitCode = -1;
  int signal = 0;
  double seconds = 0;
  std::string output;
};

// Runs argv with stdout and stderr captured; killed after limitSeconds.
CommandEnd runCommand(std::vector<std::string> args, double limitSeconds) {
  CommandEnd end;
  int fds[2];
  if (pipe(fds) != 0) return end;
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);  // a group of its own, so the limit can kill mpirun and its ranks
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    close(fds[0]);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(fds[1]);
  const auto until = start + std::chrono::duration<double>(limitSeconds);
  char buffer[4096];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      kill(-pid, SIGKILL);
      break;
    }
    pollfd readable{fds[0], POLLIN, 0};
    if (poll(&readable, 1, static_cast<int>(left.count())) <= 0) continue;
    const ssize_t got = read(fds[0], buffer, sizeof(buffer));
    if (got <= 0) break;
    end.output.append(buffer, static_cast<size_t>(got));
  }
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  end.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (WIFEXITED(status)) end.exitCode = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) end.signal = WTERMSIG(status);
  return end;
}

TEST(MpiDeadPeer, MpirunKillsTheWholeJob) {
  const CommandEnd end = runCommand({ZEN_MPIEXEC, "--allow-run-as-root", "--oversubscribe", "-np",
                                     "3", ZEN_RUNTIME_MPI_TEST, "--dead-peer=1"},
                                    90);
  SCOPED_TRACE(end.output);
  EXPECT_NE(end.output.find("rank 1: killing myself at step 5"), std::string::npos);
  EXPECT_EQ(end.output.find("survived"), std::string::npos);
  EXPECT_TRUE(end.exitCode > 0 || end.signal != 0) << "exit " << end.exitCode;
  EXPECT_LT(end.seconds, 60.0);  // mpirun reacts within seconds, not at a timeout
}

}  // namespace
}  // namespace zen::testing
