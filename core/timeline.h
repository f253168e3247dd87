#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/status.h"

namespace zen {

// One "key": value argument of a trace event; values are written as JSON numbers when they
// parse as one, else as strings.
using TimelineArgs = std::vector<std::pair<std::string, std::string>>;

// A Chrome-trace (chrome://tracing, Perfetto) timeline of one rank. Each tensor or bucket is
// a row (a trace "process" named after it); the daemon records phases on it: NEGOTIATE with
// a tick per rank that became ready, QUEUE, FUSE, and the executor's phases (NONZERO, HASH,
// PUSH, AGGREGATE, ENCODE, PULL, DECODE, or the dense op), each with arguments.
//
// Events go through a queue to a writer thread, so the daemon never waits on the disk. The
// file is valid JSON after every write: each batch of events is written, together with the
// closing "]", by ONE pwrite over the previous closing bracket, so a crash between writes
// leaves the old or the new complete array, and so does a concurrent reader holding a shared
// flock (the writer holds an exclusive one while it writes). A SIGKILL during a write that
// spans pages can cut it at a page boundary; events are laid out so that none shorter than a
// page straddles one, so such a file holds whole events and lacks only its closing "]" (the
// trace format's unterminated array, which viewers and zen-timeline read).
class Timeline {
 public:
  using Clock = std::chrono::steady_clock;

  // Creates (truncates) path. rank goes into every event's metadata; markCycles enables
  // markCycle().
  static Result<std::unique_ptr<Timeline>> open(const std::string& path, int rank, bool markCycles);
  ~Timeline();
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;

  // A phase of tensor `row` begins / ends (Chrome "B"/"E" events). Phases nest.
  void begin(const std::string& row, const std::string& phase, TimelineArgs args = {});
  void end(const std::string& row, TimelineArgs args = {});
  // A phase whose times are known only afterwards (Chrome "X" event), such as the executor's
  // phases, measured by the collective and reported when it returns. Spans on one row nest
  // when their intervals do.
  void span(const std::string& row,
            const std::string& phase,
            Clock::time_point start,
            Clock::time_point end,
            TimelineArgs args = {});
  // An instant on a row, e.g. the tick of rank r becoming ready during NEGOTIATE.
  void instant(const std::string& row, const std::string& name, TimelineArgs args = {});
  // The same at a time already past.
  void instantAt(const std::string& row,
                 const std::string& name,
                 Clock::time_point at,
                 TimelineArgs args = {});
  // A global marker at the start of a background-loop cycle (ZEN_TIMELINE_MARK_CYCLES).
  void markCycle();

  // Waits until everything recorded so far is in the file.
  void flush();
  const std::string& path() const { return path_; }

 private:
  Timeline(int fd, std::string path, int rank, bool markCycles);
  void record(std::string event);
  int rowId(const std::string& row);  // assigns pids, emitting the row's name on first use
  int64_t nowMicros() const { return micros(Clock::now()); }
  int64_t micros(Clock::time_point t) const;
  void writerLoop();

  const int fd_;
  const std::string path_;
  const int rank_;
  const bool markCycles_;
  const Clock::time_point start_;
  const int64_t pageSize_;

  std::mutex mu_;
  std::condition_variable wake_;
  std::condition_variable drained_;
  std::deque<std::string> pending_;
  std::map<std::string, int> rows_;
  uint64_t recorded_ = 0;
  uint64_t written_ = 0;
  bool stop_ = false;
  int64_t fileEnd_ = 0;  // offset of the closing "]"; only the writer thread touches it
  bool empty_ = true;    // no event in the file yet; writer thread only
  std::thread writer_;
};

}  // namespace zen
