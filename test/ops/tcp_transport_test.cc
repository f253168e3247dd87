// TCP-only behaviour: the handshake refuses strangers, frame lengths are bounded, and real
// processes (forked, over 127.0.0.1) that die or stall are reported to the survivors within
// the timeout instead of hanging them. Also the in-process hub's own checks.
#include <gtest/gtest.h>
#include <signal.h>
#include <spdlog/sinks/ostream_sink.h>

#include <boost/asio.hpp>

#include <chrono>
#include <cstdio>
#include <future>
#include <sstream>
#include <thread>

#include "ops/inprocess_transport.h"
#include "ops/tcp_transport.h"
#include "test/ops/transport_harness.h"

namespace zen::ops::testing {
namespace {

using std::chrono::steady_clock;

// Rank 0 of a 2-rank job on its own thread, logging into `log`.
class RootThread {
 public:
  RootThread(const std::string& secret, std::ostringstream* log, size_t maxFrameBytes = 1 << 20)
      : thread_([this, secret, log, maxFrameBytes] {
          TcpOptions o;
          o.rank = 0;
          o.size = 2;
          o.timeoutSeconds = 10;
          o.secret = secret;
          o.rendezvousAddr = "127.0.0.1:0";
          o.maxFrameBytes = maxFrameBytes;
          o.logger = std::make_shared<spdlog::logger>(
              "root", std::make_shared<spdlog::sinks::ostream_sink_mt>(*log));
          o.onListening = [this](uint16_t p) { port_.set_value(p); };
          transport_ = std::make_unique<Result<std::unique_ptr<Transport>>>(createTcpTransport(o));
          if (!transport_->isOk()) return;
          done_ = transport_->value()->barrier();
        }) {}
  ~RootThread() {
    if (thread_.joinable()) thread_.join();
  }

  std::string address() {
    auto future = port_.get_future();
    EXPECT_EQ(future.wait_for(std::chrono::seconds(10)), std::future_status::ready);
    return "127.0.0.1:" + std::to_string(future.get());
  }
  Status finish() {
    if (thread_.joinable()) thread_.join();
    if (!transport_->isOk()) return transport_->status();
    return done_;
  }

 private:
  std::promise<uint16_t> port_;
  std::unique_ptr<Result<std::unique_ptr<Transport>>> transport_;
  Status done_;
  std::thread thread_;
};

TcpOptions rankOne(const std::string& address, const std::string& secret) {
  TcpOptions o;
  o.rank = 1;
  o.size = 2;
  o.timeoutSeconds = 10;
  o.secret = secret;
  o.rendezvousAddr = address;
  return o;
}

TEST(TcpTransport, WrongSecretIsRefusedAndLogged) {
  std::ostringstream log;
  RootThread root("right", &log);
  const std::string address = root.address();

  Result<std::unique_ptr<Transport>> impostor = createTcpTransport(rankOne(address, "wrong"));
  ASSERT_FALSE(impostor.isOk());
  EXPECT_EQ(impostor.status().code(), StatusCode::kIoError) << impostor.status().toString();
  EXPECT_NE(impostor.status().message().find("secret"), std::string::npos)
      << impostor.status().toString();

  // The rendezvous goes on: the real rank 1 still joins.
  Result<std::unique_ptr<Transport>> real = createTcpTransport(rankOne(address, "right"));
  ASSERT_TRUE(real.isOk()) << real.status().toString();
  EXPECT_TRUE(real.value()->barrier().isOk());
  EXPECT_TRUE(root.finish().isOk());
  EXPECT_NE(log.str().find("refused a connection"), std::string::npos) << log.str();
  EXPECT_NE(log.str().find("wrong job secret"), std::string::npos) << log.str();
}

TEST(TcpTransport, StrangerSendingGarbageIsRefused) {
  std::ostringstream log;
  RootThread root("s", &log);
  const std::string address = root.address();
  {
    boost::asio::io_context io;
    boost::asio::ip::tcp::socket stranger(io);
    stranger.connect(boost::asio::ip::tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"),
                                                    std::stoi(address.substr(10))));
    const std::string junk(64, 'x');
    boost::asio::write(stranger, boost::asio::buffer(junk));
  }
  Result<std::unique_ptr<Transport>> real = createTcpTransport(rankOne(address, "s"));
  ASSERT_TRUE(real.isOk()) << real.status().toString();
  EXPECT_TRUE(real.value()->barrier().isOk());
  EXPECT_TRUE(root.finish().isOk());
  EXPECT_NE(log.str().find("not a Zen peer"), std::string::npos) << log.str();
}

TEST(TcpTransport, FrameAboveTheLimitIsRejectedBeforeAllocating) {
  std::ostringstream log;
  RootThread root("s", &log, /*maxFrameBytes=*/1024);
  Result<std::unique_ptr<Transport>> one = createTcpTransport(rankOne(root.address(), "s"));
  ASSERT_TRUE(one.isOk()) << one.status().toString();
  // Rank 0 waits in its barrier; rank 1's 4 KB message is above rank 0's 1 KB limit, so rank
  // 0's read side fails and it aborts, closing the connection, which rank 1 then sees.
  const ByteVector big(4096, 1);
  const Status sent = one.value()->send(0, big.data(), big.size());
  const Status root0 = root.finish();
  EXPECT_EQ(root0.code(), StatusCode::kIoError) << root0.toString();
  EXPECT_NE(root0.message().find("above the limit of 1024"), std::string::npos) << root0.toString();
  if (sent.isOk()) {
    int x = 0;
    const Status after = one.value()->recv(0, &x, sizeof(x));
    EXPECT_EQ(after.code(), StatusCode::kIoError) << after.toString();
  }
}

TEST(TcpTransport, RanksAsForkedProcessesAgree) {
  const auto ends = forkTcpRanks(4, 10.0, 30.0, [](Transport& t) {
    float x = static_cast<float>(t.rank() + 1);
    if (!t.allreduce(&x, 1, DataType::kFloat32).isOk() || x != 10.0f) return 1;
    std::vector<ByteVector> outgoing(t.size());
    std::vector<ConstBytes> sends(t.size());
    for (int p = 0; p < t.size(); ++p) {
      outgoing[p].assign(100 * t.rank() + p, static_cast<uint8_t>(t.rank()));
      sends[p] = ConstBytes{outgoing[p].data(), outgoing[p].size()};
    }
    std::vector<ByteVector> received;
    if (!t.alltoallv(sends, &received).isOk()) return 2;
    for (int p = 0; p < t.size(); ++p) {
      if (received[p] != ByteVector(100 * p + t.rank(), static_cast<uint8_t>(p))) return 3;
    }
    return t.barrier().isOk() ? 0 : 4;
  });
  for (size_t r = 0; r < ends.size(); ++r) {
    EXPECT_EQ(ends[r].exitCode, 0) << "rank " << r << " signal " << ends[r].signal;
  }
}

// What a survivor checks after its peer went away: an error of an expected kind that names
// rank 2, within a bound (well past the 2 s timeout, well before the harness's 30 s limit).
int checkSurvivor(const Status& s, steady_clock::duration took, bool timeoutOnly) {
  std::fprintf(stderr, "survivor saw: %s\n", s.toString().c_str());
  if (s.code() != StatusCode::kTimeout && (timeoutOnly || s.code() != StatusCode::kIoError)) {
    return 10;
  }
  if (s.message().find("rank 2") == std::string::npos) return 11;
  if (took > std::chrono::seconds(10)) return 12;
  return 0;
}

// A barrier, after which every other rank tells `victim` it has left it: `victim` may then
// die or stop without failing anyone's barrier. (A sleep would not do: a survivor descheduled
// longer could still be waiting for the barrier's last message from `victim`.)
bool everyoneLeftTheBarrier(Transport& t, int victim) {
  if (!t.barrier().isOk()) return false;
  constexpr uint32_t kLeftTag = 5;
  uint8_t byte = 1;
  if (t.rank() != victim) return t.send(victim, &byte, 1, kLeftTag).isOk();
  for (int r = 0; r < t.size(); ++r) {
    if (r != victim && !t.recv(r, &byte, 1, kLeftTag).isOk()) return false;
  }
  return true;
}

TEST(TcpTransport, KilledPeerIsReportedToTheSurvivors) {
  const auto ends = forkTcpRanks(3, 2.0, 30.0, [](Transport& t) {
    if (!everyoneLeftTheBarrier(t, 2)) return 5;
    if (t.rank() == 2) raise(SIGKILL);
    const ByteVector mine(1000, 7);
    std::vector<ByteVector> gathered;
    const auto start = steady_clock::now();
    const Status s = t.allgatherv(mine.data(), mine.size(), &gathered);
    return checkSurvivor(s, steady_clock::now() - start, /*timeoutOnly=*/false);
  });
  EXPECT_EQ(ends[0].exitCode, 0);
  EXPECT_EQ(ends[1].exitCode, 0);
  EXPECT_EQ(ends[2].signal, SIGKILL);
}

// The same inside process set {1, 2} (Transport::subset): rank 1's set call names job rank 2
// (rank 1 of the set), rank 0 waiting on rank 2 over the job's transport hears it too, and the
// set's failure fails rank 1's job transport.
TEST(TcpTransport, KilledPeerInAProcessSetIsReportedToTheSurvivors) {
  const auto ends = forkTcpRanks(3, 2.0, 30.0, [](Transport& t) {
    if (!everyoneLeftTheBarrier(t, 2)) return 5;
    const auto start = steady_clock::now();
    if (t.rank() == 0) {
      int x = 0;
      const Status s = t.recv(2, &x, sizeof(x));
      return checkSurvivor(s, steady_clock::now() - start, /*timeoutOnly=*/false);
    }
    Result<std::unique_ptr<Transport>> set = t.subset({1, 2}, 9);
    if (!set.isOk()) return 6;
    if (t.rank() == 2) raise(SIGKILL);
    const ByteVector mine(1000, 7);
    std::vector<ByteVector> gathered;
    const Status s = set.value()->allgatherv(mine.data(), mine.size(), &gathered);
    const int code = checkSurvivor(s, steady_clock::now() - start, /*timeoutOnly=*/false);
    if (code != 0) return code;
    return t.barrier().code() == StatusCode::kAborted ? 0 : 13;
  });
  EXPECT_EQ(ends[0].exitCode, 0);
  EXPECT_EQ(ends[1].exitCode, 0);
  EXPECT_EQ(ends[2].signal, SIGKILL);
}

// Rank 2 stops (SIGSTOP) with its sockets open: nothing closes, so only the deadline can tell;
// both survivors wait on it directly and must report kTimeout naming it.
TEST(TcpTransport, StalledPeerTimesOutOnEveryWaitingRank) {
  const auto ends = forkTcpRanks(
      3, 2.0, 30.0,
      [](Transport& t) {
        if (!everyoneLeftTheBarrier(t, 2)) return 5;
        if (t.rank() == 2) raise(SIGSTOP);
        const ByteVector mine(size_t{1} << 20, 7);
        std::vector<ByteVector> gathered;
        const auto start = steady_clock::now();
        const Status s = t.allgatherv(mine.data(), mine.size(), &gathered);
        return checkSurvivor(s, steady_clock::now() - start, /*timeoutOnly=*/true);
      },
      /*lingering=*/2);
  EXPECT_EQ(ends[0].exitCode, 0);
  EXPECT_EQ(ends[1].exitCode, 0);
  EXPECT_TRUE(ends[2].killedByHarness);
}

// Rank 2's transport fails (rank 0 sends a message of the wrong size) and aborts: rank 1,
// waiting on rank 2 for something else, learns why rank 2 gave up, not only that its
// connection closed, so a cascade of failures still names the first cause.
TEST(TcpTransport, AbortingRankTellsItsPeersWhy) {
  RankOptions options;
  options.timeoutSeconds = 10;
  runRanks(TransportParam{Backend::kTcp, 3}, options, [](Transport& t) {
    uint64_t word = 0;
    uint32_t small = 0;
    Status s;
    if (t.rank() == 0) {
      ASSERT_TRUE(t.send(2, &small, sizeof(small), 1).isOk());
      s = t.recv(2, &word, sizeof(word), 2);
    } else if (t.rank() == 2) {
      s = t.recv(0, &word, sizeof(word), 1);
      EXPECT_NE(s.message().find("rank 0 sent 4 bytes, expected 8"), std::string::npos)
          << s.toString();
      return;
    } else {
      s = t.recv(2, &word, sizeof(word), 2);
    }
    EXPECT_EQ(s.code(), StatusCode::kIoError) << s.toString();
    EXPECT_NE(s.message().find("rank 2 aborted after an error (rank 2: recv: rank 0 sent 4 "
                               "bytes, expected 8)"),
              std::string::npos)
        << s.toString();
  });
}

// A send to a rank that has aborted fails (broken pipe) on its own socket, possibly before
// the reader hands over the peer's abort frame: the send's error still carries why the peer
// gave up, so a rank whose first failure is a send still names the first cause.
TEST(TcpTransport, SendToAnAbortedRankCarriesItsReason) {
  RankOptions options;
  options.timeoutSeconds = 10;
  runRanks(TransportParam{Backend::kTcp, 3}, options, [](Transport& t) {
    uint64_t word = 0;
    uint32_t small = 0;
    if (t.rank() == 0) {
      ASSERT_TRUE(t.send(2, &small, sizeof(small), 1).isOk());
    } else if (t.rank() == 2) {
      EXPECT_FALSE(t.recv(0, &word, sizeof(word), 1).isOk());
    } else {
      // Rank 1 has not waited on rank 2: sends find the closed connection first. The first
      // write after the peer closed is usually accepted by the kernel; a later one fails.
      // Sends until then, however late ranks 0 and 2 get there (bounded by the timeout).
      Status s;
      const auto until = steady_clock::now() + std::chrono::seconds(10);
      while (s.isOk() && steady_clock::now() < until) {
        s = t.send(2, &word, sizeof(word), 3);
        if (s.isOk()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      EXPECT_EQ(s.code(), StatusCode::kIoError) << s.toString();
      EXPECT_NE(s.message().find("rank 2 aborted after an error (rank 2: recv: rank 0 sent 4 "
                                 "bytes, expected 8)"),
                std::string::npos)
          << s.toString();
    }
  });
}

TEST(TcpTransport, NonRootNeedsTheRealPort) {
  TcpOptions o = rankOne("127.0.0.1:0", "s");
  EXPECT_EQ(createTcpTransport(o).status().code(), StatusCode::kInvalidArgument);
}

TEST(TcpTransport, OptionsFromConfig) {
  Config config;
  config.rank = 3;
  config.size = 8;
  config.controllerAddr = "10.0.0.1:2222";
  config.secret = "s3";
  config.timeoutSeconds = 7;
  const TcpOptions o = TcpOptions::fromConfig(config);
  EXPECT_EQ(o.rank, 3);
  EXPECT_EQ(o.size, 8);
  EXPECT_EQ(o.rendezvousAddr, "10.0.0.1:2222");
  EXPECT_EQ(o.secret, "s3");
  EXPECT_EQ(o.timeoutSeconds, 7);
}

TEST(InProcessTransport, EachRankJoinsOnceAndSizesMustMatch) {
  auto hub = makeInProcessHub(2);
  TransportOptions o;
  o.size = 2;
  auto first = createInProcessTransport(hub, o);
  ASSERT_TRUE(first.isOk());
  EXPECT_EQ(createInProcessTransport(hub, o).status().code(), StatusCode::kFailedPrecondition);
  o.size = 3;
  EXPECT_EQ(createInProcessTransport(hub, o).status().code(), StatusCode::kInvalidArgument);
}

TEST(InProcessTransport, PeerThatLeftIsAnIoError) {
  auto hub = makeInProcessHub(2);
  TransportOptions o;
  o.size = 2;
  o.timeoutSeconds = 5;
  auto zero = createInProcessTransport(hub, o);
  o.rank = 1;
  auto one = createInProcessTransport(hub, o);
  ASSERT_TRUE(zero.isOk() && one.isOk());
  one.value().reset();
  int x = 0;
  const Status s = zero.value()->recv(1, &x, sizeof(x));
  EXPECT_EQ(s.code(), StatusCode::kIoError) << s.toString();
  EXPECT_NE(s.message().find("rank 1"), std::string::npos) << s.toString();
}

}  // namespace
}  // namespace zen::ops::testing
