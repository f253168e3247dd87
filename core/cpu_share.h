#pragma once

// How many CPU threads a rank's pool gets when ZEN_THREADS does not say: the rank's share of
// the host, so that several ranks on one host do not each start a thread per core and fight
// over them (4 ranks on 16 cores: 4 threads each, not 16).

namespace zen {

// usableCpus: the CPUs this process may run on (its affinity mask); hostCpus: the host's
// online CPUs; localRanks: the job's ranks on this host. A launcher that bound the rank to
// fewer CPUs than the host has (mpirun --bind-to, taskset) already gave it its share, so that
// is used as it is; an unbound rank gets hostCpus / localRanks. At least 1.
int cpuShare(int usableCpus, int hostCpus, int localRanks);

// cpuShare of this process: its affinity mask and std::thread::hardware_concurrency().
int cpuShareOfThisProcess(int localRanks);

}  // namespace zen
