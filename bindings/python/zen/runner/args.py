"""zenrun's command line: flags, their checks, and the ZEN_* variables they become.

Usage errors (unknown flag, bad value, impossible placement) exit with code 2 and one
`zenrun: error: ...` line after the usage, as argparse does.
"""

import argparse
import os
import shlex
import sys

import zen
from zen.common import horovod_env
from zen.runner import config_file, interfaces

# As horovodrun's (horovod/runner/util/remote.py): never a prompt, and a host whose key is
# not known yet is added to known_hosts instead of failing "Host key verification failed".
DEFAULT_LAUNCH_COMMAND = "ssh -o BatchMode=yes -o StrictHostKeyChecking=no {host}"
DEFAULT_START_TIMEOUT = 30.0
DEFAULT_GRACE_SECONDS = 5.0
DEFAULT_ELASTIC_TIMEOUT = 600.0  # Horovod's
DEFAULT_SLOTS_PER_HOST = 1
DEFAULT_STALL_WARNING = 60.0  # core/config.h's stallCheckSeconds
SCHEMES = ("auto", "zen", "hc", "agsparse", "blocks", "dense")
AUTO_SCHEMES = ("zen", "hc", "agsparse")  # auto's candidates (ops/auto_scheme.h)
LOG_LEVELS = ("trace", "debug", "info", "warn", "error", "critical", "off")
_LOG_LEVEL_ALIASES = {"warning": "warn", "fatal": "critical"}  # Horovod's spellings

# The ZEN_* names core/config.cc accepts (docs/architecture.md). The library rejects any
# other ZEN_* name; zenrun only warns, so a name added to the library and not yet here
# still works.
KNOWN_VARIABLES = frozenset("""
ZEN_RANK ZEN_SIZE ZEN_LOCAL_RANK ZEN_LOCAL_SIZE ZEN_CROSS_RANK ZEN_CROSS_SIZE
ZEN_CONTROLLER_ADDR ZEN_CONTROLLER_FD ZEN_SECRET ZEN_IFACE ZEN_FUSION_THRESHOLD ZEN_CYCLE_TIME
ZEN_CACHE_CAPACITY
ZEN_TIMELINE ZEN_TIMELINE_MARK_CYCLES ZEN_STALL_CHECK_TIME_SECONDS
ZEN_STALL_SHUTDOWN_TIME_SECONDS ZEN_TIMEOUT ZEN_LOG_LEVEL ZEN_LOG_HIDE_TIME ZEN_SCHEME
ZEN_MPI_THREADS_DISABLE
ZEN_AUTO_PROFILE_CALLS
ZEN_AUTO_SCHEMES
ZEN_HASH_FUNCTIONS
ZEN_HASH_MEMORY_FACTOR ZEN_SEED ZEN_THREADS
ZEN_AUTOTUNE ZEN_AUTOTUNE_LOG ZEN_AUTOTUNE_WARMUP_SAMPLES ZEN_AUTOTUNE_STEPS_PER_SAMPLE
ZEN_AUTOTUNE_BAYES_OPT_MAX_SAMPLES ZEN_AUTOTUNE_GAUSSIAN_PROCESS_NOISE
ZEN_AUTOTUNE_CONFIRM_PAIRS
ZEN_ELASTIC_RENDEZVOUS ZEN_ELASTIC_WORKER
""".split())

# Set per rank (or per job) by zenrun; stale values inherited from the caller's
# environment are dropped, never forwarded.
PLACEMENT_VARIABLES = ("ZEN_RANK", "ZEN_SIZE", "ZEN_LOCAL_RANK", "ZEN_LOCAL_SIZE",
                       "ZEN_CROSS_RANK", "ZEN_CROSS_SIZE", "ZEN_CONTROLLER_ADDR",
                       "ZEN_CONTROLLER_FD", "ZEN_SECRET", "ZEN_ELASTIC_RENDEZVOUS",
                       "ZEN_ELASTIC_WORKER")

EXAMPLES = """\
examples:
  # 4 ranks on this machine, output lines prefixed [rank]<stdout>: / [rank]<stderr>:
  zenrun -np 4 python3 train.py

  # 8 ranks on two hosts (over ssh, as horovodrun), rank logs under logs/rank.N/
  zenrun -np 8 -H node1:4,node2:4 --output-filename logs python3 train.py --epochs 3

  # sshd on port 2222 of every host, and a key of its own (ssh -p 2222 -i KEY; --mpi:
  # Open MPI's plm_rsh_args)
  zenrun -np 8 -H node1:4,node2:4 -p 2222 -i ~/.ssh/train_key python3 train.py

  # horovodrun's config file (YAML with PyYAML, or JSON); flags given here win
  zenrun -np 4 --config-file horovod.yaml --log-level info python3 train.py

  # hosts on a management and a data network: every connection on the data one (eth1)
  zenrun -np 8 -H node1:4,node2:4 --network-interface eth1 python3 train.py

  # through Open MPI's mpirun instead of zenrun's own TCP launch
  zenrun -np 4 --mpi --fusion-threshold-mb 64 --scheme zen python3 train.py

  # elastic: 2 to 4 workers on the hosts a script prints (host:slots lines), checked every
  # second; a failed worker's host is left out and the others continue (zen.torch.elastic)
  zenrun -np 2 --min-np 2 --max-np 4 --host-discovery-script ./hosts.sh python3 train.py

  # hosts that are network namespaces on this machine (how the tests run "many hosts")
  zenrun -np 4 -H ns0:2,ns1:2 --launch-command 'ip netns exec {host} sh -c' \\
         --controller-addr 10.213.0.1 python3 train.py

  # elastic on namespace hosts: workers dial zenrun at 10.215.0.1 (its end of their link);
  # each round's rank 0 listens on its own address toward zenrun
  zenrun -np 2 --min-np 2 --max-np 4 -H ns0:2,ns1:2 --rendezvous-addr 10.215.0.1 \\
         --launch-command 'ip netns exec {host} sh -c' python3 train.py

environment:
  ZENRUN_LAUNCH_COMMAND   default of --launch-command (like it, excludes -p/-i)
  ZENRUN_START_TIMEOUT    default of --start-timeout
  ZENRUN_REMOTE_PYTHON    interpreter that runs the rank wrapper on remote hosts (python3)
  ZEN_*                   passed to the ranks as they are; flags override them

exit status: the first failing rank's code (128+N when it died of signal N); 128+N when
zenrun itself got signal N; 1 when the job could not start (--start-timeout, launch
failure); 2 for usage errors; 0 when every rank exited with 0. Elastic: 0 when the last
round's workers all exited 0; 1 when the job failed (fewer than --min-np workers, the
elastic timeout, --reset-limit); else the first failing worker's code after the job
began finishing.
"""


def _number(kind, lo=None, hi=None, integer=False):
    def parse(text):
        try:
            value = int(text) if integer else float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected {'an integer' if integer else 'a number'}, not '{text}'") from None
        if value != value or (lo is not None and value < lo) or (hi is not None and value > hi):
            bounds = f"in [{lo}, {hi}]" if hi is not None else f">= {lo}"
            raise argparse.ArgumentTypeError(f"{kind} must be {bounds}, not {text}")
        return value

    return parse


def _auto_schemes(text):
    """A comma-separated list of auto's candidates, each once (core/config.cc checks the same)."""
    names = text.split(",")
    for name in names:
        if name not in AUTO_SCHEMES:
            raise argparse.ArgumentTypeError(
                f"'{name}' is not a candidate (expected a comma-separated list of "
                f"{', '.join(AUTO_SCHEMES)})")
    if len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(f"a scheme is listed twice in '{text}'")
    return text


def _interfaces(text):
    try:
        interfaces.parse_list(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


def _log_level(text):
    level = _LOG_LEVEL_ALIASES.get(text.lower(), text.lower())
    if level not in LOG_LEVELS:
        raise argparse.ArgumentTypeError(
            f"expected one of {', '.join(LOG_LEVELS)}, not '{text}'")
    return level


def _env_float(name, default):
    text = os.environ.get(name)
    if text is None:
        return default
    try:
        return float(text)
    except ValueError:
        return text  # reported as a usage error in parse()


# horovodrun's flags for the settings zenrun lacks (config_file.UNSUPPORTED says why).
_HOROVODRUN_ONLY = {
    "--hierarchical-allreduce": "hierarchical_allreduce",
    "--no-hierarchical-allreduce": "hierarchical_allreduce",
    "--hierarchical-allgather": "hierarchical_allgather",
    "--no-hierarchical-allgather": "hierarchical_allgather",
    "--num-nccl-streams": "num_nccl_streams",
    "--thread-affinity": "thread_affinity",
    "--binding-args": "binding_args", "--jsrun": "use_jsrun",
    "--blacklist-cooldown-range": "cooldown_range",
}


class UsageError(ValueError):
    """A usage error, raised instead of exiting when the parser serves zen.run."""


class _Parser(argparse.ArgumentParser):
    raise_errors = False  # zen.run: raise UsageError instead of printing usage and exiting

    def error(self, message):
        if self.raise_errors:
            raise UsageError(message)
        if message.startswith("unrecognized arguments: "):
            known = [w.split("=", 1)[0] for w in message.split()[2:]
                     if w.split("=", 1)[0] in _HOROVODRUN_ONLY]
            if known:
                message += "; " + "; ".join(
                    f"horovodrun's {w} has no zenrun counterpart: "
                    f"{config_file.UNSUPPORTED[_HOROVODRUN_ONLY[w]]}" for w in known)
        self.print_usage(sys.stderr)
        self.exit(2, f"zenrun: error: {message}\n")


def build_parser():
    p = _Parser(
        prog="zenrun",
        description="Launch N ranks of a Zen job: locally, on many hosts over ssh (or any\n"
        "launch command), or through mpirun. Sets ZEN_RANK/SIZE/LOCAL_*/CROSS_*,\n"
        "ZEN_CONTROLLER_ADDR, a per-job ZEN_SECRET and the ZEN_* knobs below; prefixes\n"
        "every output line with its rank; stops the whole job when one rank fails.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    p.add_argument("-v", "--version", action="version", version=f"zenrun {zen.__version__}")
    p.add_argument("-cb", "--check-build", action="store_true",
                   help="print the frameworks, controllers and tensor operations this Zen "
                   "was built with (horovodrun's), then exit; needs no command")
    p.add_argument("-np", "--num-proc", dest="num_proc", metavar="N",
                   type=_number("-np", lo=1, integer=True),
                   help="number of ranks (elastic: the workers started first; default "
                   "--min-np)")
    hosts = p.add_mutually_exclusive_group()
    hosts.add_argument("-H", "--hosts", metavar="HOST:SLOTS,...",
                       help="hosts and slots, e.g. node1:4,node2:4 (default localhost:N)")
    hosts.add_argument("-hostfile", "--hostfile", metavar="FILE",
                       help="file of 'host slots=N' lines")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--tcp", "--gloo", dest="mode", action="store_const", const="tcp",
                      help="zenrun starts every rank itself (default; --gloo: "
                      "horovodrun's name for it); remote hosts through --launch-command")
    mode.add_argument("--mpi", dest="mode", action="store_const", const="mpi",
                      help="run the ranks through Open MPI's mpirun; ranks read "
                      "OMPI_COMM_WORLD_*")

    knobs = p.add_argument_group("library knobs (become ZEN_* variables)")
    knobs.add_argument("--fusion-threshold-mb", metavar="MB",
                       type=_number("--fusion-threshold-mb", lo=0, hi=1 << 20),
                       help="fusion bucket size in MiB -> ZEN_FUSION_THRESHOLD bytes "
                       "(library default 128)")
    knobs.add_argument("--cycle-time-ms", metavar="MS",
                       type=_number("--cycle-time-ms", lo=0, hi=10000),
                       help="background cycle in ms -> ZEN_CYCLE_TIME (default 1)")
    knobs.add_argument("--cache-capacity", metavar="N",
                       type=_number("--cache-capacity", lo=0, hi=1 << 24, integer=True),
                       help="response cache entries -> ZEN_CACHE_CAPACITY (default 1024)")
    knobs.add_argument("--scheme", choices=SCHEMES,
                       help="sparse allreduce algorithm -> ZEN_SCHEME (default auto)")
    knobs.add_argument("--auto-profile-calls", metavar="P",
                       type=_number("--auto-profile-calls", lo=0, hi=1000, integer=True),
                       help="auto: timed calls of each candidate per bucket before choosing "
                            "-> ZEN_AUTO_PROFILE_CALLS (default 3; 0: always the first "
                            "candidate)")
    knobs.add_argument("--auto-schemes", metavar="S,...", type=_auto_schemes,
                       help="auto: the candidates profiled, in order (ties go to the earlier) "
                            "-> ZEN_AUTO_SCHEMES (default zen,hc,agsparse)")
    knobs.add_argument("--hash-functions", metavar="K",
                       type=_number("--hash-functions", lo=1, hi=8, integer=True),
                       help="Algorithm 1's k -> ZEN_HASH_FUNCTIONS (default 3)")
    knobs.add_argument("--timeline-filename", metavar="FILE",
                       help="Chrome trace path or DYNAMIC -> ZEN_TIMELINE")
    knobs.add_argument("--timeline-mark-cycles", action="store_true",
                       help="cycle markers in the timeline -> ZEN_TIMELINE_MARK_CYCLES=1")
    knobs.add_argument("--stall-check-time", "--stall-check-warning-time-seconds",
                       dest="stall_check_time", metavar="S",
                       type=_number("--stall-check-time", lo=0, hi=1e7),
                       help="warn about ranks that have not posted after S seconds -> "
                       "ZEN_STALL_CHECK_TIME_SECONDS (default 60)")
    knobs.add_argument("--stall-check-shutdown-time-seconds", dest="stall_shutdown_time",
                       metavar="S", type=_number("--stall-check-shutdown-time-seconds",
                                                 lo=0, hi=1e7),
                       help="after S seconds of a stall every rank's pending and later "
                       "operations fail, naming the stalled ranks; at least the warning time "
                       "-> ZEN_STALL_SHUTDOWN_TIME_SECONDS (default 0: never)")
    knobs.add_argument("--no-stall-check", action="store_true",
                       help="no stall warnings and no stall shutdown -> "
                       "ZEN_STALL_CHECK_TIME_SECONDS=0")
    knobs.add_argument("--log-level", metavar="L", type=_log_level,
                       help=f"{', '.join(LOG_LEVELS)} -> ZEN_LOG_LEVEL (default warn)")
    knobs.add_argument("--log-without-timestamp", "--log-hide-timestamp", dest="log_hide_time",
                       action="store_true",
                       help="the library's log lines without the time of day -> "
                       "ZEN_LOG_HIDE_TIME=1")
    knobs.add_argument("--gloo-timeout-seconds", metavar="S",
                       type=_number("--gloo-timeout-seconds", lo=0.001, hi=1e7),
                       help="horovodrun's: the bound on any wait on a peer (Gloo's there; "
                       "every transport's here) -> ZEN_TIMEOUT (default 30)")
    knobs.add_argument("--mpi-threads-disable", action="store_true",
                       help="with --mpi: MPI initialized with MPI_THREAD_SERIALIZED instead "
                       "of MPI_THREAD_MULTIPLE (no other MPI user beside zen) -> "
                       "ZEN_MPI_THREADS_DISABLE=1")

    tune = p.add_argument_group("autotune (Horovod's; rank 0 tunes the fusion threshold and "
                                "the cycle time, except those given above)")
    tune.add_argument("--autotune", action="store_true",
                      help="tune by Bayesian optimization of the bytes moved per second "
                      "-> ZEN_AUTOTUNE=1")
    tune.add_argument("--autotune-log-file", metavar="FILE",
                      help="CSV of the points scored and the choice -> ZEN_AUTOTUNE_LOG")
    tune.add_argument("--autotune-warmup-samples", metavar="N",
                      type=_number("--autotune-warmup-samples", lo=0, hi=1000000, integer=True),
                      help="samples discarded first -> ZEN_AUTOTUNE_WARMUP_SAMPLES (default 3)")
    tune.add_argument("--autotune-steps-per-sample", metavar="N",
                      type=_number("--autotune-steps-per-sample", lo=1, hi=1000000,
                                   integer=True),
                      help="steps per sample -> ZEN_AUTOTUNE_STEPS_PER_SAMPLE (default 10)")
    tune.add_argument("--autotune-bayes-opt-max-samples", metavar="N",
                      type=_number("--autotune-bayes-opt-max-samples", lo=1, hi=1000000,
                                   integer=True),
                      help="points scored -> ZEN_AUTOTUNE_BAYES_OPT_MAX_SAMPLES (default 20)")
    tune.add_argument("--autotune-gaussian-process-noise", metavar="A",
                      type=_number("--autotune-gaussian-process-noise", lo=1e-6, hi=1e6),
                      help="the Gaussian process' noise -> "
                      "ZEN_AUTOTUNE_GAUSSIAN_PROCESS_NOISE (default 0.8)")
    tune.add_argument("--autotune-confirm-pairs", metavar="N",
                      type=_number("--autotune-confirm-pairs", lo=0, hi=1000000, integer=True),
                      help="pairs of samples (best point, configured values) that must confirm "
                      "the best before it is kept; 0 keeps the best score as Horovod -> "
                      "ZEN_AUTOTUNE_CONFIRM_PAIRS (default 3)")

    elastic = p.add_argument_group(
        "elastic (Horovod's; any of --min-np, --max-np, --host-discovery-script; TCP mode; the "
        "program uses zen.torch.elastic / zen.tensorflow.elastic)")
    elastic.add_argument("--min-np", metavar="N", type=_number("--min-np", lo=1, integer=True),
                         help="fewest workers the job runs with (default -np)")
    elastic.add_argument("--max-np", metavar="N", type=_number("--max-np", lo=1, integer=True),
                         help="most workers (default: every slot of the hosts)")
    elastic.add_argument("--host-discovery-script", metavar="FILE",
                         help="executable printing the usable hosts, one 'host[:slots]' a "
                         "line; run every second")
    elastic.add_argument("--slots-per-host", metavar="N", default=DEFAULT_SLOTS_PER_HOST,
                         type=_number("--slots-per-host", lo=1, integer=True),
                         help="slots of a discovered host printed without ':slots' "
                         "(default 1)")
    elastic.add_argument("--elastic-timeout", metavar="S", default=DEFAULT_ELASTIC_TIMEOUT,
                         type=_number("--elastic-timeout", lo=0.1, hi=1e7),
                         help="seconds a round may wait for its workers (or for --min-np "
                         "workers to be possible) before the job fails (default 600)")
    elastic.add_argument("--reset-limit", metavar="N",
                         type=_number("--reset-limit", lo=0, integer=True),
                         help="the job fails when the workers change more often (default "
                         "no limit)")
    elastic.add_argument("--rendezvous-addr", metavar="HOST",
                         help="the address of this machine that every worker dials to reach "
                         "zenrun's rendezvous (a free port is added; default: its address on "
                         "--network-interface if it has that, else 127.0.0.1 for local "
                         "workers, this machine's host name for remote ones); rank 0 of each "
                         "round listens on its --network-interface address, else on the "
                         "address its rendezvous connection came from")
    elastic.add_argument("--blacklist-on-failure", dest="blacklist", action="store_true",
                         default=True,
                         help="start no new worker on a host where one failed (default)")
    elastic.add_argument("--no-blacklist-on-failure", dest="blacklist", action="store_false",
                         help="replace a failed worker on any free slot, its host included")

    launch = p.add_argument_group("launcher")
    launch.add_argument("--start-timeout", metavar="S",
                        default=_env_float("ZENRUN_START_TIMEOUT", DEFAULT_START_TIMEOUT),
                        help="every rank must start within S seconds or the job fails "
                        "(default 30, or ZENRUN_START_TIMEOUT; 0 = no limit)")
    launch.add_argument("--output-filename", metavar="DIR",
                        help="also write each rank's output to DIR/rank.N/{stdout,stderr}")
    launch.add_argument("--launch-command", metavar="TEMPLATE",
                        help="--tcp: how a rank starts on a remote host; {host} is replaced "
                        "by the host name and one argument, a POSIX shell command line, is "
                        f"appended (default '{DEFAULT_LAUNCH_COMMAND}' with -p/-i added, or "
                        "ZENRUN_LAUNCH_COMMAND)")
    launch.add_argument("--controller-addr", metavar="HOST[:PORT]",
                        help="--tcp: ZEN_CONTROLLER_ADDR (default 127.0.0.1:<free port> "
                        "on one local host, else <first host>:<port>)")
    launch.add_argument("--network-interface", "--network-interfaces", dest="network_interface",
                        metavar="IFACE[,IFACE...]", type=_interfaces,
                        help="the network interfaces the job's traffic uses (Horovod's): every "
                        "rank binds, dials from and advertises its address on the first -> "
                        "ZEN_IFACE; --tcp: ZEN_CONTROLLER_ADDR is the first host's address "
                        "there (asked of a remote host through the launch command); elastic: "
                        "zenrun's rendezvous and each round's rank 0 listen there; also "
                        "NCCL_SOCKET_IFNAME unless set, and --mpi: Open MPI's "
                        "btl_tcp_if_include and oob_tcp_if_include")
    launch.add_argument("--grace-seconds", metavar="S", default=DEFAULT_GRACE_SECONDS,
                        type=_number("--grace-seconds", lo=0, hi=3600),
                        help="seconds between SIGTERM and SIGKILL when stopping ranks "
                        "(default 5)")
    launch.add_argument("--mpi-args", metavar="ARGS", default="",
                        help="--mpi: extra mpirun arguments, e.g. \"-mca btl ^openib\"")
    launch.add_argument("--verbose", action="store_true",
                        help="print the placement and the commands zenrun runs")
    launch.add_argument("--disable-cache", action="store_true",
                        help="horovodrun's: do the launch checks on every run rather than "
                        "reuse cached results; zenrun caches none, so it always does (the "
                        "library's response cache is --cache-capacity 0)")
    launch.add_argument("-prefix-timestamp", "--prefix-output-with-timestamp",
                        dest="prefix_timestamp", action="store_true",
                        help="begin every rank output line with the local time, as "
                        "horovodrun: 'Thu Dec  3 10:32:06 2026[0]<stdout>:...'")
    launch.add_argument("--config-file", metavar="FILE",
                        help="horovodrun's YAML (or JSON) config file: its params, autotune, "
                        "timeline, stall_check, logging and controller sections set the "
                        "flags of the same names; flags given on the command line win "
                        "(README: Launching jobs with zenrun)")

    ssh = p.add_argument_group("ssh (remote hosts; horovodrun's)")
    ssh.add_argument("-p", "--ssh-port", metavar="PORT",
                     type=_number("--ssh-port", lo=1, hi=65535, integer=True),
                     help="ssh port of every remote host: added to the default launch "
                     "command (ssh -p PORT); --mpi: mpirun's plm_rsh_args")
    ssh.add_argument("-i", "--ssh-identity-file", metavar="FILE",
                     help="private key ssh reads on this machine: added to the default "
                     "launch command (ssh -i FILE); --mpi: mpirun's plm_rsh_args")
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="CMD ARGS...",
                   help="the program every rank runs")
    return p


def parse(argv, raise_errors=False, environ=None):
    """Parses and checks argv; returns the namespace (exits 2 on usage errors, or raises
    UsageError with raise_errors). environ: the environment the ranks will get (default
    os.environ; zen.run's env=), where the checks look for settings the flags depend on."""
    p = build_parser()
    p.raise_errors = raise_errors
    args = p.parse_args(argv)
    if args.config_file is not None:
        config_file.apply(p, args, argv)
    if args.command and args.command[0] == "--":
        args.command = args.command[1:]
    if args.check_build:
        return args
    if not args.command:
        p.error("no command given (zenrun -np N [flags] CMD ARGS...)")
    if args.mode is None:
        args.mode = "tcp"
    _check_elastic(p, args)
    try:
        args.start_timeout = float(args.start_timeout)
    except ValueError:
        p.error(f"--start-timeout (or ZENRUN_START_TIMEOUT) must be a number, "
                f"not '{args.start_timeout}'")
    if not 0 <= args.start_timeout <= 1e7:
        p.error(f"--start-timeout must be in [0, 1e7], not {args.start_timeout}")
    args.launch_words = _launch_words(p, args)
    try:
        args.mpi_words = shlex.split(args.mpi_args)
    except ValueError as e:
        p.error(f"--mpi-args '{args.mpi_args}': {e}")
    args.rsh_args = _rsh_args(p, args)
    _check_stall(p, args, os.environ if environ is None else environ)
    if args.controller_addr is not None:
        host, sep, port = args.controller_addr.rpartition(":")
        if sep and (not host or not port.isdigit() or not 0 < int(port) < 65536):
            p.error(f"--controller-addr '{args.controller_addr}': expected HOST or HOST:PORT")
    args.parser = p
    return args


def _ssh_words(args):
    """horovodrun's -p/-i as ssh arguments (empty when neither is given)."""
    words = []
    if args.ssh_port is not None:
        words += ["-p", str(args.ssh_port)]
    if args.ssh_identity_file is not None:
        words += ["-i", args.ssh_identity_file]
    return words


def _launch_words(p, args):
    """The launch command as words: --launch-command, else ZENRUN_LAUNCH_COMMAND, else ssh
    with -p/-i. -p/-i and a launch command of one's own exclude each other: zenrun cannot know
    where such a command takes ssh options (or whether it runs ssh at all), and dropping them
    would be a flag accepted and ignored."""
    given, source = args.launch_command, "--launch-command"
    if given is None and "ZENRUN_LAUNCH_COMMAND" in os.environ:
        given, source = os.environ["ZENRUN_LAUNCH_COMMAND"], "ZENRUN_LAUNCH_COMMAND"
    args.launch_is_ssh = given is None  # the default: mpi_run.check_ssh may use it
    ssh = _ssh_words(args)
    if given is None:
        words = shlex.split(DEFAULT_LAUNCH_COMMAND)
        return words[:-1] + ssh + words[-1:]  # options before the host: ssh ... -p P {host}
    if ssh:
        example = shlex.join(shlex.split(DEFAULT_LAUNCH_COMMAND)[:-1] + ssh) + " {host}"
        p.error(f"-p/--ssh-port and -i/--ssh-identity-file apply to the default launch command "
                f"('{DEFAULT_LAUNCH_COMMAND}'), not to {source} '{given}': put the ssh options "
                f"into it (e.g. '{example}')")
    try:
        words = shlex.split(given)
    except ValueError as e:
        p.error(f"{source} '{given}': {e}")
    if not any("{host}" in w for w in words):
        p.error(f"{source} '{given}' must contain {{host}}, e.g. "
                f"'{DEFAULT_LAUNCH_COMMAND}' or 'ip netns exec {{host}} sh -c'")
    return words


def _rsh_args(p, args):
    """--mpi: -p/-i as Open MPI's plm_rsh_args (Horovod's mpi_run.py), one string that Open
    MPI splits at spaces, without quoting: a path with white space cannot go through it."""
    ssh = _ssh_words(args)
    if args.ssh_identity_file is not None:
        path = args.ssh_identity_file
        if not os.path.isfile(path) or not os.access(path, os.R_OK):
            p.error(f"-i/--ssh-identity-file '{path}' is not a readable file")
        if args.mode == "mpi" and any(c.isspace() for c in path):
            p.error(f"--mpi: -i/--ssh-identity-file '{path}' contains white space, which "
                    f"Open MPI's plm_rsh_args cannot carry")
    if args.mode != "mpi" or not ssh:
        return None
    if any("plm_rsh_args" in w for w in args.mpi_words):
        p.error("-p/--ssh-port and -i/--ssh-identity-file set Open MPI's plm_rsh_args, which "
                "--mpi-args sets too: give the ssh options in one place")
    return " ".join(ssh)


def _check_stall(p, args, environ):
    """A stall flag either works or is refused: --no-stall-check turns the inspector off, so
    warning and shutdown times next to it would be ignored; the inspector looks only at names
    older than the warning time, so a shutdown time below it would act as the warning time."""
    if args.no_stall_check:
        for value, flag in ((args.stall_check_time, "--stall-check-warning-time-seconds"),
                            (args.stall_shutdown_time, "--stall-check-shutdown-time-seconds")):
            if value is not None:
                p.error(f"--no-stall-check turns the stall check off: {flag} would do nothing")
        return
    shutdown = args.stall_shutdown_time
    if not shutdown:
        return
    warning, source = args.stall_check_time, "--stall-check-warning-time-seconds"
    if warning is None:
        text, name = horovod_env.lookup(environ, "ZEN_STALL_CHECK_TIME_SECONDS")
        if name == "HOROVOD_STALL_CHECK_DISABLE":
            p.error("--stall-check-shutdown-time-seconds needs the stall check, which "
                    f"HOROVOD_STALL_CHECK_DISABLE={environ[name]} turns off")
        try:
            warning, source = float(text), name
        except (TypeError, ValueError):
            warning, source = DEFAULT_STALL_WARNING, "the default warning time"
    if warning <= 0:
        p.error(f"--stall-check-shutdown-time-seconds needs the stall check, which {source}="
                f"{_num_text(warning)} turns off")
    if shutdown < warning:
        p.error(f"--stall-check-shutdown-time-seconds {_num_text(shutdown)} is below {source} "
                f"({_num_text(warning)} s): a stall is seen only after the warning time "
                f"(lower it with --stall-check-warning-time-seconds)")


def _check_elastic(p, args):
    """Sets args.elastic and completes -np/--min-np/--max-np (Horovod's defaults)."""
    args.elastic = (args.min_np is not None or args.max_np is not None
                    or args.host_discovery_script is not None)
    if not args.elastic:
        if args.num_proc is None:
            p.error("the following arguments are required: -np/--num-proc")
        if args.rendezvous_addr is not None:
            p.error("--rendezvous-addr applies to elastic jobs only (--min-np, --max-np, "
                    "--host-discovery-script); a fixed-size job's ranks dial --controller-addr")
        return
    if args.mode == "mpi":
        p.error("--mpi cannot run an elastic job (--min-np, --max-np, "
                "--host-discovery-script): elastic jobs run in TCP mode, as Horovod's run on "
                "Gloo only")
    if args.controller_addr is not None:
        p.error("--controller-addr does not apply to elastic jobs: rank 0 of every round "
                "listens on a free port of its own address toward zenrun; --rendezvous-addr "
                "HOST names the address workers dial to reach zenrun")
    if args.rendezvous_addr is not None and (not args.rendezvous_addr or
                                             ":" in args.rendezvous_addr):
        p.error(f"--rendezvous-addr '{args.rendezvous_addr}': expected HOST (a name or IPv4 "
                f"address, no port: zenrun's rendezvous listens on a free port)")
    script = args.host_discovery_script
    if script is not None:
        if args.hosts or args.hostfile:
            p.error("--host-discovery-script and -H/--hostfile exclude each other")
        if not os.path.isfile(script) or not os.access(script, os.X_OK):
            p.error(f"--host-discovery-script '{script}' is not an executable file")
    if args.min_np is None:
        args.min_np = args.num_proc
    if args.min_np is None:
        p.error("an elastic job needs -np or --min-np")
    if args.num_proc is None:
        args.num_proc = args.min_np
    if args.max_np is not None and args.min_np > args.max_np:
        p.error(f"--min-np {args.min_np} is above --max-np {args.max_np}")
    if args.num_proc < args.min_np or (args.max_np is not None and args.num_proc > args.max_np):
        p.error(f"-np {args.num_proc} is outside [--min-np {args.min_np}, --max-np "
                f"{args.max_np if args.max_np is not None else 'unlimited'}]")


def _num_text(x):
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def knob_env(args):
    """The ZEN_* knobs the flags set (only those given; the library has the defaults)."""
    env = {}
    if args.fusion_threshold_mb is not None:
        env["ZEN_FUSION_THRESHOLD"] = str(int(round(args.fusion_threshold_mb * (1 << 20))))
    if args.cycle_time_ms is not None:
        env["ZEN_CYCLE_TIME"] = _num_text(args.cycle_time_ms)
    if args.cache_capacity is not None:
        env["ZEN_CACHE_CAPACITY"] = str(args.cache_capacity)
    if args.scheme is not None:
        env["ZEN_SCHEME"] = args.scheme
    if args.auto_profile_calls is not None:
        env["ZEN_AUTO_PROFILE_CALLS"] = str(args.auto_profile_calls)
    if args.auto_schemes is not None:
        env["ZEN_AUTO_SCHEMES"] = args.auto_schemes
    if args.hash_functions is not None:
        env["ZEN_HASH_FUNCTIONS"] = str(args.hash_functions)
    if args.timeline_filename is not None:
        env["ZEN_TIMELINE"] = args.timeline_filename
    if args.timeline_mark_cycles:
        env["ZEN_TIMELINE_MARK_CYCLES"] = "1"
    if args.stall_check_time is not None:
        env["ZEN_STALL_CHECK_TIME_SECONDS"] = _num_text(args.stall_check_time)
    if args.no_stall_check:
        env["ZEN_STALL_CHECK_TIME_SECONDS"] = "0"  # the inspector's "off" (stall_inspector.h)
    if args.stall_shutdown_time is not None:
        env["ZEN_STALL_SHUTDOWN_TIME_SECONDS"] = _num_text(args.stall_shutdown_time)
    if args.log_level is not None:
        env["ZEN_LOG_LEVEL"] = args.log_level
    if args.log_hide_time:
        env["ZEN_LOG_HIDE_TIME"] = "1"
    if args.mpi_threads_disable:
        env["ZEN_MPI_THREADS_DISABLE"] = "1"
    if args.gloo_timeout_seconds is not None:
        env["ZEN_TIMEOUT"] = _num_text(args.gloo_timeout_seconds)
    if args.network_interface is not None:
        env["ZEN_IFACE"] = args.network_interface
    if args.autotune:
        env["ZEN_AUTOTUNE"] = "1"
    for flag, name in (("autotune_log_file", "ZEN_AUTOTUNE_LOG"),
                       ("autotune_warmup_samples", "ZEN_AUTOTUNE_WARMUP_SAMPLES"),
                       ("autotune_steps_per_sample", "ZEN_AUTOTUNE_STEPS_PER_SAMPLE"),
                       ("autotune_bayes_opt_max_samples", "ZEN_AUTOTUNE_BAYES_OPT_MAX_SAMPLES"),
                       ("autotune_gaussian_process_noise",
                        "ZEN_AUTOTUNE_GAUSSIAN_PROCESS_NOISE"),
                       ("autotune_confirm_pairs", "ZEN_AUTOTUNE_CONFIRM_PAIRS")):
        value = getattr(args, flag)
        if value is not None:
            env[name] = value if isinstance(value, str) else _num_text(value)
    return env
