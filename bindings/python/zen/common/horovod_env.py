"""Horovod's HOROVOD_* variables where zenrun and the Python side read a ZEN_* variable
themselves (the interface, the stall check): the library reads them as aliases of their
ZEN_* variables (core/horovod_env.cc has the table, its precedence and conversions; these are
the same pairs, checked against it by test/python/test_zenrun.py), so these readers must too."""

# ZEN_* name -> its HOROVOD_* aliases, in the library's order of precedence (after ZEN_*).
ALIASES = {
    "ZEN_FUSION_THRESHOLD": ("HOROVOD_FUSION_THRESHOLD",),
    "ZEN_CYCLE_TIME": ("HOROVOD_CYCLE_TIME",),
    "ZEN_CACHE_CAPACITY": ("HOROVOD_CACHE_CAPACITY",),
    "ZEN_TIMELINE": ("HOROVOD_TIMELINE",),
    "ZEN_TIMELINE_MARK_CYCLES": ("HOROVOD_TIMELINE_MARK_CYCLES",),
    "ZEN_AUTOTUNE": ("HOROVOD_AUTOTUNE",),
    "ZEN_AUTOTUNE_LOG": ("HOROVOD_AUTOTUNE_LOG",),
    "ZEN_AUTOTUNE_WARMUP_SAMPLES": ("HOROVOD_AUTOTUNE_WARMUP_SAMPLES",),
    "ZEN_AUTOTUNE_STEPS_PER_SAMPLE": ("HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE",),
    "ZEN_AUTOTUNE_BAYES_OPT_MAX_SAMPLES": ("HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES",),
    "ZEN_AUTOTUNE_GAUSSIAN_PROCESS_NOISE": ("HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE",),
    "ZEN_STALL_CHECK_TIME_SECONDS": ("HOROVOD_STALL_CHECK_DISABLE",
                                     "HOROVOD_STALL_CHECK_TIME_SECONDS"),
    "ZEN_STALL_SHUTDOWN_TIME_SECONDS": ("HOROVOD_STALL_SHUTDOWN_TIME_SECONDS",),
    "ZEN_LOG_LEVEL": ("HOROVOD_LOG_LEVEL",),
    "ZEN_LOG_HIDE_TIME": ("HOROVOD_LOG_HIDE_TIME",),
    "ZEN_MPI_THREADS_DISABLE": ("HOROVOD_MPI_THREADS_DISABLE",),
    "ZEN_IFACE": ("HOROVOD_GLOO_IFACE",),
    "ZEN_TIMEOUT": ("HOROVOD_GLOO_TIMEOUT_SECONDS",),
}

# What a Horovod launcher gives each process: zenrun drops them from the ranks' environment,
# like its own stale placement variables (the library's kLauncherVariables).
LAUNCHER_VARIABLES = frozenset("""
HOROVOD_RANK HOROVOD_SIZE HOROVOD_LOCAL_RANK HOROVOD_LOCAL_SIZE HOROVOD_CROSS_RANK
HOROVOD_CROSS_SIZE HOROVOD_HOSTNAME HOROVOD_GLOO_RENDEZVOUS_ADDR HOROVOD_GLOO_RENDEZVOUS_PORT
HOROVOD_GLOO_GLOBAL_PREFIX HOROVOD_GLOO_LOCAL_PREFIX HOROVOD_GLOO_CROSS_PREFIX HOROVOD_ELASTIC
""".split())

_TRUE = ("1", "true", "TRUE", "yes")


def lookup(env, name):
    """(value, source variable) of ZEN_* `name` in env as the library reads it: name itself,
    else its first alias set (HOROVOD_STALL_CHECK_DISABLE=1 reads as 0, stall check off;
    =0 leaves the setting to the next); (None, None) when none is."""
    if name in env:
        return env[name], name
    for alias in ALIASES.get(name, ()):
        if alias not in env:
            continue
        if alias == "HOROVOD_STALL_CHECK_DISABLE":
            if env[alias] in _TRUE:
                return "0", alias
            continue
        return env[alias], alias
    return None, None


def drop_aliases(env, names):
    """Removes from env the HOROVOD_* aliases of the ZEN_* `names` (zenrun's flags set those,
    and a flag wins); returns the names removed, sorted."""
    dropped = sorted(a for n in names for a in ALIASES.get(n, ()) if a in env)
    for alias in dropped:
        del env[alias]
    return dropped
