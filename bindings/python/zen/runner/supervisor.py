"""Runs the launched processes to the end: output pumps, start reports, the first failure,
signals, --start-timeout, and the bounded stop (SIGTERM, SIGKILL after the grace period).

A "member" is one process zenrun started: a rank's wrapper in TCP mode (one rank), or
mpirun in MPI mode (all ranks). elastic_driver.py subclasses it: its members come and go
(on_exit, on_event, on_tick, on_start_timeout are its hooks). Every member runs in its own
session, so signals reach its whole process group and never the terminal's; a remote one
(ssh) is stopped through its stdin instead (signal_member).
"""

import os
import queue
import signal
import subprocess
import threading
import time

from zen.runner.rank_wrapper import INTERRUPT

_TICK = 0.05
_READER_JOIN_SECONDS = 2.0


def signal_name(sig):
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


def describe_ranks(ranks, host_of, limit=16):
    items = [f"rank {r} (host {host_of[r]})" for r in ranks[:limit]]
    if len(ranks) > limit:
        items.append(f"and {len(ranks) - limit} more")
    return ", ".join(items)


class Member:
    def __init__(self, proc, ranks, host, signal_leader_only=False, remote=False):
        self.proc = proc
        self.ranks = ranks
        self.host = host
        self.remote = remote  # started through the launch command (ssh): see signal_member
        self.killed_by = None  # a remote rank's signal, as its wrapper reported it
        self.code = None  # exit status once reaped (negative: killed by that signal)
        self.exit_time = None
        self.start_time = time.monotonic()
        self.kill_at = None  # stop(): SIGKILL when still running then
        self.signal_leader_only = signal_leader_only  # mpirun: it forwards to its ranks
        self.stdin_lock = threading.Lock()

    def send(self, sig):
        try:
            if self.signal_leader_only and sig != signal.SIGKILL:
                os.kill(self.proc.pid, sig)
            else:
                os.killpg(self.proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def close_stdin(self):
        """Closes the member's stdin; False when that could not be done now."""
        return self._on_stdin(lambda stdin: stdin.close())

    def interrupt(self):
        """Writes INTERRUPT to a watching wrapper's stdin (its Ctrl-C); False when that could
        not be done now. The wrapper has read its environment line (the rank started), so
        the pipe is empty and one byte cannot block."""
        def write(stdin):
            stdin.write(INTERRUPT)
            stdin.flush()

        return self._on_stdin(write)

    def _on_stdin(self, action):
        # The feeder holds the lock only while the environment line is in flight; never
        # block the supervisor on it (SIGKILL of the group is the fallback anyway). A stdin
        # already closed, or whose reader is gone, counts as done: that member is stopping.
        if not self.stdin_lock.acquire(timeout=0.2):
            return False
        try:
            if self.proc.stdin is not None and not self.proc.stdin.closed:
                action(self.proc.stdin)
        except (OSError, ValueError):
            pass
        finally:
            self.stdin_lock.release()
        return True


class Supervisor:
    def __init__(self, output, host_of, start_timeout, grace, extra_grace=1.0):
        self.output = output
        self.host_of = host_of  # rank -> host
        self.start_timeout = start_timeout
        self.grace = grace
        self.extra_grace = extra_grace
        self.members = []
        self.readers = []
        self.events = queue.Queue()
        self.ready = set()
        self.pending_signals = []
        self.received_signal = None
        self.failure = None  # first member that exited non-zero
        self.not_started = None  # ranks that missed --start-timeout
        self.stopping = False
        self.stopped_count = 0
        self.kill_at = None
        self.killed = False
        self._old_handlers = {}

    # -- setup -------------------------------------------------------------------------
    def install_signal_handlers(self):
        def handler(sig, _frame):
            self.pending_signals.append(sig)  # list.append is atomic; the loop acts on it

        if threading.current_thread() is not threading.main_thread():
            return  # zen.run from another thread: Python lets only the main thread set them
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            self._old_handlers[sig] = signal.signal(sig, handler)

    def restore_signal_handlers(self):
        for sig, old in self._old_handlers.items():
            signal.signal(sig, old)

    def spawn(self, argv, env, ranks, host, pump, stdin_data=None, signal_leader_only=False,
              pass_fds=(), remote=False):
        """Starts one member; `pump(member, stream_name, pipe)` reads each of its pipes;
        pass_fds: descriptors it inherits; remote: a rank wrapper started through the launch
        command, stdin_data its environment. Raises OSError when it cannot be started."""
        proc = subprocess.Popen(
            argv, env=env, start_new_session=True, pass_fds=pass_fds,
            stdin=subprocess.PIPE if stdin_data is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        member = Member(proc, ranks, host, signal_leader_only, remote)
        self.members.append(member)
        readers = []
        for name, pipe in (("stdout", proc.stdout), ("stderr", proc.stderr)):
            t = threading.Thread(target=pump, args=(member, name, pipe), daemon=True)
            t.start()
            readers.append(t)
        self.readers += readers
        threading.Thread(target=self._wait, args=(member, readers if remote else ()),
                         daemon=True).start()
        if stdin_data is not None:
            threading.Thread(target=self._feed, args=(member, stdin_data), daemon=True).start()
        return member

    def _feed(self, member, data):
        # Written, then the pipe stays open: its end-of-file tells a watching wrapper that
        # zenrun is gone (or wants the rank stopped).
        with member.stdin_lock:
            try:
                if member.proc.stdin.closed:
                    return
                member.proc.stdin.write(data)
                member.proc.stdin.flush()
            except (OSError, ValueError):
                pass

    def _wait(self, member, readers):
        code = member.proc.wait()
        # A remote rank's last lines (and its wrapper's signal report) come before ssh exits:
        # read them first, so that they count and are printed before zenrun's verdict.
        deadline = time.monotonic() + _READER_JOIN_SECONDS
        for t in readers:
            t.join(max(0.0, deadline - time.monotonic()))
        if member.killed_by is not None and code > 0:
            code = -member.killed_by  # the wrapper exited 128 + it (rank_wrapper.py says why)
        self.events.put(("exit", member, code))

    def mark_ready(self, rank):
        self.events.put(("ready", rank))

    # -- stopping ----------------------------------------------------------------------
    def running(self):
        return [m for m in self.members if m.code is None]

    def signal_member(self, member, sig):
        """sig to a member. A remote one whose rank has started is stopped through its stdin
        instead: its wrapper takes INTERRUPT as SIGINT (Ctrl-C) and end-of-file as SIGTERM
        (any other sig), SIGKILL after the grace period either way, while ssh still carries
        the rank's last lines and exit status back, and zenrun waits for that (SIGKILL of ssh
        after the grace period is the fallback). A signal would end ssh at once (ssh forwards
        none): the rank's last lines lost, and zenrun done while the rank still runs. One not
        started yet gets the signal: its ssh may hang (a host that does not answer) and no
        rank runs yet, or one only just does, which then sees end-of-file when its sshd
        session ends."""
        if (member.remote and sig != signal.SIGKILL
                and all(r in self.ready for r in member.ranks)
                and (member.interrupt() if sig == signal.SIGINT else member.close_stdin())):
            return
        member.send(sig)

    def begin_stop(self, sig, exclude=None):
        if self.stopping:
            return
        self.stopping = True
        targets = [m for m in self.running() if m is not exclude]
        self.stopped_count = sum(len(m.ranks) for m in targets)
        for m in targets:
            self.signal_member(m, sig)
        self.kill_at = time.monotonic() + self.grace + self.extra_grace

    def stop(self, member, sig=signal.SIGTERM):
        """Stops one member: sig now, SIGKILL after the grace period."""
        if member.code is None and member.kill_at is None:
            self.signal_member(member, sig)
            member.kill_at = time.monotonic() + self.grace + self.extra_grace

    def kill_all(self):
        self.killed = True
        for m in self.members:
            # SIGKILL first: a wrapper that saw end-of-file first would send its rank SIGTERM.
            m.send(signal.SIGKILL)  # also reaps stragglers left in a finished rank's group
            m.close_stdin()

    # -- main loop ---------------------------------------------------------------------
    def run(self):
        """Runs until every member has exited. Returns nothing; see the attributes."""
        while True:
            try:
                event = self.events.get(timeout=_TICK)
            except queue.Empty:
                event = None
            while event is not None:
                self._handle(event)
                try:
                    event = self.events.get_nowait()
                except queue.Empty:
                    event = None
            while self.pending_signals:
                sig = self.pending_signals.pop(0)
                if self.received_signal is None and not self.stopping:
                    self.received_signal = sig
                    self.begin_stop(sig)
                elif not self.killed:
                    self.output.message(f"got {signal_name(sig)} again: killing the ranks now")
                    self.kill_all()
            now = time.monotonic()
            if not self.stopping and self.start_timeout > 0:
                late = [m for m in self.running() if now - m.start_time > self.start_timeout
                        and any(r not in self.ready for r in m.ranks)]
                if late:
                    self.on_start_timeout(late)
            for m in self.running():
                if m.kill_at is not None and now >= m.kill_at and not self.killed:
                    m.send(signal.SIGKILL)
                    m.kill_at = float("inf")  # once
            if self.stopping and not self.killed and now >= self.kill_at:
                self.kill_all()
            if not self.stopping:
                self.on_tick(now)
            if not self.running() and not self.waiting_for_workers():
                break
        deadline = time.monotonic() + _READER_JOIN_SECONDS
        for t in self.readers:
            t.join(max(0.0, deadline - time.monotonic()))
        # Start reports read after the exit event still count.
        while True:
            try:
                self._handle(self.events.get_nowait())
            except queue.Empty:
                break
        for m in self.members:
            m.close_stdin()

    def _handle(self, event):
        kind = event[0]
        if kind == "ready":
            self.ready.add(event[1])
        elif kind == "exit":
            member, code = event[1], event[2]
            member.code = code
            member.exit_time = time.monotonic()
            member.close_stdin()
            self.on_exit(member, code)
        else:
            self.on_event(event)

    # -- policy (the fixed-size job's; elastic_driver.py overrides) --------------------------
    def on_exit(self, member, code):
        """The first failure stops every other member."""
        if code != 0 and self.failure is None and not self.stopping:
            self.failure = member
            self.begin_stop(signal.SIGTERM, exclude=member)

    def on_start_timeout(self, late):
        """Members that have not reported their start in time: the job cannot start (all
        ranks not started yet are reported)."""
        self.not_started = sorted(r for m in self.running() for r in m.ranks
                                  if r not in self.ready)
        self.begin_stop(signal.SIGTERM)

    def on_event(self, event):
        """An event another thread queued (self.events.put((kind, ...)))."""

    def waiting_for_workers(self):
        """True to keep running with no member running (more may be started)."""
        return False

    def on_tick(self, now):
        """Called every loop turn (about every 50 ms) while not stopping."""
