#pragma once

// How many CPU threads a rank's pool gets when ZEN_THREADS does not say: the rank's share of
// the host, so that several ranks on one host do not each start a thread per core and fight
// over them (4 ranks on 16 cores: 4 threads each, not 16).

namespace zen {

// usableCpus: the CPUs this process may run on (its affinity mask); hostCpus: the host's
// online CPUs; localRanks: the job's ranks on this host. The usable CPUs are shared with the
// local ranks that, spread evenly over the host, fall on them: ceil(localRanks x usable /
// host) of them. So an unbound rank gets hostCpus / localRanks, one bound to a core (mpirun
// --bind-to core) that core, one of two ranks bound to the same socket half of the socket.
// At least 1.
int cpuShare(int usableCpus, int hostCpus, int localRanks);

// cpuShare of this process: its affinity mask and std::thread::hardware_concurrency().
int cpuShareOfThisProcess(int localRanks);

}  // namespace zen
