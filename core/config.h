#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace zen {

// Which sparse allreduce algorithm runs (ZEN_SCHEME).
enum class Scheme : uint8_t { kAuto, kZen, kHc, kAgSparse, kBlocks, kDense };
const char* schemeName(Scheme scheme);

// ZEN_AUTO_SCHEMES' and ZEN_AUTO_PROFILE_CALLS' defaults, named for the option structs that
// take them without building a whole Config.
inline std::vector<Scheme> defaultAutoSchemes() {
  return {Scheme::kZen, Scheme::kHc, Scheme::kAgSparse};
}
inline constexpr int kDefaultAutoProfileCalls = 3;

// A ZEN_* boolean: 0/1/true/false/TRUE/FALSE/yes/no; anything else an error naming `name`.
Result<bool> parseEnvBool(const std::string& name, const std::string& text);

// Every ZEN_* variable, parsed once (CONVENTIONS.md §6: no getenv anywhere else). Unknown
// ZEN_* names and bad values are errors, so a typo never silently falls back to a default.
struct Config {
  // Launch (set by zenrun or derived from the MPI environment when absent).
  std::optional<int> rank, size, localRank, localSize, crossRank, crossSize;
  std::string controllerAddr;  // host:port of rank 0's control channel
  // Rank 0 under zenrun: a socket zenrun already listens on at controllerAddr's port and hands
  // over (ops::TcpOptions::rendezvousFd), so that no other process can take the port first.
  std::optional<int> controllerFd;
  std::string secret;  // per-job secret checked on every TCP connection
  // ZEN_IFACE (Horovod's HOROVOD_GLOO_IFACE, zenrun --network-interface): comma-separated
  // interface names; TCP mode binds, dials from and advertises the first one's IPv4 address
  // (ops/net_interface.h). Empty: the interface that reaches rank 0.
  std::vector<std::string> ifaces;
  // The MPI launcher's placement (OMPI_COMM_WORLD_RANK/SIZE, else PMI_RANK/PMI_SIZE): present
  // under mpirun, where no ZEN_RANK is needed. Read here so that nothing else calls getenv.
  std::optional<int> mpiRank, mpiSize;
  // Its placement on this host (OMPI_COMM_WORLD_LOCAL_RANK/SIZE, MPI_LOCALRANKID/MPI_LOCALNRANKS):
  // local_rank() under a plain mpirun.
  std::optional<int> mpiLocalRank, mpiLocalSize;

  // Runtime knobs, defaults as Horovod's where they overlap.
  int64_t fusionThresholdBytes = int64_t{128} << 20;
  double cycleTimeMs = 1.0;
  // Set explicitly (ZEN_FUSION_THRESHOLD, ZEN_CYCLE_TIME): the autotuner leaves them alone.
  bool fusionThresholdSet = false;
  bool cycleTimeSet = false;
  // The autotuner (controller/parameter_manager.h), Horovod's knobs and defaults.
  bool autotune = false;            // ZEN_AUTOTUNE
  std::string autotuneLog;          // ZEN_AUTOTUNE_LOG: CSV of the points scored
  int autotuneWarmupSamples = 3;    // ZEN_AUTOTUNE_WARMUP_SAMPLES
  int autotuneStepsPerSample = 10;  // ZEN_AUTOTUNE_STEPS_PER_SAMPLE
  int autotuneMaxSamples = 20;      // ZEN_AUTOTUNE_BAYES_OPT_MAX_SAMPLES
  double autotuneNoise = 0.8;       // ZEN_AUTOTUNE_GAUSSIAN_PROCESS_NOISE
  int autotuneConfirmPairs = 3;     // ZEN_AUTOTUNE_CONFIRM_PAIRS (Zen's; 0: Horovod's choice)
  int cacheCapacity = 1024;
  std::string timeline;  // file path, "DYNAMIC", or empty (off)
  bool timelineMarkCycles = false;
  double stallCheckSeconds = 60.0;
  double stallShutdownSeconds = 0.0;  // 0 = never shut down on a stall
  double timeoutSeconds = 30.0;       // bounded waits on peers
  std::string logLevel = "warn";
  bool logHideTime = false;  // ZEN_LOG_HIDE_TIME (Horovod's HOROVOD_LOG_HIDE_TIME)
  // ZEN_MPI_THREADS_DISABLE (Horovod's HOROVOD_MPI_THREADS_DISABLE): the MPI backend asks for
  // MPI_THREAD_SERIALIZED, all its background thread needs, instead of MPI_THREAD_MULTIPLE,
  // which lets other MPI users (mpi4py) run beside it.
  bool mpiThreadsDisable = false;
  Scheme scheme = Scheme::kAuto;
  // auto: timed calls per candidate per bucket; 0 = the first one.
  int autoProfileCalls = kDefaultAutoProfileCalls;
  // auto: the candidates, in profiling and tie-break order (ZEN_AUTO_SCHEMES, comma-separated;
  // only the lossless, sparse-output schemes zen, hc and agsparse qualify).
  std::vector<Scheme> autoSchemes = defaultAutoSchemes();

  // Algorithm 1.
  int hashFunctions = 3;
  double hashMemoryFactor = 1.5;  // r1 = factor * expected per-partition nnz
  uint64_t seed = 0x5eed2e2ULL;
  int threads = 0;  // CPU threads per rank; 0: the rank's share of the host (core/cpu_share.h)

  // Said once at init, on the runtime's logger (bindings/runtime_factory.cc): a HOROVOD_* alias
  // overridden by a different value, and the HOROVOD_* variables zen ignores (core/horovod_env.h).
  std::vector<std::string> warnings;

  // Parses a snapshot of the environment; only ZEN_* names, their HOROVOD_* aliases
  // (core/horovod_env.h) and the MPI placement above are looked at.
  static Result<Config> parse(const std::map<std::string, std::string>& env);
  // Reads the process environment once and parses it.
  static Result<Config> fromEnvironment();
};

}  // namespace zen
