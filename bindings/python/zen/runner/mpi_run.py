"""--mpi: run the ranks through Open MPI's mpirun.

The command is Horovod's (horovod/runner/mpi_run.py), trimmed:

    mpirun [--allow-run-as-root] --tag-output -np N -H h1:s1,h2:s2 [--oversubscribe]
           -bind-to none -map-by slot [-mca btl_tcp_if_include IFACES -mca oob_tcp_if_include
           IFACES] [-mca plm_rsh_args "-p PORT -i FILE"] [--mpi-args ...] -x ZEN_...
           -x PYTHONUNBUFFERED
           python3 rank_wrapper.py --token T -- CMD ARGS...

Ranks read their placement from OMPI_COMM_WORLD_* (the library derives it from the MPI
environment), so no ZEN_RANK etc. is set; the knobs and ZEN_SECRET travel with -x (by name:
values stay in mpirun's environment, off the command line).

zenrun runs mpirun as a child rather than exec()ing it, so that the output gets the same
`[rank]<stdout>:` prefix as in TCP mode (mpirun's `[jobid,rank]` tags are rewritten),
--output-filename and --start-timeout work the same way (the wrapper's start report comes
back through mpirun's output forwarding), and SIGINT/SIGTERM reach mpirun, which forwards
them to the ranks. When a rank fails, mpirun stops the others and exits with its code;
zenrun names that rank from mpirun's report. Before mpirun, remote hosts get horovodrun's
ssh check (check_ssh).
"""

import os
import re
import secrets
import shlex
import shutil
import subprocess
import sys
import time

from zen.common import horovod_env
from zen.runner import hosts as hostlib
from zen.runner.output import is_ready_line
from zen.runner.supervisor import Supervisor, describe_ranks, signal_name
from zen.runner.rank_wrapper import WRAPPER
from zen.runner.run_task import TASK_PREFIX

_TAG = re.compile(rb"\[\d+,(\d+)\]<(stdout|stderr|stddiag)>:")
_TAG_PREFIX = re.compile(rb"\[[\d,]*(\][<a-z]*)?")  # a tag not yet complete
_FIRST_NAME = re.compile(rb"Process name:\s*\[\[\d+,\d+\],(\d+)\]")
_FIRST_CODE = re.compile(rb"Exit code:\s*(-?\d+)")
_SIGNALLED = re.compile(rb"process rank (\d+) with PID \d+ on node \S+ exited on signal (\d+)")
# Forwarded with -x besides the ZEN_*, HOROVOD_* (their aliases) and ZENRUN_TASK_* (zen.run's
# function) variables: where programs
# and libraries are found.
_ALSO_EXPORTED = ("PYTHONUNBUFFERED", "PATH", "LD_LIBRARY_PATH", "PYTHONPATH",
                  "NCCL_SOCKET_IFNAME")


class TagParser:
    """Reassembles rank lines from mpirun --tag-output.

    Open MPI tags every chunk a rank writes, not every line: `print("x")` from an
    unbuffered Python rank arrives as `[1,0]<stdout>:x` and, maybe after other ranks'
    chunks, `[1,0]<stdout>:\n`. A tagged segment ends at its first newline or where the
    next tag starts; segments are joined per (rank, stream) until a newline completes the
    line. Untagged text (mpirun's own messages) passes through line by line.
    """

    def __init__(self):
        self._buf = b""
        self._partial = {}  # (rank, stream) -> bytes

    def feed(self, data):
        """Returns [(rank or None, stream or None, line)] for the lines `data` completes."""
        self._buf += data
        out = []
        while self._buf:
            m = _TAG.match(self._buf)
            if m is None:
                if _TAG_PREFIX.fullmatch(self._buf):
                    break  # maybe the start of a tag cut by the pipe: wait for more
                nl = self._buf.find(b"\n")
                nt = _TAG.search(self._buf)
                if nl < 0 and nt is None:
                    break
                end = nl + 1 if nl >= 0 and (nt is None or nl < nt.start()) else nt.start()
                out.append((None, None, self._buf[:end]))
                self._buf = self._buf[end:]
                continue
            key = (int(m.group(1)), "stdout" if m.group(2) == b"stdout" else "stderr")
            rest = self._buf[m.end():]
            nl = rest.find(b"\n")
            nt = _TAG.search(rest)
            if nl >= 0 and (nt is None or nl < nt.start()):
                line = self._partial.pop(key, b"") + rest[:nl + 1]
                out.append((key[0], key[1], line))
                self._buf = rest[nl + 1:]
            elif nt is not None:
                self._partial[key] = self._partial.get(key, b"") + rest[:nt.start()]
                self._buf = rest[nt.start():]
            else:
                break  # the segment may go on in the next read
        return out

    def finish(self):
        """End of the stream: whatever is left, as (unterminated) lines."""
        out = self.feed(b"")
        m = _TAG.match(self._buf)
        if m is not None:
            key = (int(m.group(1)), "stdout" if m.group(2) == b"stdout" else "stderr")
            self._partial[key] = self._partial.get(key, b"") + self._buf[m.end():]
        elif self._buf:
            out.append((None, None, self._buf))
        self._buf = b""
        for (rank, stream), line in sorted(self._partial.items()):
            if line:
                out.append((rank, stream, line))
        self._partial.clear()
        return out


def _cpu_count():
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def build_command(args, hosts, slots, env, mpirun="mpirun", python=None, token="T"):
    per_host = {}
    for s in slots:
        per_host[s.host] = per_host.get(s.host, 0) + 1
    oversubscribe = any(hostlib.is_local(h) and n > _cpu_count() for h, n in per_host.items())
    used = [h for h in hosts if h.name in per_host]
    argv = [mpirun]
    if os.geteuid() == 0:
        argv.append("--allow-run-as-root")
    argv += ["--tag-output", "-np", str(len(slots)), "-H", hostlib.format_hosts(used)]
    if oversubscribe:
        argv.append("--oversubscribe")
    argv += ["-bind-to", "none", "-map-by", "slot"]
    iface = horovod_env.lookup(env, "ZEN_IFACE")[0]
    if iface:  # --network-interface, as horovodrun passes it to Open MPI
        argv += ["-mca", "btl_tcp_if_include", iface, "-mca", "oob_tcp_if_include", iface]
    if getattr(args, "rsh_args", None):  # -p/-i, as horovodrun passes them to Open MPI
        argv += ["-mca", "plm_rsh_args", args.rsh_args]
    argv += list(args.mpi_words)
    for name in sorted(env):
        if name.startswith(("ZEN_", "HOROVOD_", TASK_PREFIX)) or name in _ALSO_EXPORTED:
            argv += ["-x", name]
    if python is None:
        python = sys.executable if all(hostlib.is_local(h) for h in per_host) else "python3"
    argv += [python, WRAPPER, "--token", token, "--"] + list(args.command)
    return argv


def check_ssh(args, hosts, output):
    """horovodrun's ssh check before mpirun (horovod/runner/launch.py,
    _check_all_hosts_ssh_successful): `ssh <the default launch command's options and -p/-i>
    HOST true` to every remote host at once, within --start-timeout (30 s when 0). It puts a
    host key not known yet into known_hosts, without which Open MPI's own ssh fails ("Host
    key verification failed"), and names a host that ssh cannot reach, with ssh's reason,
    where mpirun would only say that ORTE could not start its daemons. False after saying
    which hosts failed."""
    remote = [h.name for h in hosts if not hostlib.is_local(h.name)]
    if not remote or not args.launch_is_ssh:
        return True
    limit = args.start_timeout or 30.0
    procs = {host: subprocess.Popen([w.replace("{host}", host) for w in args.launch_words]
                                    + ["true"], stdin=subprocess.DEVNULL,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
             for host in remote}
    deadline = time.monotonic() + limit
    failed = []
    for host, proc in procs.items():
        try:
            _, err = proc.communicate(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            failed.append(f"{host}: no answer within {limit:g} s")
            continue
        if proc.returncode != 0:
            why = err.decode(errors="replace").strip().splitlines()
            failed.append(f"{host}: {why[-1] if why else f'exit code {proc.returncode}'}")
    for line in failed:
        output.message(f"--mpi: ssh to {line}")
    return not failed


def run(args, hosts, slots, base_env, output):
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        output.message("--mpi: mpirun not found on PATH (install openmpi-bin, or use --tcp)")
        return 1
    if not check_ssh(args, hosts, output):
        return 1
    token = secrets.token_hex(8)
    env = dict(base_env)
    env["ZEN_SECRET"] = secrets.token_hex(16)
    argv = build_command(args, hosts, slots, env, mpirun=mpirun, token=token)
    host_of = {s.rank: s.host for s in slots}
    sup = Supervisor(output, host_of, args.start_timeout, args.grace_seconds)
    first = {}  # what mpirun says about the first failed rank

    def on_line(stream, rank, line):
        if rank is None:
            output.raw(stream, line)
            for key, regex in (("rank", _FIRST_NAME), ("code", _FIRST_CODE)):
                found = regex.search(line)
                if found and key not in first:
                    first[key] = int(found.group(1))
            found = _SIGNALLED.search(line)
            if found and "rank" not in first:
                first["rank"], first["signal"] = int(found.group(1)), int(found.group(2))
            return
        if stream == "stdout" and rank not in sup.ready:
            ok, _ = is_ready_line(line, token)
            if ok:
                sup.mark_ready(rank)
                return
        output.rank_line(rank, stream, line)

    def pump(member, stream, pipe):
        parser = TagParser()
        fd = pipe.fileno()
        while True:
            data = os.read(fd, 65536)
            for rank, tagged, line in parser.feed(data) if data else parser.finish():
                on_line(tagged or stream, rank, line)
            if not data:
                break

    if args.verbose:
        output.message(f"mpi mode: {shlex.join(argv)}")
    sup.install_signal_handlers()
    try:
        try:
            sup.spawn(argv, env, sorted(host_of), slots[0].host, pump, signal_leader_only=True)
        except OSError as e:
            output.message(f"cannot start mpirun: {e}")
            return 1
        sup.run()
    finally:
        sup.restore_signal_handlers()
        output.close_logs()

    code = sup.members[0].code
    if sup.received_signal is not None:
        output.stopped_by(sup.received_signal,
                          f"received {signal_name(sup.received_signal)}; stopped mpirun and "
                          f"its {len(slots)} ranks")
        return 128 + sup.received_signal
    if sup.not_started:
        output.message(f"{len(sup.not_started)} of {len(slots)} ranks did not start within "
                       f"{args.start_timeout:g} s: {describe_ranks(sup.not_started, host_of)}"
                       f"; check the hosts and mpirun (--verbose), or raise --start-timeout")
        return 1
    if code == 0:
        return 0
    rank = first.get("rank")
    if rank is not None and rank in host_of:
        if "signal" in first:
            how = f"was killed by {signal_name(first['signal'])}"
        else:
            how = f"exited with code {first.get('code', code)}"
        output.message(f"rank {rank} (host {host_of[rank]}) {how} first; mpirun stopped the "
                       f"other ranks")
    else:
        output.message(f"mpirun exited with "
                       f"{f'code {code}' if code > 0 else signal_name(-code)}")
    return code if code > 0 else 128 - code
