"""zenrun's entry point: parse the flags, place the ranks, run them in TCP or MPI mode."""

import os
import sys

from zen.common import horovod_env
from zen.runner import args as arglib
from zen.runner import horovod_timeline
from zen.runner import hosts as hostlib
from zen.runner.output import Output


def _base_env(args, environ):
    """The caller's environment without stale placement variables (zenrun's and Horovod's
    launchers'), plus the flags' knobs, which win over the HOROVOD_* aliases of the same
    settings (dropped); and the names of those dropped."""
    env = {k: v for k, v in environ.items()
           if k not in arglib.PLACEMENT_VARIABLES and k not in horovod_env.LAUNCHER_VARIABLES}
    knobs = arglib.knob_env(args)
    dropped = horovod_env.drop_aliases(env, knobs)
    env.update(knobs)
    if args.network_interface and "NCCL_SOCKET_IFNAME" not in env:
        # NCCL's own sockets (the GPU data plane) on the same interfaces, as horovodrun does.
        env["NCCL_SOCKET_IFNAME"] = args.network_interface
    env["PYTHONUNBUFFERED"] = "1"  # Python ranks' lines arrive as they are printed
    return env, dropped


def main(argv=None):
    args = arglib.parse(sys.argv[1:] if argv is None else argv)
    if args.check_build:
        from zen.runner import check_build

        return check_build.main()
    return launch(args)


def launch(args, environ=None, output_type=Output):
    """Runs the job that parsed flags `args` describe, the ranks' environment built from
    environ (default os.environ), their lines written by an output_type (zen.run's catches
    the results); returns zenrun's exit code."""
    environ = os.environ if environ is None else environ
    p = args.parser
    try:
        if args.hostfile:
            hosts = hostlib.parse_hostfile(args.hostfile)
        elif args.hosts:
            hosts = hostlib.parse_hosts(args.hosts)
        elif args.elastic and args.host_discovery_script:
            hosts = None  # asked of the script
        else:
            hosts = [hostlib.Host("localhost", max(args.num_proc, args.max_np or 0)
                                  if args.elastic else args.num_proc)]
        slots = hostlib.assign_ranks(hosts, args.num_proc) if hosts else None
    except hostlib.HostError as e:
        p.error(str(e))

    # Elastic: output prefixes and log folders are numbered by worker (order of start).
    output = output_type(max(args.num_proc, args.max_np or 0), args.output_filename,
                         timestamps=args.prefix_timestamp)
    unknown = sorted(k for k in environ
                     if k.startswith("ZEN_") and k not in arglib.KNOWN_VARIABLES)
    if unknown:
        output.message(f"warning: {', '.join(unknown)} in the environment "
                       f"{'is' if len(unknown) == 1 else 'are'} not known ZEN_* "
                       f"variables; the library will reject "
                       f"{'it' if len(unknown) == 1 else 'them'} (docs/architecture.md)")
    try:
        output.open_logs([] if args.elastic else range(args.num_proc))
    except OSError as e:
        p.error(f"--output-filename '{args.output_filename}': {e.strerror}")

    env, dropped = _base_env(args, environ)
    if dropped:
        output.message(f"note: zenrun's flags override {', '.join(dropped)} from the "
                       f"environment (not passed to the ranks)")
    if not args.elastic:
        rank0 = next(s.host for s in slots if s.rank == 0)
        problem = horovod_timeline.link_rank0(env, rank0)
        if problem:
            output.message(f"warning: {problem}")
    if args.elastic:
        from zen.runner import elastic_driver

        return elastic_driver.run(args, hosts, env, output)
    if args.mode == "mpi":
        from zen.runner import mpi_run

        return mpi_run.run(args, hosts, slots, env, output)
    from zen.runner import tcp_run

    return tcp_run.run(args, slots, env, output)
