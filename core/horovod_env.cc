#include "core/horovod_env.h"

#include <algorithm>
#include <cctype>
#include <optional>

#include "core/config.h"

namespace zen {
namespace {

// A HOROVOD_* value in Zen's units: the text its ZEN_* variable takes, or nullopt for "leave
// the ZEN_* setting alone" (HOROVOD_STALL_CHECK_DISABLE=0).
using Convert = Result<std::optional<std::string>> (*)(const std::string& name,
                                                       const std::string& value);

Result<std::optional<std::string>> same(const std::string&, const std::string& value) {
  return std::optional<std::string>(value);
}

// Horovod's levels are case-insensitive and spell two of Zen's (spdlog's) differently.
Result<std::optional<std::string>> logLevel(const std::string&, const std::string& value) {
  std::string level = value;
  std::transform(level.begin(), level.end(), level.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (level == "warning") level = "warn";
  if (level == "fatal") level = "critical";
  return std::optional<std::string>(level);
}

// Zen's "stall check off" is a warning time of 0 (controller/stall_inspector.h).
Result<std::optional<std::string>> stallCheckDisable(const std::string& name,
                                                     const std::string& value) {
  ZEN_ASSIGN_OR_RETURN(bool disable, parseEnvBool(name, value));
  return disable ? std::optional<std::string>("0") : std::nullopt;
}

struct Alias {
  const char* horovod;
  const char* zen;
  Convert convert;
};

// Every HOROVOD_* variable with a Zen meaning (Horovod's horovod/common/common.h, logging.cc,
// gloo_context.cc). Units agree unless a conversion says otherwise: fusion threshold bytes,
// cycle time milliseconds, stall times and the Gloo timeout seconds. HOROVOD_TIMELINE keeps
// Zen's file naming: one file per rank, ".rank<N>" inserted (Horovod writes rank 0's only, at
// the path itself), as zenrun --timeline-filename (horovodrun's flag) does.
constexpr Alias kAliases[] = {
    {"HOROVOD_FUSION_THRESHOLD", "ZEN_FUSION_THRESHOLD", same},
    {"HOROVOD_CYCLE_TIME", "ZEN_CYCLE_TIME", same},
    {"HOROVOD_CACHE_CAPACITY", "ZEN_CACHE_CAPACITY", same},
    {"HOROVOD_TIMELINE", "ZEN_TIMELINE", same},
    {"HOROVOD_TIMELINE_MARK_CYCLES", "ZEN_TIMELINE_MARK_CYCLES", same},
    {"HOROVOD_AUTOTUNE", "ZEN_AUTOTUNE", same},
    {"HOROVOD_AUTOTUNE_LOG", "ZEN_AUTOTUNE_LOG", same},
    {"HOROVOD_AUTOTUNE_WARMUP_SAMPLES", "ZEN_AUTOTUNE_WARMUP_SAMPLES", same},
    {"HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE", "ZEN_AUTOTUNE_STEPS_PER_SAMPLE", same},
    {"HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", "ZEN_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", same},
    {"HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", "ZEN_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", same},
    // Before HOROVOD_STALL_CHECK_TIME_SECONDS: disabled means off whatever the time says.
    {"HOROVOD_STALL_CHECK_DISABLE", "ZEN_STALL_CHECK_TIME_SECONDS", stallCheckDisable},
    {"HOROVOD_STALL_CHECK_TIME_SECONDS", "ZEN_STALL_CHECK_TIME_SECONDS", same},
    {"HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "ZEN_STALL_SHUTDOWN_TIME_SECONDS", same},
    {"HOROVOD_LOG_LEVEL", "ZEN_LOG_LEVEL", logLevel},
    {"HOROVOD_LOG_HIDE_TIME", "ZEN_LOG_HIDE_TIME", same},
    {"HOROVOD_MPI_THREADS_DISABLE", "ZEN_MPI_THREADS_DISABLE", same},
    {"HOROVOD_GLOO_IFACE", "ZEN_IFACE", same},
    // Gloo's bound on every wait for a peer (default 30 s, as ZEN_TIMEOUT's).
    {"HOROVOD_GLOO_TIMEOUT_SECONDS", "ZEN_TIMEOUT", same},
};

// Settings Horovod has and Zen lacks, with why; any other HOROVOD_* name is listed too.
constexpr const char* kWhyIgnored[][2] = {
    {"HOROVOD_HIERARCHICAL_ALLREDUCE", "zen has no hierarchical allreduce"},
    {"HOROVOD_HIERARCHICAL_ALLGATHER", "zen has no hierarchical allgather"},
    {"HOROVOD_NUM_NCCL_STREAMS", "zen's GPU path has no such setting"},
    {"HOROVOD_THREAD_AFFINITY", "zen has no thread affinity setting"},
    {"HOROVOD_CPU_OPERATIONS", "zen's transport follows its launcher: zenrun --tcp or --mpi"},
    {"HOROVOD_CONTROLLER", "zen's transport follows its launcher: zenrun --tcp or --mpi"},
    {"HOROVOD_ENABLE_XLA_OPS", "zen has no XLA ops"},
};

// What a Horovod launcher gives each process (gloo_run, Spark, Ray): its place in a job zen
// cannot join. zenrun drops them from the ranks' environment (zen/common/horovod_env.py);
// anywhere else they are stale, so naming them would be noise with nothing to act on.
constexpr const char* kLauncherVariables[] = {
    "HOROVOD_RANK",
    "HOROVOD_SIZE",
    "HOROVOD_LOCAL_RANK",
    "HOROVOD_LOCAL_SIZE",
    "HOROVOD_CROSS_RANK",
    "HOROVOD_CROSS_SIZE",
    "HOROVOD_HOSTNAME",
    "HOROVOD_GLOO_RENDEZVOUS_ADDR",
    "HOROVOD_GLOO_RENDEZVOUS_PORT",
    "HOROVOD_GLOO_GLOBAL_PREFIX",
    "HOROVOD_GLOO_LOCAL_PREFIX",
    "HOROVOD_GLOO_CROSS_PREFIX",
    "HOROVOD_ELASTIC",
};

// `pip install horovod`'s settings (Horovod's docs/install.rst), often left in a container's
// environment; Horovod itself ignores them at run time.
constexpr const char* kBuildPrefixes[] = {
    "HOROVOD_WITH_",        "HOROVOD_WITHOUT_", "HOROVOD_GPU",       "HOROVOD_NCCL_HOME",
    "HOROVOD_NCCL_INCLUDE", "HOROVOD_NCCL_LIB", "HOROVOD_NCCL_LINK", "HOROVOD_CUDA_",
    "HOROVOD_ROCM_HOME",    "HOROVOD_BUILD_",   "HOROVOD_CMAKE",     "HOROVOD_MPICXX_SHOW",
    "HOROVOD_DEBUG",
};

bool startsWith(const std::string& s, const char* prefix) {
  return s.rfind(prefix, 0) == 0;
}

bool isAlias(const std::string& name) {
  return std::any_of(std::begin(kAliases), std::end(kAliases),
                     [&](const Alias& a) { return name == a.horovod; });
}

bool isQuiet(const std::string& name) {
  return std::any_of(std::begin(kLauncherVariables), std::end(kLauncherVariables),
                     [&](const char* v) { return name == v; }) ||
         std::any_of(std::begin(kBuildPrefixes), std::end(kBuildPrefixes),
                     [&](const char* p) { return startsWith(name, p); });
}

}  // namespace

Status addHorovodAliases(const std::map<std::string, std::string>& env,
                         std::map<std::string, EnvSetting>* settings,
                         std::vector<std::string>* warnings) {
  for (const Alias& alias : kAliases) {
    auto it = env.find(alias.horovod);
    if (it == env.end()) continue;
    ZEN_ASSIGN_OR_RETURN(std::optional<std::string> value, alias.convert(it->first, it->second));
    if (!value) continue;
    auto [at, added] = settings->emplace(alias.zen, EnvSetting{alias.horovod, *value});
    if (!added && at->second.value != *value) {
      warnings->push_back(fmt::format("{}={} is overridden by {}={}", alias.horovod, it->second,
                                      at->second.source, env.at(at->second.source)));
    }
  }
  return Status::ok();
}

std::string horovodIgnoredWarning(const std::map<std::string, std::string>& env) {
  std::string list;
  for (const auto& entry : env) {
    const std::string& name = entry.first;
    if (!startsWith(name, "HOROVOD_") || isAlias(name) || isQuiet(name)) continue;
    const char* why = "no zen counterpart";
    for (const auto& [known, reason] : kWhyIgnored) {
      if (name == known) why = reason;
    }
    list += fmt::format("{}{} ({})", list.empty() ? "" : ", ", name, why);
  }
  return list.empty() ? list : "Horovod variables zen ignores: " + list;
}

Status horovodLauncherError(const std::map<std::string, std::string>& env) {
  auto size = env.find("HOROVOD_SIZE");
  if (size == env.end() || size->second == "1" || size->second == "0") return Status::ok();
  auto rank = env.find("HOROVOD_RANK");
  return ZEN_ERROR(StatusCode::kInvalidArgument,
                   "HOROVOD_RANK={} HOROVOD_SIZE={}: a Horovod launcher (horovodrun's Gloo mode, "
                   "Spark or Ray) started this process, and zen cannot join its rendezvous; "
                   "launch with zenrun (horovodrun's flags), or with mpirun / horovodrun --mpi",
                   rank == env.end() ? "unset" : rank->second, size->second);
}

}  // namespace zen
