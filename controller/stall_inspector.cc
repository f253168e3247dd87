// Stall warnings and stall shutdown over the message table (controller/stall_inspector.h).

#include "controller/stall_inspector.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <utility>

namespace zen::controller {

StallReport StallInspector::check(const std::vector<StallTable>& tables, TimePoint now) {
  StallReport report;
  if (options_.checkSeconds <= 0) return report;

  // Names older than the check time, oldest first: the oldest is the likely culprit.
  struct Stalled {
    TimePoint firstSeen;
    std::string shown;  // the name, with its set when not the job
    const TableEntry* entry;
    const StallTable* where;
  };
  std::vector<Stalled> stalled;
  for (const StallTable& t : tables) {
    for (const auto& [name, entry] : t.table->entries()) {
      if (secondsBetween(entry.firstSeen, now) < options_.checkSeconds) continue;
      std::string shown = t.processSet == kGlobalProcessSet
                              ? name
                              : fmt::format("{} (process set {})", name, t.processSet);
      stalled.push_back(Stalled{entry.firstSeen, std::move(shown), &entry, &t});
    }
  }
  if (stalled.empty()) return report;
  std::sort(stalled.begin(), stalled.end(), [](const Stalled& a, const Stalled& b) {
    return a.firstSeen != b.firstSeen ? a.firstSeen < b.firstSeen : a.shown < b.shown;
  });

  const bool canShutDown = options_.shutdownSeconds > 0;
  std::map<int, std::vector<const std::string*>> missing;  // job rank -> names, oldest first
  std::set<int> pastShutdown;
  for (const Stalled& s : stalled) {
    const MessageTable& table = *s.where->table;
    const bool tooOld = canShutDown && secondsBetween(s.firstSeen, now) >= options_.shutdownSeconds;
    for (int r = 0; r < table.size(); ++r) {
      if (table.counts(*s.entry, r)) continue;
      const int jobRank = s.where->members ? (*s.where->members)[static_cast<size_t>(r)] : r;
      missing[jobRank].push_back(&s.shown);
      if (tooOld) pastShutdown.insert(jobRank);
    }
  }
  for (const auto& kv : missing) report.missingRanks.push_back(kv.first);
  report.shutdown = !pastShutdown.empty();

  // The shutdown is explained when it is first decided, then warnings keep their period: the
  // job takes a few cycles to stop, and a warning per cycle would bury the cause.
  const bool due = !lastWarning_ || secondsBetween(*lastWarning_, now) >= options_.checkSeconds;
  const bool announce = report.shutdown && !shutdownAnnounced_;
  if (!due && !announce) return report;
  lastWarning_ = now;
  shutdownAnnounced_ = shutdownAnnounced_ || report.shutdown;

  std::string text = fmt::format(
      "One or more tensors were submitted to be reduced, gathered or broadcast by a subset of "
      "ranks and have been waiting for the remaining ranks for more than {:g} seconds (longest: "
      "'{}', {:.1f} s). The missing ranks may be slow (data loading, uneven batches: consider "
      "join) or may be submitting different tensors, which deadlocks.",
      options_.checkSeconds, stalled.front().shown, secondsBetween(stalled.front().firstSeen, now));
  if (report.shutdown) {
    text += fmt::format(" Ranks marked ! have stalled past {:g} seconds: shutting down.",
                        options_.shutdownSeconds);
  }
  text += "\nMissing ranks:";
  for (const auto& [rank, names] : missing) {
    text += fmt::format("\n{}{}: [", rank, pastShutdown.count(rank) ? "!" : "");
    const size_t shown = std::min(names.size(), static_cast<size_t>(options_.namesPerRank));
    for (size_t i = 0; i < shown; ++i) text += (i ? ", " : "") + *names[i];
    if (names.size() > shown) text += fmt::format(" ... (+{} more)", names.size() - shown);
    text += "]";
  }
  report.warning = std::move(text);
  return report;
}

}  // namespace zen::controller
