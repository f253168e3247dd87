// Chrome trace writer. File layout: "[\n" event (",\n" event)* "\n]\n", with spaces before a
// separator where an event was moved to the next page. Appending overwrites the trailing "\n]\n"
// with ",\n<events>\n]\n" in a single pwrite under an exclusive flock, so the file parses as JSON
// after every write, including when the process dies between two writes. A SIGKILL can still cut
// a write that spans pages (Linux checks for a fatal signal before copying each page), so no
// event shorter than a page straddles a page boundary: a cut write leaves whole events followed
// by whitespace, the trace format's unterminated array.
#include "core/timeline.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace zen {
namespace {

std::string jsonString(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<int>(c));
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

bool isJsonNumber(const std::string& s) {
  if (s.empty()) return false;
  char* end = nullptr;
  std::strtod(s.c_str(), &end);
  return *end == '\0' && s.find_first_of("xXnNiI") == std::string::npos;
}

std::string argsJson(const TimelineArgs& args) {
  std::string out = "{";
  for (size_t i = 0; i < args.size(); ++i) {
    if (i > 0) out += ",";
    out += jsonString(args[i].first) + ":" +
           (isJsonNumber(args[i].second) ? args[i].second : jsonString(args[i].second));
  }
  return out + "}";
}

bool writeAll(int fd, const std::string& bytes, int64_t offset) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = pwrite(fd, bytes.data() + done, bytes.size() - done, offset + done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

constexpr char kClose[] = "\n]\n";

// Appends piece to bytes, which go to the file from offset start; spaces first where the piece
// would otherwise straddle a page boundary it fits within.
void appendWithinPage(std::string& bytes, int64_t start, const std::string& piece, int64_t page) {
  const int64_t room = page - (start + static_cast<int64_t>(bytes.size())) % page;
  if (static_cast<int64_t>(piece.size()) > room && static_cast<int64_t>(piece.size()) <= page) {
    bytes.append(static_cast<size_t>(room), ' ');
  }
  bytes += piece;
}

}  // namespace

Result<std::unique_ptr<Timeline>> Timeline::open(const std::string& path,
                                                 int rank,
                                                 bool markCycles) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return ZEN_ERROR(StatusCode::kInvalidArgument, "cannot open timeline '{}': {}", path,
                     std::strerror(errno));
  }
  const std::string head = std::string("[") + kClose;
  if (!writeAll(fd, head, 0)) {
    ::close(fd);
    return ZEN_ERROR(StatusCode::kIoError, "cannot write timeline '{}': {}", path,
                     std::strerror(errno));
  }
  return std::unique_ptr<Timeline>(new Timeline(fd, path, rank, markCycles));
}

Timeline::Timeline(int fd, std::string path, int rank, bool markCycles)
    : fd_(fd),
      path_(std::move(path)),
      rank_(rank),
      markCycles_(markCycles),
      start_(Clock::now()),
      pageSize_(sysconf(_SC_PAGESIZE)),
      fileEnd_(1),
      writer_([this] { writerLoop(); }) {}

Timeline::~Timeline() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  writer_.join();
  ::close(fd_);
}

int64_t Timeline::micros(Clock::time_point t) const {
  return std::chrono::duration_cast<std::chrono::microseconds>(t - start_).count();
}

int Timeline::rowId(const std::string& row) {
  // Called with mu_ held.
  auto it = rows_.find(row);
  if (it != rows_.end()) return it->second;
  const int pid = static_cast<int>(rows_.size()) + 1;
  rows_.emplace(row, pid);
  pending_.push_back(fmt::format(
      R"({{"name":"process_name","ph":"M","pid":{},"args":{{"name":{}}}}})", pid, jsonString(row)));
  pending_.push_back(fmt::format(
      R"({{"name":"process_sort_index","ph":"M","pid":{},"args":{{"sort_index":{}}}}})", pid, pid));
  recorded_ += 2;
  return pid;
}

void Timeline::record(std::string event) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending_.push_back(std::move(event));
    ++recorded_;
  }
  wake_.notify_one();
}

void Timeline::begin(const std::string& row, const std::string& phase, TimelineArgs args) {
  const int64_t ts = nowMicros();
  int pid;
  {
    std::lock_guard<std::mutex> lock(mu_);
    pid = rowId(row);
  }
  args.emplace_back("rank", std::to_string(rank_));
  record(fmt::format(R"({{"name":{},"ph":"B","ts":{},"pid":{},"tid":0,"args":{}}})",
                     jsonString(phase), ts, pid, argsJson(args)));
}

void Timeline::end(const std::string& row, TimelineArgs args) {
  const int64_t ts = nowMicros();
  int pid;
  {
    std::lock_guard<std::mutex> lock(mu_);
    pid = rowId(row);
  }
  record(
      fmt::format(R"({{"ph":"E","ts":{},"pid":{},"tid":0,"args":{}}})", ts, pid, argsJson(args)));
}

void Timeline::span(const std::string& row,
                    const std::string& phase,
                    Clock::time_point start,
                    Clock::time_point end,
                    TimelineArgs args) {
  // A phase that began before a DYNAMIC timeline was started is cut at its start.
  const int64_t ts = std::max<int64_t>(0, micros(start));
  const int64_t dur = std::max<int64_t>(0, micros(end) - ts);
  int pid;
  {
    std::lock_guard<std::mutex> lock(mu_);
    pid = rowId(row);
  }
  args.emplace_back("rank", std::to_string(rank_));
  record(fmt::format(R"({{"name":{},"ph":"X","ts":{},"dur":{},"pid":{},"tid":0,"args":{}}})",
                     jsonString(phase), ts, dur, pid, argsJson(args)));
}

void Timeline::instant(const std::string& row, const std::string& name, TimelineArgs args) {
  instantAt(row, name, Clock::now(), std::move(args));
}

void Timeline::instantAt(const std::string& row,
                         const std::string& name,
                         Clock::time_point at,
                         TimelineArgs args) {
  const int64_t ts = micros(at);
  int pid;
  {
    std::lock_guard<std::mutex> lock(mu_);
    pid = rowId(row);
  }
  record(fmt::format(R"({{"name":{},"ph":"i","s":"p","ts":{},"pid":{},"tid":0,"args":{}}})",
                     jsonString(name), ts, pid, argsJson(args)));
}

void Timeline::markCycle() {
  if (!markCycles_) return;
  record(fmt::format(R"({{"name":"CYCLE_START","ph":"i","s":"g","ts":{},"pid":0,"tid":0}})",
                     nowMicros()));
}

void Timeline::flush() {
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t target = recorded_;
  drained_.wait(lock, [&] { return written_ >= target; });
}

void Timeline::writerLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    wake_.wait(lock, [&] { return stop_ || !pending_.empty(); });
    if (pending_.empty() && stop_) return;
    std::deque<std::string> batch;
    batch.swap(pending_);
    lock.unlock();
    std::string bytes;
    bool first = empty_;
    for (const auto& event : batch) {
      appendWithinPage(bytes, fileEnd_, (first ? "\n" : ",\n") + event, pageSize_);
      first = false;
    }
    const int64_t eventsEnd = fileEnd_ + static_cast<int64_t>(bytes.size());
    bytes += kClose;
    // On a disk error the events are dropped (a timeline must never stop training); the
    // file stays valid because the previous close is only overwritten by a full write.
    // The exclusive flock makes the update atomic for readers that take a shared one
    // (zen-timeline, the tests): the kernel does not promise that a concurrent read() sees a
    // pwrite whole.
    ::flock(fd_, LOCK_EX);
    if (writeAll(fd_, bytes, fileEnd_)) {
      fileEnd_ = eventsEnd;
      empty_ = false;
    }
    ::flock(fd_, LOCK_UN);
    lock.lock();
    written_ += batch.size();
    drained_.notify_all();
  }
}

}  // namespace zen
