#include "core/cpu_share.h"

#include <sched.h>

#include <algorithm>
#include <cstdint>
#include <thread>

namespace zen {

int cpuShare(int usableCpus, int hostCpus, int localRanks) {
  hostCpus = std::max(hostCpus, 1);
  usableCpus = usableCpus <= 0 ? hostCpus : std::min(usableCpus, hostCpus);
  const int64_t ranks = std::max(localRanks, 1);
  const int64_t sharers = std::max<int64_t>(1, (ranks * usableCpus + hostCpus - 1) / hostCpus);
  return std::max(1, static_cast<int>(usableCpus / sharers));
}

int cpuShareOfThisProcess(int localRanks) {
  const int host = static_cast<int>(std::thread::hardware_concurrency());
  cpu_set_t mask;
  CPU_ZERO(&mask);
  // Unknown (0) when the mask cannot be read: then the host's CPUs, as cpuShare takes it.
  const int usable = sched_getaffinity(0, sizeof(mask), &mask) == 0 ? CPU_COUNT(&mask) : 0;
  return cpuShare(usable, host, localRanks);
}

}  // namespace zen
