"""The thin per-rank wrapper zenrun starts in front of every rank's command.

It is run by file path (python3 .../zen/runner/rank_wrapper.py), needs only the standard
library and imports nothing from zen, so it works the same on a remote host, inside a
network namespace or under mpirun.

Start report. Right before it runs the command, the wrapper writes one line to its stdout:

    ZENRUN_READY <token> <rank>

zenrun reads every rank's stdout anyway (to prefix it), so the report travels the same path
as the output: through ssh, `ip netns exec`, or mpirun's --tag-output forwarding, with no
connection back to the launcher (which a firewall or a private network could block) and no
extra port. zenrun recognises only the exact line with its per-job random token and drops
it; everything else is the rank's output. A rank that does not report within
--start-timeout (its ssh hangs, its host is down, python3 is missing there) fails the job.

Local ranks (`exec` mode): the wrapper reports and then exec()s the command, so the rank
keeps the wrapper's pid and zenrun signals it directly.

--pass-fd N (repeatable): descriptor N goes on to the command (zenrun's controller socket for
rank 0, ZEN_CONTROLLER_FD); in exec mode it simply stays open.

Remote ranks (--watch-stdin): the wrapper stays as the parent. It reads the rank's
environment as one JSON line from stdin (so ZEN_SECRET never appears on a command line; when
stdin ends before or right after that line, zenrun is gone or stopping, and the rank is not
started: exit 1),
runs the command in its own process group with PR_SET_PDEATHSIG=SIGKILL, forwards
SIGINT/SIGTERM/SIGHUP to that group, and treats end-of-file on stdin (zenrun, ssh or the
launch command went away) as SIGTERM followed by SIGKILL after --grace seconds. A byte
INTERRUPT (0x03, a terminal's Ctrl-C) on stdin after the environment line is zenrun's Ctrl-C,
which ssh cannot carry as a signal: SIGINT to the group, SIGKILL after --grace seconds, the
same stop zenrun gives its local ranks. It exits
with the command's status (dying by the same signal when the command was killed). With
--env-stdin (a remote rank) it reports such a death instead, as one more stdout line

    ZENRUN_KILLED <token> <rank> <signal number>

and exits with 128 + the signal number: ssh turns a death by signal into its own exit code
255, which zenrun would read as a failed ssh. The rank writes to the same stdout directly, so
its last output may lack a newline and the report begin mid-line; zenrun looks for it
anywhere in the line (output.killed_signal).
"""

import json
import os
import select
import signal
import subprocess
import sys
import threading

READY_PREFIX = "ZENRUN_READY"
INTERRUPT = b"\x03"  # on a watching wrapper's stdin: zenrun's Ctrl-C (see above)
KILLED_PREFIX = "ZENRUN_KILLED"
WRAPPER = os.path.abspath(__file__)  # run by path: `python3 <WRAPPER> ... -- CMD`


def ready_line(token, rank):
    return f"{READY_PREFIX} {token} {rank}\n"


def killed_line(token, rank, sig):
    return f"{KILLED_PREFIX} {token} {rank} {sig}\n"


def _rank_from_env():
    for name in ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "ZEN_RANK"):
        if os.environ.get(name, "").isdigit():
            return os.environ[name]
    return "?"


def _report(line):
    try:
        os.write(1, line.encode())
    except OSError:
        pass  # stdout closed (zenrun or ssh is gone): no one to tell


def _fail(rank, cmd, err):
    sys.stderr.write(f"zenrun: rank {rank}: cannot run '{cmd[0]}': {err.strerror}\n")
    sys.stderr.flush()
    return 126 if isinstance(err, PermissionError) else 127


def _exec(rank, cmd):
    try:
        os.execvp(cmd[0], cmd)
    except OSError as err:
        return _fail(rank, cmd, err)
    return 127  # not reached


def _child_setup():
    os.setpgid(0, 0)
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: die with the wrapper
    except (OSError, AttributeError):
        pass


def _watch(rank, cmd, grace, pass_fds=(), killed_token=None):
    try:
        child = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, preexec_fn=_child_setup,
                                 pass_fds=pass_fds)
    except OSError as err:
        return _fail(rank, cmd, err)
    for fd in pass_fds:  # the command's now; the port is freed when it exits
        os.close(fd)
    lock = threading.Lock()
    state = {"stopping": False}

    def signal_group(sig):
        try:
            os.killpg(child.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def stop(sig=signal.SIGTERM):
        with lock:
            if state["stopping"]:
                return
            state["stopping"] = True
        signal_group(sig)
        try:
            child.wait(grace)
        except subprocess.TimeoutExpired:
            signal_group(signal.SIGKILL)

    def on_signal(sig, _frame):
        if sig == signal.SIGINT:
            signal_group(sig)  # forwarded as is; the program decides what Ctrl-C means
        else:
            threading.Thread(target=stop, args=(sig,), daemon=True).start()

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)

    def watch_stdin():
        try:
            while True:
                chunk = os.read(0, 4096)
                if not chunk:
                    break
                if INTERRUPT in chunk:
                    threading.Thread(target=stop, args=(signal.SIGINT,), daemon=True).start()
        except OSError:
            pass
        stop()

    threading.Thread(target=watch_stdin, daemon=True).start()
    code = child.wait()
    if code < 0 and killed_token is not None:
        _report(killed_line(killed_token, rank, -code))
        return 128 - code
    if code < 0:  # die of the same signal, so that the launcher sees what happened
        try:
            if -code not in (signal.SIGKILL, signal.SIGSTOP):
                signal.signal(-code, signal.SIG_DFL)
            os.kill(os.getpid(), -code)
        except (OSError, ValueError):
            pass
        return 128 - code
    return code


def _read_env_line():
    """Reads the rank's environment into os.environ; False when stdin ended first, before
    the whole line or right after it: zenrun (or ssh) is gone, or is stopping this rank
    before it started, and the rank must not start (it would run on, without its job, until
    the wrapper's stop after the grace period)."""
    # zenrun writes this line and nothing after it until the rank has reported its start,
    # so whole chunks can be read: byte by byte took seconds for zen.run's function (up to
    # 1 MiB in the environment) on a loaded machine.
    chunks = []
    while not chunks or not chunks[-1].endswith(b"\n"):
        chunk = os.read(0, 65536)
        if not chunk:
            return False
        chunks.append(chunk)
    if select.select([0], [], [], 0)[0] and not os.read(0, 1):
        return False  # end-of-file already waiting; nothing else can be (see above)
    env = json.loads(b"".join(chunks).decode())
    os.environ.update({str(k): str(v) for k, v in env.items()})
    return True


def main(argv=None):
    args = list(sys.argv[1:] if argv is None else argv)
    rank, token, grace, watch, env_stdin, pass_fds = None, "", 5.0, False, False, []
    while args and args[0] != "--":
        flag = args.pop(0)
        if flag == "--rank":
            rank = args.pop(0)
        elif flag == "--token":
            token = args.pop(0)
        elif flag == "--grace":
            grace = float(args.pop(0))
        elif flag == "--watch-stdin":
            watch = True
        elif flag == "--env-stdin":
            env_stdin = True
        elif flag == "--pass-fd":
            pass_fds.append(int(args.pop(0)))
        else:
            sys.stderr.write(f"rank_wrapper: unknown flag {flag}\n")
            return 2
    cmd = args[1:]
    if not cmd:
        sys.stderr.write("rank_wrapper: no command after --\n")
        return 2
    if env_stdin and not _read_env_line():
        sys.stderr.write(f"zenrun: rank {rank if rank is not None else '?'}: the launcher "
                         f"closed stdin before the rank started; not starting it\n")
        return 1
    if rank is None:
        rank = _rank_from_env()
    _report(ready_line(token, rank))  # when missing, --start-timeout says so
    if not watch:
        return _exec(rank, cmd)
    return _watch(rank, cmd, grace, tuple(pass_fds), token if env_stdin else None)


if __name__ == "__main__":
    sys.exit(main())
