// ZEN_IFACE's pieces: the interface look-up (ops/net_interface.h), and the TCP mesh built
// with a local address per rank (TcpOptions::localAddress): every rank's connections start
// from its own address and the address table rank 0 sends names it, so peers dial it there.
// Loopback's 127.0.0.0/8 gives each thread-rank an address of its own.
#include "ops/net_interface.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>

#include <future>
#include <sstream>
#include <thread>

#include "ops/tcp_io.h"
#include "ops/tcp_rendezvous.h"

namespace zen::ops::testing {
namespace {

TEST(NetInterface, LoopbackIsLocalhost) {
  const Result<std::string> address = interfaceIpv4("lo");
  ASSERT_TRUE(address.isOk()) << address.status().toString();
  EXPECT_EQ(address.value(), "127.0.0.1");
  const Result<std::string> first = chosenInterfaceIpv4({"lo", "zen-absent0"});
  ASSERT_TRUE(first.isOk()) << first.status().toString();
  EXPECT_EQ(first.value(), "127.0.0.1");
  EXPECT_EQ(chosenInterfaceIpv4({}).value(), "");
}

TEST(NetInterface, MissingInterfaceIsNamedWithTheOnesThereAre) {
  const Result<std::string> address = chosenInterfaceIpv4({"zen-absent0", "lo"});
  ASSERT_FALSE(address.isOk());
  EXPECT_EQ(address.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(address.status().message().find(
                "ZEN_IFACE: no network interface 'zen-absent0' on this host (it has: "),
            std::string::npos)
      << address.status().message();
  EXPECT_NE(address.status().message().find("lo"), std::string::npos);
}

struct MeshResult {
  Result<std::vector<SocketPtr>> sockets = Status::ok();
  std::string log;
};

// connectMesh for ranks 0..n-1 as threads; rank r > 0 at localAddresses[r] ("" = unset).
std::vector<MeshResult> buildMesh(const std::vector<std::string>& localAddresses,
                                  std::vector<std::unique_ptr<IoThread>>* io) {
  const int n = static_cast<int>(localAddresses.size());
  std::vector<MeshResult> results(n);
  std::vector<std::ostringstream> logs(n);
  std::promise<uint16_t> port;
  std::shared_future<uint16_t> rootPort = port.get_future().share();
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    io->push_back(std::make_unique<IoThread>());
    threads.emplace_back([&, r] {
      TcpOptions o;
      o.rank = r;
      o.size = n;
      o.timeoutSeconds = 10;
      o.secret = "s";
      o.localAddress = localAddresses[r];
      if (r == 0) {
        o.rendezvousAddr = "127.0.0.1:0";
        o.onListening = [&](uint16_t p) { port.set_value(p); };
      } else {
        if (rootPort.wait_for(std::chrono::seconds(10)) != std::future_status::ready) return;
        o.rendezvousAddr = "127.0.0.1:" + std::to_string(rootPort.get());
      }
      spdlog::logger log("mesh", std::make_shared<spdlog::sinks::ostream_sink_st>(logs[r]));
      log.set_level(spdlog::level::debug);
      results[r].sockets = connectMesh((*io)[r]->context(), o, log);
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) results[r].log = logs[r].str();
  return results;
}

std::string local(const SocketPtr& s) {
  return s->local_endpoint().address().to_string();
}
std::string remote(const SocketPtr& s) {
  return s->remote_endpoint().address().to_string();
}

TEST(NetInterface, EveryConnectionUsesTheRanksLocalAddress) {
  std::vector<std::unique_ptr<IoThread>> io;
  std::vector<MeshResult> mesh = buildMesh({"", "127.0.0.2", "127.0.0.3", "127.0.0.4"}, &io);
  for (int r = 0; r < 4; ++r) ASSERT_TRUE(mesh[r].sockets.isOk()) << r << ": " << mesh[r].log;
  for (int r = 1; r < 4; ++r) {
    const auto& sockets = mesh[r].sockets.value();
    const std::string mine = "127.0.0." + std::to_string(r + 1);
    for (int j = 0; j < 4; ++j) {
      if (j == r) continue;
      EXPECT_EQ(local(sockets[j]), mine) << "rank " << r << " to " << j;
      EXPECT_EQ(remote(sockets[j]), j == 0 ? "127.0.0.1" : "127.0.0." + std::to_string(j + 1))
          << "rank " << r << " to " << j;
    }
  }
  // Rank 0's table, as logged at debug: where the others dialled each other.
  EXPECT_NE(mesh[0].log.find("1=127.0.0.2:"), std::string::npos) << mesh[0].log;
  EXPECT_NE(mesh[0].log.find("3=127.0.0.4:"), std::string::npos) << mesh[0].log;
  for (auto& m : mesh) m.sockets = Status::ok();  // closes the sockets before their io threads
}

TEST(NetInterface, WithoutALocalAddressRanksUseTheInterfaceThatReachesRankZero) {
  std::vector<std::unique_ptr<IoThread>> io;
  std::vector<MeshResult> mesh = buildMesh({"", "", ""}, &io);
  for (int r = 0; r < 3; ++r) ASSERT_TRUE(mesh[r].sockets.isOk()) << r << ": " << mesh[r].log;
  EXPECT_EQ(local(mesh[2].sockets.value()[1]), "127.0.0.1");
  EXPECT_EQ(remote(mesh[2].sockets.value()[1]), "127.0.0.1");
  for (auto& m : mesh) m.sockets = Status::ok();
}

}  // namespace
}  // namespace zen::ops::testing
