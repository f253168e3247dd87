#include "core/config.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <functional>
#include <vector>

#include "core/horovod_env.h"

extern char** environ;

namespace zen {
namespace {

Result<int64_t> parseInt(const std::string& name, const std::string& text, int64_t lo, int64_t hi) {
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || v < lo || v > hi) {
    return ZEN_ERROR(StatusCode::kInvalidArgument, "{}='{}': expected an integer in [{}, {}]", name,
                     text, lo, hi);
  }
  return static_cast<int64_t>(v);
}

Result<double> parseDouble(const std::string& name, const std::string& text, double lo, double hi) {
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || errno != 0 || !(v >= lo && v <= hi)) {
    return ZEN_ERROR(StatusCode::kInvalidArgument, "{}='{}': expected a number in [{}, {}]", name,
                     text, lo, hi);
  }
  return v;
}

Result<Scheme> parseScheme(const std::string& name, const std::string& text) {
  for (Scheme s : {Scheme::kAuto, Scheme::kZen, Scheme::kHc, Scheme::kAgSparse, Scheme::kBlocks,
                   Scheme::kDense}) {
    if (text == schemeName(s)) return s;
  }
  return ZEN_ERROR(StatusCode::kInvalidArgument,
                   "{}='{}': expected auto, zen, hc, agsparse, blocks or dense", name, text);
}

// ZEN_AUTO_SCHEMES: auto's candidates. dense (its sparse output drops rows that sum to zero)
// and blocks (ALGORITHMS.md §6: a baseline that pays whole blocks) are not among them.
Result<std::vector<Scheme>> parseAutoSchemes(const std::string& text) {
  std::vector<Scheme> schemes;
  size_t at = 0;
  while (true) {
    const size_t comma = text.find(',', at);
    const std::string name = text.substr(at, comma == std::string::npos ? comma : comma - at);
    Result<Scheme> s = parseScheme("ZEN_AUTO_SCHEMES", name);
    ZEN_CHECK_ARG(s.isOk() && (s.value() == Scheme::kZen || s.value() == Scheme::kHc ||
                               s.value() == Scheme::kAgSparse),
                  "ZEN_AUTO_SCHEMES='{}': '{}' is not a candidate (expected a comma-separated "
                  "list of zen, hc, agsparse)",
                  text, name);
    ZEN_CHECK_ARG(std::find(schemes.begin(), schemes.end(), s.value()) == schemes.end(),
                  "ZEN_AUTO_SCHEMES='{}': {} is listed twice", text, name);
    schemes.push_back(s.value());
    if (comma == std::string::npos) return schemes;
    at = comma + 1;
  }
}

// ZEN_IFACE: interface names, none empty (a stray comma is a typo, not "any interface").
Result<std::vector<std::string>> parseIfaces(const std::string& name, const std::string& text) {
  std::vector<std::string> names;
  size_t at = 0;
  while (true) {
    const size_t comma = text.find(',', at);
    names.push_back(text.substr(at, comma == std::string::npos ? comma : comma - at));
    ZEN_CHECK_ARG(!names.back().empty(),
                  "{}='{}': expected comma-separated network interface names, e.g. "
                  "eth0 or ib0,eth0",
                  name, text);
    if (comma == std::string::npos) return names;
    at = comma + 1;
  }
}

Result<std::string> parseLogLevel(const std::string& name, const std::string& text) {
  for (const char* level : {"trace", "debug", "info", "warn", "error", "critical", "off"}) {
    if (text == level) return text;
  }
  return ZEN_ERROR(StatusCode::kInvalidArgument,
                   "{}='{}': expected trace, debug, info, warn, error, critical or off", name,
                   text);
}

using Setter = std::function<Status(Config&, const std::string& name, const std::string& value)>;

Setter intField(std::optional<int> Config::*field, int64_t lo) {
  return [field, lo](Config& c, const std::string& name, const std::string& v) {
    ZEN_ASSIGN_OR_RETURN(int64_t x, parseInt(name, v, lo, 1 << 30));
    c.*field = static_cast<int>(x);
    return Status::ok();
  };
}

Setter smallIntField(int Config::*field, int64_t lo) {
  return [field, lo](Config& c, const std::string& name, const std::string& v) {
    ZEN_ASSIGN_OR_RETURN(int64_t x, parseInt(name, v, lo, 1000000));
    c.*field = static_cast<int>(x);
    return Status::ok();
  };
}

Setter doubleField(double Config::*field, double lo, double hi) {
  return [field, lo, hi](Config& c, const std::string& name, const std::string& v) {
    ZEN_ASSIGN_OR_RETURN(c.*field, parseDouble(name, v, lo, hi));
    return Status::ok();
  };
}

Setter boolField(bool Config::*field) {
  return [field](Config& c, const std::string& name, const std::string& v) {
    ZEN_ASSIGN_OR_RETURN(c.*field, parseEnvBool(name, v));
    return Status::ok();
  };
}

Setter stringField(std::string Config::*field) {
  return [field](Config& c, const std::string&, const std::string& v) {
    c.*field = v;
    return Status::ok();
  };
}

// A name the launcher's tools read (zen.common.elastic_rendezvous): known, so not rejected,
// and not used by the library.
Setter ignored() {
  return [](Config&, const std::string&, const std::string&) { return Status::ok(); };
}

const std::map<std::string, Setter>& setters() {
  // Function-local and immutable: the table of known names, not mutable global state.
  static const std::map<std::string, Setter> table = {
      {"ZEN_RANK", intField(&Config::rank, 0)},
      {"ZEN_SIZE", intField(&Config::size, 1)},
      {"ZEN_LOCAL_RANK", intField(&Config::localRank, 0)},
      {"ZEN_LOCAL_SIZE", intField(&Config::localSize, 1)},
      {"ZEN_CROSS_RANK", intField(&Config::crossRank, 0)},
      {"ZEN_CROSS_SIZE", intField(&Config::crossSize, 1)},
      {"ZEN_CONTROLLER_ADDR", stringField(&Config::controllerAddr)},
      {"ZEN_CONTROLLER_FD", intField(&Config::controllerFd, 0)},
      {"ZEN_SECRET", stringField(&Config::secret)},
      {"ZEN_IFACE",
       [](Config& c, const std::string& n, const std::string& v) {
         ZEN_ASSIGN_OR_RETURN(c.ifaces, parseIfaces(n, v));
         return Status::ok();
       }},
      {"ZEN_ELASTIC_RENDEZVOUS", ignored()},
      {"ZEN_ELASTIC_WORKER", ignored()},
      {"ZEN_FUSION_THRESHOLD",
       [](Config& c, const std::string& n, const std::string& v) {
         ZEN_ASSIGN_OR_RETURN(c.fusionThresholdBytes, parseInt(n, v, 0, int64_t{1} << 40));
         c.fusionThresholdSet = true;
         return Status::ok();
       }},
      {"ZEN_CYCLE_TIME",
       [](Config& c, const std::string& n, const std::string& v) {
         ZEN_ASSIGN_OR_RETURN(c.cycleTimeMs, parseDouble(n, v, 0.0, 10000.0));
         c.cycleTimeSet = true;
         return Status::ok();
       }},
      {"ZEN_AUTOTUNE", boolField(&Config::autotune)},
      {"ZEN_AUTOTUNE_LOG", stringField(&Config::autotuneLog)},
      {"ZEN_AUTOTUNE_WARMUP_SAMPLES", smallIntField(&Config::autotuneWarmupSamples, 0)},
      {"ZEN_AUTOTUNE_STEPS_PER_SAMPLE", smallIntField(&Config::autotuneStepsPerSample, 1)},
      {"ZEN_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", smallIntField(&Config::autotuneMaxSamples, 1)},
      {"ZEN_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", doubleField(&Config::autotuneNoise, 1e-6, 1e6)},
      {"ZEN_AUTOTUNE_CONFIRM_PAIRS", smallIntField(&Config::autotuneConfirmPairs, 0)},
      {"ZEN_CACHE_CAPACITY",
       [](Config& c, const std::string& n, const std::string& v) {
         ZEN_ASSIGN_OR_RETURN(int64_t x, parseInt(n, v, 0, 1 << 24));
         c.cacheCapacity = static_cast<int>(x);
         return Status::ok();
       }},
      {"ZEN_TIMELINE", stringField(&Config::timeline)},
      {"ZEN_TIMELINE_MARK_CYCLES", boolField(&Config::timelineMarkCycles)},
      {"ZEN_STALL_CHECK_TIME_SECONDS", doubleField(&Config::stallCheckSeconds, 0.0, 1e7)},
      {"ZEN_STALL_SHUTDOWN_TIME_SECONDS", doubleField(&Config::stallShutdownSeconds, 0.0, 1e7)},
      {"ZEN_TIMEOUT", doubleField(&Config::timeoutSeconds, 0.001, 1e7)},
      {"ZEN_LOG_HIDE_TIME", boolField(&Config::logHideTime)},
      {"ZEN_MPI_THREADS_DISABLE", boolField(&Config::mpiThreadsDisable)},
      {"ZEN_LOG_LEVEL",
       [](Config& c, const std::string& n, const std::string& v) {
         ZEN_ASSIGN_OR_RETURN(c.logLevel, parseLogLevel(n, v));
         return Status::ok();
       }},
      {"ZEN_SCHEME",
       [](Config& c, const std::string& n, const std::string& v) {
         ZEN_ASSIGN_OR_RETURN(c.scheme, parseScheme(n, v));
         return Status::ok();
       }},
      {"ZEN_AUTO_PROFILE_CALLS",
       [](Config& c, const std::string& n, const std::string& v) {
         ZEN_ASSIGN_OR_RETURN(int64_t x, parseInt(n, v, 0, 1000));
         c.autoProfileCalls = static_cast<int>(x);
         return Status::ok();
       }},
      {"ZEN_AUTO_SCHEMES",
       [](Config& c, const std::string&, const std::string& v) {
         ZEN_ASSIGN_OR_RETURN(c.autoSchemes, parseAutoSchemes(v));
         return Status::ok();
       }},
      {"ZEN_HASH_FUNCTIONS",
       [](Config& c, const std::string& n, const std::string& v) {
         ZEN_ASSIGN_OR_RETURN(int64_t x, parseInt(n, v, 1, 8));
         c.hashFunctions = static_cast<int>(x);
         return Status::ok();
       }},
      {"ZEN_HASH_MEMORY_FACTOR", doubleField(&Config::hashMemoryFactor, 0.25, 64.0)},
      {"ZEN_SEED",
       [](Config& c, const std::string& n, const std::string& v) {
         ZEN_ASSIGN_OR_RETURN(int64_t x, parseInt(n, v, 0, INT64_MAX));
         c.seed = static_cast<uint64_t>(x);
         return Status::ok();
       }},
      {"ZEN_THREADS",
       [](Config& c, const std::string& n, const std::string& v) {
         ZEN_ASSIGN_OR_RETURN(int64_t x, parseInt(n, v, 0, 1024));
         c.threads = static_cast<int>(x);
         return Status::ok();
       }},
  };
  return table;
}

// The first (rank, size) pair of `names` present in env, in order, into *rank / *size.
Status parseRankPair(const std::map<std::string, std::string>& env,
                     const char* const (&names)[2][2],
                     std::optional<int>* rank,
                     std::optional<int>* size) {
  for (const auto& [rankName, sizeName] : names) {
    auto r = env.find(rankName);
    auto n = env.find(sizeName);
    if (r == env.end() || n == env.end()) continue;
    ZEN_ASSIGN_OR_RETURN(int64_t rv, parseInt(rankName, r->second, 0, 1 << 30));
    ZEN_ASSIGN_OR_RETURN(int64_t nv, parseInt(sizeName, n->second, 1, 1 << 30));
    ZEN_CHECK_ARG(rv < nv, "{}={} is not below {}={}", rankName, rv, sizeName, nv);
    *rank = static_cast<int>(rv);
    *size = static_cast<int>(nv);
    break;
  }
  return Status::ok();
}

// The MPI launchers' placement variables, Open MPI's first.
Status parseMpiPlacement(const std::map<std::string, std::string>& env, Config* config) {
  const char* const world[2][2] = {{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                                   {"PMI_RANK", "PMI_SIZE"}};
  const char* const local[2][2] = {{"OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"},
                                   {"MPI_LOCALRANKID", "MPI_LOCALNRANKS"}};
  ZEN_RETURN_IF_ERROR(parseRankPair(env, world, &config->mpiRank, &config->mpiSize));
  return parseRankPair(env, local, &config->mpiLocalRank, &config->mpiLocalSize);
}

// Variables of the build, test and demo scripts (tools/), never read by the library: a
// ZEN_BUILD_DIR left in the shell must not make every rank refuse to start.
bool isToolVariable(const std::string& name) {
  for (const char* prefix : {"ZEN_BUILD_", "ZEN_FUZZ_", "ZEN_GPU_", "ZEN_DEMO_", "ZEN_TEST_"}) {
    if (name.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

}  // namespace

Result<bool> parseEnvBool(const std::string& name, const std::string& text) {
  if (text == "1" || text == "true" || text == "TRUE" || text == "yes") return true;
  if (text == "0" || text == "false" || text == "FALSE" || text == "no") return false;
  return ZEN_ERROR(StatusCode::kInvalidArgument, "{}='{}': expected 0/1/true/false", name, text);
}

const char* schemeName(Scheme scheme) {
  switch (scheme) {
    case Scheme::kAuto:
      return "auto";
    case Scheme::kZen:
      return "zen";
    case Scheme::kHc:
      return "hc";
    case Scheme::kAgSparse:
      return "agsparse";
    case Scheme::kBlocks:
      return "blocks";
    case Scheme::kDense:
      return "dense";
  }
  return "unknown";
}

Result<Config> Config::parse(const std::map<std::string, std::string>& env) {
  Config config;
  std::map<std::string, EnvSetting> settings;  // ZEN_* name -> where its value came from
  for (const auto& [name, value] : env) {
    if (name.rfind("ZEN_", 0) != 0 || isToolVariable(name)) continue;
    if (setters().count(name) == 0) {
      return ZEN_ERROR(StatusCode::kInvalidArgument,
                       "unknown variable {} (see docs/architecture.md for the ZEN_* list)", name);
    }
    settings.emplace(name, EnvSetting{name, value});
  }
  ZEN_RETURN_IF_ERROR(addHorovodAliases(env, &settings, &config.warnings));
  for (const auto& [name, setting] : settings) {
    ZEN_RETURN_IF_ERROR(setters().at(name)(config, setting.source, setting.value));
  }
  const std::string ignored = horovodIgnoredWarning(env);
  if (!ignored.empty()) config.warnings.push_back(ignored);
  ZEN_RETURN_IF_ERROR(parseMpiPlacement(env, &config));
  if (config.rank && config.size && *config.rank >= *config.size) {
    return ZEN_ERROR(StatusCode::kInvalidArgument, "ZEN_RANK={} is not below ZEN_SIZE={}",
                     *config.rank, *config.size);
  }
  if (!config.rank && !config.size && !config.mpiSize) {
    ZEN_RETURN_IF_ERROR(horovodLauncherError(env));
  }
  return config;
}

Result<Config> Config::fromEnvironment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string entry(*e);
    const size_t eq = entry.find('=');
    if (eq != std::string::npos) env[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  return parse(env);
}

}  // namespace zen
