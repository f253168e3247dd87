#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/status.h"

namespace zen {

// Horovod's HOROVOD_* variables in a zen job (README "Coming from Horovod": job scripts and
// cluster configs keep exporting them). Those with a Zen meaning are aliases of their ZEN_*
// variable; the others are named in one warning, never dropped silently and never an error
// (a Horovod install may share the environment). Config::parse is the only caller.

// One ZEN_* setting as the environment gives it: the variable it came from (a ZEN_* name or
// a HOROVOD_* alias; errors name it) and its value, in Zen's units.
struct EnvSetting {
  std::string source;
  std::string value;
};

// Adds the HOROVOD_* aliases of env to *settings (ZEN_* name -> setting, holding the ZEN_*
// variables already). Precedence: a ZEN_* variable wins over its alias (zenrun's flags set
// ZEN_*), and of two aliases of one name the table's first (HOROVOD_STALL_CHECK_DISABLE=1
// over HOROVOD_STALL_CHECK_TIME_SECONDS, as in Horovod); a loser with a different value adds a
// warning naming both. A bad value is an error naming the HOROVOD_* variable.
Status addHorovodAliases(const std::map<std::string, std::string>& env,
                         std::map<std::string, EnvSetting>* settings,
                         std::vector<std::string>* warnings);

// The one warning naming the HOROVOD_* variables of env that zen ignores, each with why, or
// "" when there are none. Not named: Horovod's build settings (HOROVOD_WITH_*, HOROVOD_GPU_*,
// ...: they configure `pip install horovod`, which Horovod itself ignores at run time) and
// the placement Horovod's launchers give each process (HOROVOD_RANK, HOROVOD_HOSTNAME, ...;
// see horovodLauncherError).
std::string horovodIgnoredWarning(const std::map<std::string, std::string>& env);

// An error when env says horovodrun's Gloo launcher (or Horovod on Spark/Ray) started this
// process as one of several ranks (HOROVOD_SIZE > 1) and neither zenrun nor MPI placed it:
// zen cannot join Horovod's rendezvous, and running as a job of one would train N
// independent models without a word. Call only where no ZEN_* or MPI placement is present.
Status horovodLauncherError(const std::map<std::string, std::string>& env);

}  // namespace zen
