#include "core/cpu_share.h"

#include <sched.h>

#include <algorithm>
#include <thread>

namespace zen {

int cpuShare(int usableCpus, int hostCpus, int localRanks) {
  hostCpus = std::max(hostCpus, 1);
  usableCpus = usableCpus <= 0 ? hostCpus : std::min(usableCpus, hostCpus);
  if (usableCpus < hostCpus) return usableCpus;  // bound by the launcher: its share already
  return std::max(1, hostCpus / std::max(localRanks, 1));
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
