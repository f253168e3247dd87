#pragma once

// The stall inspector (Horovod's StallInspector), run by rank 0 every cycle over the message
// table. When names have waited for the remaining ranks longer than ZEN_STALL_CHECK_TIME_SECONDS
// it produces a warning naming, per missing rank, up to six of the names it has not posted,
// oldest first, in Horovod's format ("Missing ranks:\n3: [a, b]"), at most once per check
// period. Past ZEN_STALL_SHUTDOWN_TIME_SECONDS (when > 0) it asks for a shutdown and marks the
// ranks responsible with "!", so a deadlocked job ends instead of hanging; that warning comes
// at once, then the period holds again. It looks at every
// process set's table; missing ranks are job ranks, and a name of a set other than the job
// is shown with its set ("x (process set 2)").

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "controller/clock.h"
#include "controller/message_table.h"

namespace zen::controller {

struct StallOptions {
  double checkSeconds = 60.0;    // 0 disables the inspector
  double shutdownSeconds = 0.0;  // 0 never shuts down
  int namesPerRank = 6;
};

struct StallReport {
  std::string warning;            // empty: nothing to say this cycle
  bool shutdown = false;          // a name has waited past shutdownSeconds
  std::vector<int> missingRanks;  // job ranks holding up names older than checkSeconds
};

// One set's table; members maps its rank numbers to job ranks (nullptr: they are job ranks).
struct StallTable {
  int32_t processSet = 0;
  const MessageTable* table = nullptr;
  const std::vector<int32_t>* members = nullptr;
};

class StallInspector {
 public:
  explicit StallInspector(StallOptions options) : options_(options) {}

  StallReport check(const std::vector<StallTable>& tables, TimePoint now);
  // The job's table alone.
  StallReport check(const MessageTable& table, TimePoint now) {
    return check({StallTable{0, &table, nullptr}}, now);
  }

 private:
  StallOptions options_;
  std::optional<TimePoint> lastWarning_;
  bool shutdownAnnounced_ = false;
};

}  // namespace zen::controller
