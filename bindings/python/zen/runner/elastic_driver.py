"""Elastic mode (zenrun --min-np/--max-np/--host-discovery-script): starts workers on the
hosts' free slots, serves the rendezvous they join (rendezvous_server.py over an
elastic_rounds.Rounds book), and turns exits and host changes into generations
(docs/architecture.md, "Elastic mode").

Workers start through the same rank wrapper and launch command as fixed-size TCP jobs
(tcp_run.start_command), with ZEN_ELASTIC_RENDEZVOUS, ZEN_ELASTIC_WORKER and ZEN_SECRET
instead of a rank; their output lines carry the worker's number (its order of start), since
its rank changes from round to round.

A worker exiting 0 starts the job's end: no new workers, later joins are told to exit 0.
A worker failing (non-zero, killed, or not started within --start-timeout) has its host
blacklisted (no new worker starts there; --no-blacklist-on-failure turns it off) and is
replaced on a free slot while fewer than --max-np run; the survivors' collectives fail and
they join the next round. Fewer than --min-np possible workers fails the job: at once with
fixed hosts, after --elastic-timeout with a discovery script (hosts may still come).
"""

import secrets
import signal
import time

from zen.common import horovod_env
from zen.runner import discovery
from zen.runner import hosts as hostlib
from zen.runner import interfaces
from zen.runner.elastic_rounds import Rounds
from zen.runner.rendezvous_server import RendezvousServer, advertised_host
from zen.runner.supervisor import Supervisor, signal_name
from zen.runner.tcp_run import make_pump, start_command, wrapper_flags

# Worker states besides running normally: stopped by the driver (a laggard), its host or slot
# removed (stopped at the next round unless it exits by itself), not started in time.
LIVE, STOPPING, LEAVING, NO_START = "live", "stopping", "leaving", "no-start"


class _Worker:
    def __init__(self, wid, index, host, slot):
        self.id = wid
        self.index = index
        self.host = host
        self.slot = slot
        self.state = LIVE


def _how(code):
    return f"exited with code {code}" if code > 0 else f"was killed by {signal_name(-code)}"


class ElasticDriver(Supervisor):
    def __init__(self, args, base_env, output):
        super().__init__(output, {}, args.start_timeout, args.grace_seconds)
        self.args = args
        self.base_env = base_env
        self.iface_addr = None  # this machine's address on --network-interface (start())
        self.secret = secrets.token_hex(16)
        self.token = secrets.token_hex(8)
        self.pump = make_pump(self, output, self.token)
        self.rounds = Rounds(args.min_np, args.elastic_timeout, args.reset_limit,
                             notify=lambda kind, data: self.events.put(("elastic", kind, data)))
        self.server = None
        self.poller = None
        self.hosts = []
        self.host_order = {}
        self.blacklist = set()
        self.workers = {}  # Member -> _Worker
        self.started = 0
        self.finishing = False
        self.job_failure = None
        self.last_round = None
        self.bad_exit = None  # (worker, code) of the first failure once finishing
        self.short_since = None  # since when fewer than --min-np workers are possible

    # -- starting ------------------------------------------------------------------------
    def start(self, hosts):
        remote = (self.args.host_discovery_script or self.args.rendezvous_addr
                  or any(not hostlib.is_local(h.name) for h in hosts))
        self.iface_addr = self._interface_address()
        self.server = RendezvousServer(self.rounds, self.secret,
                                       self.iface_addr or ("0.0.0.0" if remote else "127.0.0.1"))
        self._set_hosts(hosts)
        started = 0
        for host, slot in self._free_slots():
            if started == self.args.num_proc:
                break
            started += self._spawn(host, slot)
        self.rounds.record(removed_only=False)
        if self.args.host_discovery_script:
            self.poller = discovery.Poller(
                self.args.host_discovery_script, self.args.slots_per_host,
                lambda h: self.events.put(("hosts", h)),
                lambda m: self.events.put(("message", m)), last=list(hosts))
            self.poller.start()
        self._check_possible(time.monotonic())

    def _interface_address(self):
        """This machine's address on --network-interface's first interface when that is here
        and no --rendezvous-addr is given: the rendezvous listens there and every worker dials
        it, so the joins (and rank 0's listener, at the join's address) use that network."""
        names = horovod_env.lookup(self.base_env, "ZEN_IFACE")[0]  # or HOROVOD_GLOO_IFACE
        if self.args.rendezvous_addr or not names:
            return None
        try:
            return interfaces.ipv4_address(names.split(",")[0])
        except interfaces.InterfaceError as e:
            self.output.message(f"--network-interface: {e}; the rendezvous listens as without "
                                f"it (the workers report it for their hosts)")
            return None

    def close(self):
        if self.poller is not None:
            self.poller.stop()
        self.rounds.fail("zenrun is ending")
        if self.server is not None:
            self.server.close()

    def _set_hosts(self, hosts):
        self.hosts = list(hosts)
        for h in hosts:
            self.host_order.setdefault(h.name, len(self.host_order))

    def _live(self):
        return [w for w in self.workers.values() if w.state == LIVE]

    def _free_slots(self):
        used = {(w.host, w.slot) for w in self._live()}
        for h in self.hosts:
            if h.name in self.blacklist:
                continue
            for slot in range(h.slots):
                if (h.name, slot) not in used:
                    yield h.name, slot

    def _fill(self):
        """Starts workers on free slots up to --max-np; returns how many."""
        if self.finishing or self.stopping:
            return 0
        room = (self.args.max_np or 1 << 30) - len(self._live())
        n = 0
        for host, slot in list(self._free_slots()):
            if n >= room:
                break
            n += self._spawn(host, slot)
        return n

    def _spawn(self, host, slot):
        index = self.started
        self.started += 1
        wid = f"{host}/{slot}/{index}"
        env = dict(self.base_env)
        # Local workers dial --rendezvous-addr too: a local rank 0 then listens on that
        # address, which the remote workers reach, not on loopback.
        dial = (self.args.rendezvous_addr or self.iface_addr
                or advertised_host(host, hostlib.is_local))
        env.update({"ZEN_ELASTIC_RENDEZVOUS": self.server.address(dial),
                    "ZEN_ELASTIC_WORKER": wid, "ZEN_SECRET": self.secret})
        flags = ["--rank", str(index)] + wrapper_flags(self.args, self.token)
        argv, stdin_data, launch_env = start_command(self.args, host, flags, env, self.base_env)
        self.host_of[index] = host
        try:
            self.output.open_logs([index])
        except OSError as e:
            self.output.message(f"--output-filename: {e}")
        self.rounds.add_worker(wid, host, (self.host_order[host], slot))
        if self.args.verbose:
            self.output.message(f"worker {index} ({wid}): {' '.join(argv)}")
        try:
            member = self.spawn(argv, launch_env, [index], host, self.pump,
                                stdin_data=stdin_data, remote=not hostlib.is_local(host))
        except OSError as e:
            self.output.message(f"cannot start worker {index} on host {host}: {e}")
            self.rounds.retire(wid)
            self._blacklist(host, f"worker {index} could not start there")
            return 0
        self.workers[member] = _Worker(wid, index, host, slot)
        return 1

    def _blacklist(self, host, why):
        if self.args.blacklist and host not in self.blacklist:
            self.blacklist.add(host)
            self.output.message(f"host {host} blacklisted ({why}): no new worker starts there")

    def _check_possible(self, now):
        live = len(self._live())
        if live >= self.args.min_np:
            self.short_since = None
            return
        why = (f"only {live} worker{'s' if live != 1 else ''} can run, fewer than --min-np "
               f"{self.args.min_np} (hosts: {hostlib.format_hosts(self.hosts) or 'none'}"
               f"{'; blacklisted: ' + ','.join(sorted(self.blacklist)) if self.blacklist else ''}"
               f"{'; --max-np ' + str(self.args.max_np) if self.args.max_np else ''})")
        if not self.args.host_discovery_script:
            self._fail(why)
        elif self.short_since is None:
            self.short_since = now
            self.output.message(f"{why}; waiting up to --elastic-timeout "
                                f"{self.args.elastic_timeout:g} s for hosts")

    def _fail(self, message):
        if self.job_failure is None and not self.stopping:
            self.job_failure = message
            self.rounds.fail(message)
            self.begin_stop(signal.SIGTERM)

    # -- Supervisor's hooks ----------------------------------------------------------------
    def waiting_for_workers(self):
        return self.short_since is not None and not self.stopping

    def on_tick(self, now):
        if self.short_since is not None and now - self.short_since > self.args.elastic_timeout:
            self._fail(f"fewer than --min-np {self.args.min_np} workers could run for "
                       f"--elastic-timeout {self.args.elastic_timeout:g} s")

    def on_start_timeout(self, late):
        for m in late:
            w = self.workers[m]
            if w.state == LIVE:
                self.output.message(f"worker {w.index} (host {w.host}) did not start within "
                                    f"{self.start_timeout:g} s")
                w.state = NO_START
                self.rounds.retire(w.id, "it did not start in time")
                self.stop(m)

    def on_exit(self, member, code):
        w = self.workers[member]
        state, w.state = w.state, "exited"
        failed = not (self.stopping or state in (STOPPING, LEAVING) or
                      (code == 0 and state == LIVE) or self.finishing)
        if not failed:
            self.rounds.retire(w.id, "it exited")
        if self.stopping or state in (STOPPING, LEAVING):
            return
        if code == 0 and state == LIVE:
            if not self.finishing:
                self.finishing = True
                self.rounds.finish(f"the job is finishing (worker {w.index} exited 0)")
            return
        if self.finishing:
            if self.bad_exit is None and self.last_round and w.id in self.last_round.members:
                self.bad_exit = (w, code)
            return
        how = "did not start in time" if state == NO_START else _how(code)
        self.output.message(f"worker {w.index} ({w.id}) {how}; the others continue")
        self._blacklist(w.host, f"worker {w.index} failed there")
        added = self._fill()  # the replacements are in the next round: it waits for them
        self.rounds.change([w.id], removed_only=added == 0, why="it exited")
        self._check_possible(time.monotonic())

    def on_event(self, event):
        kind = event[0]
        if kind == "message":
            self.output.message(event[1])
        elif kind == "hosts":
            self._hosts_changed(event[1])
        elif kind == "elastic":
            self._rounds_event(event[1], event[2])

    def _rounds_event(self, kind, data):
        if kind == "fail":
            self._fail(data)
        elif kind == "stop":
            for m, w in self.workers.items():
                if w.id in data and w.state == LIVE:
                    self.output.message(f"stopping worker {w.index} ({w.id}): it did not join "
                                        f"within --elastic-timeout {self.args.elastic_timeout:g} s")
                    w.state = STOPPING
                    self.stop(m)
        elif kind == "formed":
            self.last_round = data
            index = {w.id: w.index for w in self.workers.values()}
            self.output.message(f"round {data.seq} (generation {data.generation}): "
                                f"{len(data.members)} worker{'s' if len(data.members) != 1 else ''}"
                                f", ranks 0..{len(data.members) - 1} = workers "
                                f"{','.join(str(index.get(i, i)) for i in data.members)}")
            for m, w in self.workers.items():
                if w.state == LEAVING and m.code is None:
                    self.stop(m)

    def _hosts_changed(self, hosts):
        if self.stopping:
            return
        self.output.message(f"hosts now {hostlib.format_hosts(hosts) or 'none'}")
        self._set_hosts(hosts)
        slots = {h.name: h.slots for h in hosts}
        removed = []
        for m, w in self.workers.items():
            if w.state == LIVE and w.slot >= slots.get(w.host, 0):
                w.state = LEAVING
                removed.append(w.id)
                if self.last_round is None or w.id not in self.last_round.members:
                    self.stop(m)  # in no round: nothing to leave cleanly
        added = self._fill()
        if removed or added:
            self.rounds.change(removed, removed_only=added == 0, why="its host was removed")
        self._check_possible(time.monotonic())

    # -- the end -------------------------------------------------------------------------
    def summary(self):
        """zenrun's exit code, after the messages."""
        if self.received_signal is not None:
            n = self.stopped_count
            self.output.stopped_by(self.received_signal,
                                   f"received {signal_name(self.received_signal)}; stopped "
                                   f"{n} worker{'s' if n != 1 else ''}")
            return 128 + self.received_signal
        if self.job_failure is not None:
            self.output.message(f"elastic job failed: {self.job_failure}")
            return 1
        if self.bad_exit is not None:
            w, code = self.bad_exit
            self.output.message(f"worker {w.index} ({w.id}) {_how(code)} while the job was "
                                f"finishing")
            return code if code > 0 else 128 - code
        if not self.finishing:
            self.output.message("no worker exited 0")
            return 1
        if self.args.verbose:
            self.output.message(f"the job finished after {self.rounds.rounds_formed} round"
                                f"{'s' if self.rounds.rounds_formed != 1 else ''}")
        return 0


def _initial_hosts(args, output):
    """The first host list offering -np slots: asked of the script every second, for up to
    --elastic-timeout. None when none came."""
    deadline = time.monotonic() + args.elastic_timeout
    last_error = None
    while True:
        try:
            hosts = discovery.run_script(args.host_discovery_script, args.slots_per_host)
            if sum(h.slots for h in hosts) >= args.num_proc:
                return hosts
            error = (f"the discovered hosts ({hostlib.format_hosts(hosts) or 'none'}) offer "
                     f"fewer than -np {args.num_proc} slots")
        except discovery.DiscoveryError as e:
            error = f"host discovery: {e}"
        if error != last_error:
            output.message(f"{error}; waiting")
            last_error = error
        if time.monotonic() > deadline:
            output.message(f"elastic job failed: {error} after --elastic-timeout "
                           f"{args.elastic_timeout:g} s")
            return None
        time.sleep(discovery.INTERVAL_SECONDS)


def run(args, hosts, base_env, output):
    """Runs an elastic job on fixed hosts (None: those of --host-discovery-script); returns
    zenrun's exit code."""
    if hosts is None:
        hosts = _initial_hosts(args, output)
        if hosts is None:
            return 1
    driver = ElasticDriver(args, base_env, output)
    driver.install_signal_handlers()
    try:
        driver.start(hosts)
        driver.run()
    finally:
        driver.close()
        driver.restore_signal_handlers()
        output.close_logs()
    return driver.summary()
