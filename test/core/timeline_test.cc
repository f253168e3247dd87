#include "core/timeline.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

namespace zen {
namespace {

std::string tempPath(const char* name) {
  return ::testing::TempDir() + name + std::to_string(getpid()) + ".json";
}

// Reads under a shared flock, as the timeline's documented reader protocol says.
std::string readText(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) throw std::runtime_error("cannot open " + path);
  ::flock(fd, LOCK_SH);
  std::string text;
  char buf[65536];
  for (ssize_t n; (n = ::read(fd, buf, sizeof(buf))) > 0;) text.append(buf, n);
  ::flock(fd, LOCK_UN);
  ::close(fd);
  return text;
}

nlohmann::json readJson(const std::string& path) {
  return nlohmann::json::parse(readText(path));  // throws on invalid JSON
}

// The events of a complete array, or of an unterminated one: whole events and whitespace
// without the closing bracket, what a write cut at a page boundary leaves. Throws on anything
// else, such as a text that ends inside an event.
nlohmann::json parseTrace(const std::string& text) {
  if (nlohmann::json::accept(text)) return nlohmann::json::parse(text);
  return nlohmann::json::parse(text + "]");
}

TEST(Timeline, RowsPhasesAndArgsAreInTheTrace) {
  const auto path = tempPath("timeline_rows");
  auto t = Timeline::open(path, 2, /*markCycles=*/true);
  ASSERT_TRUE(t.isOk()) << t.status().toString();
  auto& tl = *t.value();
  tl.markCycle();
  tl.begin("emb.weight", "NEGOTIATE");
  tl.instant("emb.weight", "rank 1 ready");
  tl.end("emb.weight");
  tl.begin("emb.weight", "PUSH", {{"bytes", "4096"}, {"scheme", "zen"}});
  tl.end("emb.weight", {{"imbalance", "1.02"}});
  tl.flush();
  const auto j = readJson(path);
  ASSERT_TRUE(j.is_array());
  int pushes = 0, ticks = 0, cycles = 0, names = 0;
  for (const auto& e : j) {
    if (e["ph"] == "M" && e["name"] == "process_name") {
      EXPECT_EQ(e["args"]["name"], "emb.weight");
      ++names;
    }
    if (e["ph"] == "B" && e["name"] == "PUSH") {
      EXPECT_EQ(e["args"]["bytes"], 4096);
      EXPECT_EQ(e["args"]["scheme"], "zen");
      EXPECT_EQ(e["args"]["rank"], 2);
      ++pushes;
    }
    ticks += e["ph"] == "i" && e["name"] == "rank 1 ready";
    cycles += e.value("name", "") == "CYCLE_START";
  }
  EXPECT_EQ(names, 1);
  EXPECT_EQ(pushes, 1);
  EXPECT_EQ(ticks, 1);
  EXPECT_EQ(cycles, 1);
}

TEST(Timeline, SpansAndLateInstantsCarryTheirOwnTimes) {
  const auto path = tempPath("timeline_spans");
  auto t = Timeline::open(path, 1, false);
  ASSERT_TRUE(t.isOk()) << t.status().toString();
  auto& tl = *t.value();
  const auto start = Timeline::Clock::now() + std::chrono::milliseconds(5);
  tl.span("bucket", "PUSH", start, start + std::chrono::milliseconds(3), {{"bytes", "12"}});
  tl.instantAt("bucket", "0", start + std::chrono::milliseconds(1));
  // Before the timeline existed (a DYNAMIC timeline started mid-operation): cut at 0.
  tl.span("bucket", "QUEUE", start - std::chrono::hours(1), start);
  tl.flush();
  const auto j = readJson(path);
  int spans = 0, ticks = 0;
  for (const auto& e : j) {
    if (e["ph"] == "X" && e["name"] == "PUSH") {
      EXPECT_GE(e["ts"].get<int64_t>(), 5000);
      EXPECT_NEAR(e["dur"].get<int64_t>(), 3000, 1);
      EXPECT_EQ(e["args"]["bytes"], 12);
      EXPECT_EQ(e["args"]["rank"], 1);
      ++spans;
    }
    if (e["ph"] == "X" && e["name"] == "QUEUE") {
      EXPECT_EQ(e["ts"], 0);
      ++spans;
    }
    if (e["ph"] == "i" && e["name"] == "0") {
      EXPECT_GE(e["ts"].get<int64_t>(), 6000);
      ++ticks;
    }
  }
  EXPECT_EQ(spans, 2);
  EXPECT_EQ(ticks, 1);
}

TEST(Timeline, ValidJsonAtEveryMomentWhileThreadsWrite) {
  const auto path = tempPath("timeline_valid");
  auto t = Timeline::open(path, 0, false);
  ASSERT_TRUE(t.isOk());
  auto& tl = *t.value();
  std::atomic<bool> done{false};
  std::vector<std::thread> writers;
  for (int w = 0; w < 3; ++w) {
    writers.emplace_back([&, w] {
      for (int i = 0; i < 2000; ++i) {
        const std::string row = "tensor." + std::to_string(w) + "." + std::to_string(i % 7);
        tl.begin(row, "HASH", {{"nnz", std::to_string(i)}, {"note", "a \"quoted\"\nline"}});
        tl.end(row);
      }
    });
  }
  int parses = 0;
  std::thread reader([&] {
    while (!done.load()) {
      ASSERT_NO_THROW(readJson(path));
      ++parses;
    }
  });
  for (auto& w : writers) w.join();
  tl.flush();
  done = true;
  reader.join();
  EXPECT_GT(parses, 0);
  const auto j = readJson(path);
  int begins = 0;
  for (const auto& e : j) begins += e["ph"] == "B";
  EXPECT_EQ(begins, 6000);
}

// Every page boundary of a file written in batches of events of many sizes falls between
// whole events (or inside the closing bracket): what a write cut there leaves is a trace.
TEST(Timeline, NoEventStraddlesAPageBoundary) {
  const auto path = tempPath("timeline_pages");
  auto t = Timeline::open(path, 0, false);
  ASSERT_TRUE(t.isOk());
  auto& tl = *t.value();
  std::vector<std::thread> writers;
  for (int w = 0; w < 2; ++w) {
    writers.emplace_back([&, w] {
      for (int i = 0; i < 150; ++i) {
        // 0 to ~2,600 bytes of arguments: events from one line to most of a page.
        tl.begin("t" + std::to_string(w), "PUSH",
                 {{"note", std::string(static_cast<size_t>((i * 379 + w * 101) % 2600), 'x')}});
        if (i % 50 == 0) tl.flush();
      }
    });
  }
  for (auto& w : writers) w.join();
  tl.flush();
  const std::string text = readText(path);
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  ASSERT_GT(text.size(), 40 * page);
  EXPECT_EQ(readJson(path).size(), 304u);  // 300 begins, each row's name and sort index
  for (size_t cut = page; cut < text.size(); cut += page) {
    ASSERT_NO_THROW(parseTrace(text.substr(0, cut))) << "cut at " << cut;
  }
}

TEST(Timeline, StaysValidWhenTheProcessIsKilled) {
  const auto path = tempPath("timeline_killed");
  // Killed many times at arbitrary moments of writes that span many pages.
  for (int round = 0; round < 10; ++round) {
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      auto t = Timeline::open(path, 0, false);
      if (!t.isOk()) _exit(3);
      for (int64_t i = 0;; ++i) t.value()->begin("row" + std::to_string(i % 5), "PULL");
    }
    // Killed once the trace holds more than 10 events (after a fixed sleep, a child
    // descheduled under load might not have written them yet).
    size_t written = 0;
    for (int i = 0; i < 3000 && written <= 10; ++i) {
      usleep(static_cast<useconds_t>((1 + round % 3) * 1000));
      try {
        written = parseTrace(readText(path)).size();
      } catch (const std::exception&) {  // not created yet (or still the previous round's)
      }
    }
    kill(child, SIGKILL);
    int status = 0;
    waitpid(child, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status));
    const auto j = parseTrace(readText(path));
    EXPECT_GT(j.size(), 10u) << "round " << round;
    ::unlink(path.c_str());
  }
}

TEST(Timeline, UnwritablePathIsAClearError) {
  auto t = Timeline::open("/nonexistent-dir/t.json", 0, false);
  ASSERT_FALSE(t.isOk());
  EXPECT_NE(t.status().message().find("/nonexistent-dir/t.json"), std::string::npos);
}

}  // namespace
}  // namespace zen
