"""--tcp: zenrun starts every rank itself, local ranks directly and remote ranks through
the launch command, and supervises them.

Each rank runs as `python3 rank_wrapper.py --watch-stdin ... -- CMD` (see rank_wrapper.py):
the wrapper reports the start on stdout, runs CMD in its own process group, and stops it
when zenrun signals it or when its stdin (a pipe from zenrun, carried by ssh for remote
ranks) reaches end-of-file, so ranks do not outlive a zenrun that was killed. zenrun stops
remote ranks that way too (Supervisor.signal_member): ssh forwards no signals.

A remote rank's command line is `<launch command with {host}> '<shell line>'` where the
shell line is `cd <cwd> 2>/dev/null; exec python3 <wrapper> ... -- CMD`; its environment
goes through stdin as one JSON line, so ZEN_SECRET is never on a command line.
"""

import json
import os
import re
import secrets
import shlex
import signal
import socket
import subprocess
import sys

from zen.common import horovod_env
from zen.common.controller_socket import controller_listener
from zen.runner import hosts as hostlib
from zen.runner import interfaces
from zen.runner.output import is_ready_line, killed_signal
from zen.runner.rank_wrapper import WRAPPER
from zen.runner.supervisor import Supervisor, describe_ranks, signal_name

# Not forwarded to remote hosts: describe this machine or this shell, not the job.
_LOCAL_ONLY = re.compile(r"^(HOSTNAME|PWD|OLDPWD|SHLVL|_|DISPLAY|XAUTHORITY|TERM|TERMCAP|"
                         r"MAIL|LS_COLORS|SSH_.*|BASH_FUNC_.*|XDG_.*|DBUS_.*)$")


def interface_address(args, host, iface, output):
    """host's IPv4 address on interface iface: looked up here for this machine, else asked of
    host through the launch command (interfaces.py as a script, bounded by --start-timeout or
    30 s). None, after saying why, when it cannot be learnt: the ranks then report a missing
    interface themselves (the library checks ZEN_IFACE at init)."""
    if hostlib.is_local(host):
        try:
            return interfaces.ipv4_address(iface)
        except interfaces.InterfaceError as e:
            output.message(f"--network-interface: {e}")
            return None
    remote_python = os.environ.get("ZENRUN_REMOTE_PYTHON", "python3")
    line = " ".join(shlex.quote(w) for w in (remote_python, interfaces.__file__, iface))
    try:
        done = subprocess.run(_launch_argv(args.launch_words, host, line), capture_output=True,
                              text=True, stdin=subprocess.DEVNULL,
                              timeout=args.start_timeout or 30.0)
    except (OSError, subprocess.TimeoutExpired) as e:
        output.message(f"--network-interface: cannot ask {host} for its address on {iface}: {e}")
        return None
    address = done.stdout.strip()
    if done.returncode != 0 or not _is_ipv4(address):
        output.message(f"--network-interface: {host}: "
                       f"{done.stderr.strip() or 'no address on ' + iface}")
        return None
    return address


def _is_ipv4(text):
    try:
        socket.inet_aton(text)
    except OSError:
        return False
    return text.count(".") == 3


def controller_addr(args, slots, iface=None, output=None):
    """ZEN_CONTROLLER_ADDR, where rank 0 (on the first host) listens, and the socket listening
    there when zenrun chose the port itself (rank 0 is local), else None. With iface (ZEN_IFACE's
    first) and no --controller-addr host: the first host's address on that interface when it
    can be learnt, so the control channel runs there too."""
    first = slots[0].host
    all_local = all(hostlib.is_local(s.host) for s in slots)
    host, port = None, None
    if args.controller_addr:
        host, sep, port_text = args.controller_addr.rpartition(":")
        if not sep:
            host, port_text = port_text, ""
        port = int(port_text) if port_text else None
    on_iface = host is None and iface is not None
    if on_iface:
        host = interface_address(args, first, iface, output)
        on_iface = host is not None
    if host is None:
        if all_local:
            host = "127.0.0.1"
        elif hostlib.is_local(first):
            host = socket.gethostname() if first in ("localhost", "::1") or \
                first.startswith("127.") else first
        else:
            host = first
    listener = None
    if port is None:
        if hostlib.is_local(first):
            listener = controller_listener(host if on_iface else
                                           "127.0.0.1" if all_local else "0.0.0.0")
            port = listener.getsockname()[1]
        else:
            port = 20000 + secrets.randbelow(40000)  # cannot probe a remote host's ports
    return f"{host}:{port}", listener


def _rank_env(base, slot, controller, secret):
    env = dict(base)
    env.update({
        "ZEN_RANK": str(slot.rank),
        "ZEN_SIZE": str(slot.size),
        "ZEN_LOCAL_RANK": str(slot.local_rank),
        "ZEN_LOCAL_SIZE": str(slot.local_size),
        "ZEN_CROSS_RANK": str(slot.cross_rank),
        "ZEN_CROSS_SIZE": str(slot.cross_size),
        "ZEN_CONTROLLER_ADDR": controller,
        "ZEN_SECRET": secret,
    })
    return env


def _launch_argv(words, host, shell_line):
    return [w.replace("{host}", host) for w in words] + [shell_line]


def start_command(args, host, flags, env, base_env):
    """(argv, stdin_data, launch_env) that start the wrapper with `flags` and the command on
    host with environment env: directly when host is this machine, else through the launch
    command with env on stdin (also used by elastic_driver.py)."""
    if hostlib.is_local(host):
        return [sys.executable, WRAPPER] + flags + ["--"] + args.command, b"", env
    remote_python = os.environ.get("ZENRUN_REMOTE_PYTHON", "python3")
    line = (f"cd {shlex.quote(os.getcwd())} 2>/dev/null; exec {shlex.quote(remote_python)} "
            f"{shlex.quote(WRAPPER)} "
            + " ".join(shlex.quote(f) for f in flags + ["--env-stdin", "--"])
            + " " + " ".join(shlex.quote(c) for c in args.command))
    forwarded = {k: v for k, v in env.items() if not _LOCAL_ONLY.match(k)}
    return (_launch_argv(args.launch_words, host, line),
            (json.dumps(forwarded) + "\n").encode(), base_env)


def make_pump(sup, output, token):
    """pump(member, stream, pipe) for Supervisor.spawn: prefixes the member's lines with its
    first rank and turns the wrapper's start report into sup.mark_ready, a remote wrapper's
    report of a death by signal into member.killed_by."""

    def pump(member, stream, pipe):
        rank = member.ranks[0]
        expect_report = stream == "stdout"
        for line in iter(pipe.readline, b""):
            if expect_report:
                ok, _ = is_ready_line(line, token)
                if ok:
                    expect_report = False
                    sup.mark_ready(rank)
                    continue
            elif member.remote and stream == "stdout":
                found = killed_signal(line, token)
                if found is not None:
                    line, member.killed_by = found
                    if not line:
                        continue
            output.rank_line(rank, stream, line)

    return pump


def wrapper_flags(args, token):
    """The rank wrapper's flags every TCP-mode rank gets."""
    return ["--token", token, "--watch-stdin", "--grace", repr(args.grace_seconds)]


def run(args, slots, base_env, output):
    """Launches and supervises the ranks; returns zenrun's exit code."""
    token = secrets.token_hex(8)
    secret = secrets.token_hex(16)
    iface = horovod_env.lookup(base_env, "ZEN_IFACE")[0]  # or HOROVOD_GLOO_IFACE
    controller, listener = controller_addr(args, slots, iface.split(",")[0] if iface else None,
                                           output)
    host_of = {s.rank: s.host for s in slots}
    remote = [s for s in slots if not hostlib.is_local(s.host)]
    sup = Supervisor(output, host_of, args.start_timeout, args.grace_seconds,
                     extra_grace=1.0 if not remote else 2.0)

    pump = make_pump(sup, output, token)
    if args.verbose:
        output.message(f"tcp mode, {len(slots)} ranks, ZEN_CONTROLLER_ADDR={controller}")
        for s in slots:
            output.message(f"  rank {s.rank}: host {s.host} local {s.local_rank}/"
                           f"{s.local_size} cross {s.cross_rank}/{s.cross_size}"
                           f"{'' if hostlib.is_local(s.host) else ' (remote)'}")
    sup.install_signal_handlers()
    try:
        for s in slots:
            env = _rank_env(base_env, s, controller, secret)
            flags = ["--rank", str(s.rank)] + wrapper_flags(args, token)
            pass_fds = ()
            if listener is not None and s.rank == 0:  # local: the listener is on its host
                env["ZEN_CONTROLLER_FD"] = str(listener.fileno())
                flags += ["--pass-fd", str(listener.fileno())]
                pass_fds = (listener.fileno(),)
            argv, stdin_data, launch_env = start_command(args, s.host, flags, env, base_env)
            if args.verbose:
                output.message(f"rank {s.rank}: {shlex.join(argv)}")
            try:
                sup.spawn(argv, launch_env, [s.rank], s.host, pump, stdin_data=stdin_data,
                          pass_fds=pass_fds, remote=not hostlib.is_local(s.host))
            except OSError as e:
                output.message(f"cannot start rank {s.rank} on host {s.host}: {e}")
                sup.begin_stop(signal.SIGTERM)
                sup.run()
                return 1
            finally:
                if pass_fds:  # rank 0 holds the port now (or never will)
                    listener.close()
                    listener = None
        sup.run()
    finally:
        if listener is not None:
            listener.close()
        sup.restore_signal_handlers()
        output.close_logs()
    return _summarize(sup, output, args)


def _summarize(sup, output, args):
    if sup.received_signal is not None:
        output.stopped_by(sup.received_signal,
                          f"received {signal_name(sup.received_signal)}; stopped "
                          f"{sup.stopped_count} rank{'s' if sup.stopped_count != 1 else ''}")
        return 128 + sup.received_signal
    if sup.not_started:
        n = len(sup.not_started)
        output.message(f"{n} of {len(sup.host_of)} ranks did not start within "
                       f"{args.start_timeout:g} s: {describe_ranks(sup.not_started, sup.host_of)}"
                       f"; check the hosts and the launch command (--verbose), or raise "
                       f"--start-timeout")
        return 1
    if sup.failure is not None:
        m = sup.failure
        rank = m.ranks[0]
        code = m.code
        how = (f"exited with code {code}" if code > 0
               else f"was killed by {signal_name(-code)}")
        before = "" if rank in sup.ready else " (before it started: did the launch fail?)"
        others = sup.stopped_count
        output.message(f"rank {rank} (host {m.host}) {how} first{before}; stopped {others} "
                       f"other rank{'s' if others != 1 else ''}")
        return code if code > 0 else 128 - code
    never = [m.ranks[0] for m in sup.members if m.ranks[0] not in sup.ready]
    if never:
        output.message(f"the launch command exited without starting "
                       f"{describe_ranks(never, sup.host_of)}")
        return 1
    if args.verbose:
        output.message(f"all {len(sup.members)} ranks exited with code 0")
    return 0
