"""--config-file: horovodrun's config file (Horovod's runner/common/util/config_parser.py).

The sections and keys are horovodrun's, each setting the zenrun flag of the same meaning;
a flag given on the command line wins over the file, as in horovodrun. YAML needs PyYAML
(zenrun itself is standard library only); without it the file must be JSON, which has the
same shape. A key zenrun has no counterpart for is refused, never skipped: a config written
for Horovod must not seem to apply when it does not. A null value counts as absent, as in
horovodrun.
"""

import argparse
import json

# section -> {key: the flag's dest}
KEYS = {
    "params": {"fusion_threshold_mb": "fusion_threshold_mb", "cycle_time_ms": "cycle_time_ms",
               "cache_capacity": "cache_capacity"},
    "autotune": {"enabled": "autotune", "log_file": "autotune_log_file",
                 "warmup_samples": "autotune_warmup_samples",
                 "steps_per_sample": "autotune_steps_per_sample",
                 "bayes_opt_max_samples": "autotune_bayes_opt_max_samples",
                 "gaussian_process_noise": "autotune_gaussian_process_noise"},
    "timeline": {"filename": "timeline_filename", "mark_cycles": "timeline_mark_cycles"},
    "stall_check": {"enabled": "no_stall_check", "warning_time_seconds": "stall_check_time",
                    "shutdown_time_seconds": "stall_shutdown_time"},
    "logging": {"level": "log_level", "with_timestamp": "log_hide_time"},
    "library_options": {"mpi_threads_disable": "mpi_threads_disable",
                        "gloo_timeout_seconds": "gloo_timeout_seconds"},
}
# horovodrun's settings with no zenrun counterpart (by their dest), and why: refused by name
# in a config file and on the command line (args.py).
UNSUPPORTED = {
    "hierarchical_allreduce": "zen has no hierarchical allreduce (--scheme picks the sparse "
                              "algorithm)",
    "hierarchical_allgather": "zen has no hierarchical allgather",
    "num_nccl_streams": "zen's GPU path has no such setting",
    "thread_affinity": "zen has no thread affinity setting",
    "binding_args": "give mpirun's binding flags with --mpi-args",
    "use_jsrun": "zenrun launches with its own TCP launcher or with mpirun",
    "cooldown_range": "a host where a worker failed stays out for the rest of the job "
                      "(--no-blacklist-on-failure lets it back at once)",
}
# A config key without a dest in KEYS -> its dest in UNSUPPORTED.
_UNSUPPORTED_KEYS = {"params.hierarchical_allreduce": "hierarchical_allreduce",
                     "params.hierarchical_allgather": "hierarchical_allgather",
                     "library_options.num_nccl_streams": "num_nccl_streams",
                     "library_options.thread_affinity": "thread_affinity"}
CONTROLLERS = {"gloo": "tcp", "mpi": "mpi"}


def _load(p, path):
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        p.error(f"--config-file '{path}': {e.strerror}")
    try:
        import yaml
    except ImportError:
        try:
            return json.loads(text)
        except ValueError:
            p.error(f"--config-file '{path}': reading YAML needs the Python module 'yaml' "
                    f"(PyYAML; Debian's python3-yaml), which is not installed; or write "
                    f"the file as JSON")
    try:
        return yaml.safe_load(text)  # JSON too: YAML reads it
    except yaml.YAMLError as e:
        p.error(f"--config-file '{path}': {e}")


def given_on_command_line(p, argv):
    """The dests argv sets: argv parsed again by p with every default suppressed (argparse
    tells no "given" apart from "default" otherwise)."""
    actions = p._actions  # noqa: SLF001
    saved = [a.default for a in actions]
    ns = argparse.Namespace()
    try:
        for a in actions:
            a.default = argparse.SUPPRESS
        p.parse_args(argv, namespace=ns)
    finally:
        for a, default in zip(actions, saved):
            a.default = default
    return set(vars(ns))


def _value(p, action, where, value):
    """value through the flag's own checks (the type function of `action`)."""
    if action.nargs == 0:  # a store_true flag
        if not isinstance(value, bool):
            p.error(f"{where}: expected true or false, not {value!r}")
        return value
    if isinstance(value, bool) or isinstance(value, (dict, list)):
        p.error(f"{where}: expected a {'number' if action.type else 'string'}, not {value!r}")
    if action.type is None:
        return str(value)
    try:
        return action.type(str(value))
    except argparse.ArgumentTypeError as e:
        p.error(f"{where}: {e}")


def apply(p, args, argv):
    """Sets args from the file --config-file names, except what argv itself sets."""
    path = args.config_file
    config = _load(p, path)
    if config is None:
        return
    if not isinstance(config, dict):
        p.error(f"--config-file '{path}': expected a mapping of sections, not "
                f"{type(config).__name__}")
    given = given_on_command_line(p, argv)
    actions = {a.dest: a for a in p._actions}  # noqa: SLF001
    for section, body in config.items():
        where = f"--config-file '{path}': {section}"
        if section == "controller":
            if body is None:
                continue
            if not isinstance(body, str) or body.lower() not in CONTROLLERS:
                p.error(f"{where}: expected gloo or mpi, not {body!r}")
            if "mode" not in given:
                args.mode = CONTROLLERS[body.lower()]
            continue
        if section not in KEYS:
            p.error(f"{where}: not one of horovodrun's sections zenrun reads "
                    f"({', '.join(sorted(KEYS))}, controller)")
        if body is None:
            continue
        if not isinstance(body, dict):
            p.error(f"{where}: expected a mapping, not {body!r}")
        for key, value in body.items():
            name = f"{section}.{key}"
            dest = KEYS[section].get(key)
            if value is None:
                continue
            if dest is None:
                why = UNSUPPORTED.get(_UNSUPPORTED_KEYS.get(name))
                if why is None:
                    p.error(f"--config-file '{path}': {name} is not a horovodrun setting "
                            f"zenrun knows ({', '.join(KEYS[section]) or 'none here'})")
                p.error(f"--config-file '{path}': {name} is not supported: {why}")
            if dest in given:
                continue
            parsed = _value(p, actions[dest], f"--config-file '{path}': {name}", value)
            if name in ("stall_check.enabled", "logging.with_timestamp"):
                parsed = not parsed  # the flags are --no-stall-check, --log-without-timestamp
            setattr(args, dest, parsed)
