"""Elastic mode's membership book: the workers, the generations, and the rounds they join
(docs/architecture.md, "Elastic mode"). No sockets here: rendezvous_server.py serves it,
elastic_driver.py feeds it.

Generations. The driver records every membership change (workers started, exited, stopped,
hosts removed) as a new generation, marked removed_only when it only took workers away
(Horovod's skip_sync). A worker that joined generation g has an update pending while a
generation after g exists.

Rounds. A worker joins after every (re)start of its library. A round forms when every live
worker (started, not exited, not being stopped) has joined and there are at least min_np of
them. The elastic timeout runs from the first join of a worker that was in a round before
(or any join when no worker of the latest round is left): when it passes, the round forms
with the workers that joined if they are at least min_np (the others are stopped:
notify("stop", ids)), else the job fails (notify("fail", message)). A brand-new worker alone waits as long as the running
round trains: the others join when they see the update at their next commit.

Rank order in a round: the workers of earlier rounds keep their relative order (so rank 0
holds committed state whenever a worker that held it survives), then new workers by
(host order, slot). Rank 0 is told to listen on a free port and publish it; the other
members' joins return once it did, with ZEN_CONTROLLER_ADDR. Rank 0 listens on the address
its join came from (its interface toward zenrun, which the other hosts reach too) unless
every member is on this machine (loopback) or that address is loopback (the host name).
"""

import ipaddress
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from zen.runner import hosts as hostlib

WAKE_SECONDS = 0.2  # how often a waiting join checks the timeouts


@dataclass
class _Worker:
    id: str
    host: str
    order: Tuple[int, int]  # (host order, slot): new workers' order in a round
    live: bool = True
    rank: Optional[int] = None  # in the last round it joined
    round_seq: int = 0  # that round (0: none)
    generation: int = 0  # that round's generation


@dataclass
class Join:
    """One waiting join request; reply is set once (a dict, see rendezvous_server.py)."""

    worker: str
    reply: Optional[dict] = None
    round: Optional["Round"] = None  # rank 0: the round it must publish its port for
    peer: Optional[str] = None  # the address the request came from (None: unknown)
    interface: Optional[str] = None  # the worker's address on ZEN_IFACE's interface, if set


@dataclass
class Round:
    seq: int
    generation: int
    members: List[str]  # worker ids in rank order
    placements: Dict[str, dict]
    bind: str  # where rank 0 listens
    advertise: str  # the host part of ZEN_CONTROLLER_ADDR
    formed_at: float
    joins: Dict[str, Join] = field(default_factory=dict)


def placements(members):
    """{id: placement} for workers (objects with .id and .host) in rank order, as Horovod
    counts local and cross ranks: local_rank is the index among the round's workers on the
    same host, cross_rank the index of the host among those with that local_rank."""
    by_host = {}
    for w in members:
        by_host.setdefault(w.host, []).append(w.id)
    local = {wid: i for ids in by_host.values() for i, wid in enumerate(ids)}
    cross_hosts = {}  # local_rank -> [hosts in order]
    for w in members:
        at = cross_hosts.setdefault(local[w.id], [])
        if w.host not in at:
            at.append(w.host)
    out = {}
    for rank, w in enumerate(members):
        hosts_here = cross_hosts[local[w.id]]
        out[w.id] = {"rank": rank, "size": len(members), "local_rank": local[w.id],
                     "local_size": len(by_host[w.host]),
                     "cross_rank": hosts_here.index(w.host), "cross_size": len(hosts_here)}
    return out


def controller_address(host_names, rank0_host, rank0_peer=None, rank0_interface=None):
    """(bind, advertise) for rank 0's listener: its address on ZEN_IFACE's interface when its
    join told it (--network-interface); else loopback when every member is on this machine;
    else the address rank 0's join came from (a host's name may not resolve, or not to the
    address the others reach: a network namespace shares the machine's name); else, for a
    join from loopback or of unknown origin, every interface and rank 0's host name."""
    if rank0_interface is not None:
        return rank0_interface, rank0_interface
    if all(hostlib.is_local(h) for h in host_names):
        return "127.0.0.1", "127.0.0.1"
    if rank0_peer is not None and not ipaddress.ip_address(rank0_peer).is_loopback:
        return rank0_peer, rank0_peer
    if hostlib.is_local(rank0_host):
        return "0.0.0.0", socket.gethostname()
    return "0.0.0.0", rank0_host


class Rounds:
    """Thread-safe: the driver's thread calls add_worker/retire/record/finish/fail, the
    server's threads join/publish/pending. notify(kind, data) reports what the driver must act
    on: ("stop", [ids]), ("fail", message), ("formed", Round); it is called with the lock held
    and must only queue the event."""

    def __init__(self, min_np, elastic_timeout, reset_limit=None, notify=None,
                 clock=time.monotonic):
        self.min_np = min_np
        self.elastic_timeout = elastic_timeout
        self.reset_limit = reset_limit
        self._notify = notify or (lambda kind, data: None)
        self._clock = clock
        self._cond = threading.Condition()
        self._workers: Dict[str, _Worker] = {}
        self._generation = 0
        self._changes: List[Tuple[int, bool]] = []  # (generation, removed_only)
        self._waiting: Dict[str, Join] = {}
        self._opened_at = None
        self._forming: Optional[Round] = None
        self._rounds = 0  # rounds formed
        self._finishing = None  # message for joins once the job is finishing
        self._failed = None  # the job's failure message

    # -- the driver's side -----------------------------------------------------------------
    def add_worker(self, worker_id, host, order):
        with self._cond:
            self._workers[worker_id] = _Worker(worker_id, host, tuple(order))

    def retire(self, worker_id, why="it is no longer part of the job"):
        """The worker is not live any more (exited, being stopped, its host removed); a join
        of it from now on is told to exit."""
        self.change([worker_id], None, why)

    def record(self, removed_only):
        """Records a membership change (workers added before); returns its generation."""
        return self.change([], removed_only)

    def change(self, retired, removed_only, why="it is no longer part of the job"):
        """Retires the workers `retired` and, unless removed_only is None, records the change
        as a generation, at once: a round must not form on the old generation in between (it
        would see the update at once and reset again). Returns the current generation."""
        with self._cond:
            for worker_id in retired:
                w = self._workers.get(worker_id)
                if w is None or not w.live:
                    continue
                w.live = False
                join = self._waiting.pop(worker_id, None)
                if join is not None:
                    join.reply = {"exit": f"worker {worker_id}: {why}"}
                if self._forming is not None and worker_id in self._forming.members:
                    self._cancel_forming()
            if removed_only is not None:
                self._generation += 1
                self._changes.append((self._generation, bool(removed_only)))
            self._try_form()
            self._cond.notify_all()
            return self._generation

    def finish(self, message):
        """The job is finishing (a worker exited 0): every join from now on exits."""
        with self._cond:
            if self._finishing is None:
                self._finishing = message
            self._end_all({"exit": message})

    def fail(self, message):
        with self._cond:
            if self._failed is None:
                self._failed = message
            self._end_all({"error": message})

    @property
    def rounds_formed(self):
        with self._cond:
            return self._rounds

    # -- the workers' side -----------------------------------------------------------------
    def join(self, worker_id, heartbeat=None, heartbeat_seconds=5.0, peer=None,
             interface=None):
        """Blocks until worker_id's next round forms (or the job ends); returns the Join, whose
        reply is the answer. heartbeat(): called about every heartbeat_seconds while waiting;
        an OSError from it (the worker went away) drops the join and is raised. peer: the
        address the request came from (rank 0 listens there); interface: the worker's address
        on ZEN_IFACE's interface, which rank 0 listens on instead."""
        with self._cond:
            immediate = self._refusal(worker_id)
            if immediate is not None:
                return Join(worker_id, immediate)
            w = self._workers[worker_id]
            old = self._waiting.pop(worker_id, None)
            if old is not None:
                old.reply = {"error": f"worker {worker_id} joined again"}
            join = Join(worker_id, peer=peer, interface=interface)
            self._waiting[worker_id] = join
            if self._opened_at is None and (w.round_seq > 0 or not self._round_running()):
                self._opened_at = self._clock()
            self._try_form()
            self._cond.notify_all()
        beat = time.monotonic()
        while True:
            with self._cond:
                if join.reply is None:
                    self._cond.wait(WAKE_SECONDS)
                    self._check_timeouts()
                if join.reply is not None:
                    return join
            if heartbeat is not None and time.monotonic() - beat >= heartbeat_seconds:
                beat = time.monotonic()
                try:
                    heartbeat()
                except OSError:
                    with self._cond:
                        if self._waiting.get(worker_id) is join:
                            del self._waiting[worker_id]
                    raise

    def publish(self, round_, port):
        """Rank 0 of round_ listens on port: the round is complete. Returns rank 0's reply."""
        with self._cond:
            if self._forming is not round_:
                return self._failed and {"error": self._failed} or \
                    self._finishing and {"exit": self._finishing} or \
                    {"error": f"round {round_.seq} was cancelled (a member left)"}
            controller = f"{round_.advertise}:{int(port)}"
            for wid in round_.members:
                w = self._workers[wid]
                w.rank = round_.placements[wid]["rank"]
                w.round_seq = round_.seq
                w.generation = round_.generation
                round_.joins[wid].reply = self._placement_reply(round_, wid, controller)
            self._forming = None
            self._notify("formed", round_)
            self._try_form()
            self._cond.notify_all()
            return round_.joins[round_.members[0]].reply

    def abandon(self, round_, why):
        """Rank 0 of round_ did not publish (it went away, or said something else)."""
        with self._cond:
            if self._forming is round_:
                self._cancel_forming()
                self._try_form()
                self._cond.notify_all()

    def pending(self, worker_id):
        """(reply) {"pending": None or {"generation", "removed_only"}} for worker_id."""
        with self._cond:
            if self._failed is not None:
                return {"error": self._failed}
            w = self._workers.get(worker_id)
            if w is None:
                return {"error": f"unknown worker '{worker_id}'"}
            later = [c for c in self._changes if c[0] > w.generation]
            if not later:
                return {"ok": True, "pending": None}
            return {"ok": True, "pending": {"generation": later[-1][0],
                                            "removed_only": all(c[1] for c in later)}}

    # -- inside, with the lock held --------------------------------------------------------
    def _refusal(self, worker_id):
        if self._failed is not None:
            return {"error": self._failed}
        w = self._workers.get(worker_id)
        if w is None:
            return {"error": f"unknown worker '{worker_id}'"}
        if self._finishing is not None:
            return {"exit": self._finishing}
        if not w.live:
            return {"exit": f"worker {worker_id} is no longer part of the job"}
        return None

    def _round_running(self):
        """Whether a live worker of the latest round has not joined: that round may still be
        training, and a new worker's join must not start the elastic timeout."""
        return any(w.live and w.round_seq == self._rounds > 0 and w.id not in self._waiting
                   for w in self._workers.values())

    def _end_all(self, reply):
        for join in self._waiting.values():
            join.reply = dict(reply)
        self._waiting.clear()
        if self._forming is not None:
            for join in self._forming.joins.values():
                if join.reply is None or "publish" in join.reply:
                    join.reply = dict(reply)
            self._forming = None
        self._cond.notify_all()

    def _try_form(self):
        if self._forming is not None or self._failed or self._finishing or not self._waiting:
            return
        live = [w for w in self._workers.values() if w.live]
        if not live or len(live) < self.min_np or any(w.id not in self._waiting for w in live):
            return
        self._form(live)

    def _check_timeouts(self):
        if self._failed or self._finishing:
            return
        now = self._clock()
        if self._forming is not None:
            if now - self._forming.formed_at > self.elastic_timeout:
                rank0 = self._forming.members[0]
                self._fail_job(f"rank 0 (worker {rank0}) of round {self._forming.seq} did not "
                               f"publish its port within --elastic-timeout "
                               f"{self.elastic_timeout:g} s")
            return
        if not self._waiting:
            return
        if self._opened_at is None:
            if not self._round_running():  # the last round's workers are gone
                self._opened_at = now
            return
        if now - self._opened_at <= self.elastic_timeout:
            return
        live = [w for w in self._workers.values() if w.live]
        joined = [w for w in live if w.id in self._waiting]
        if joined and len(joined) >= self.min_np:
            laggards = [w.id for w in live if w.id not in self._waiting]
            for wid in laggards:
                self._workers[wid].live = False
            self._notify("stop", laggards)
            self._form(joined)
        else:
            self._fail_job(f"{len(joined)} worker{'s' if len(joined) != 1 else ''} joined "
                           f"within --elastic-timeout {self.elastic_timeout:g} s, fewer than "
                           f"--min-np {self.min_np}")

    def _fail_job(self, message):
        self._failed = message
        self._notify("fail", message)
        self._end_all({"error": message})

    def _form(self, members):
        if self.reset_limit is not None and self._rounds > self.reset_limit:
            self._fail_job(f"the workers changed {self._rounds} times, more than --reset-limit "
                           f"{self.reset_limit}")
            return
        members = sorted(members, key=lambda w: (0, -w.round_seq, w.rank) if w.round_seq
                         else (1, 0, 0) + w.order)
        self._rounds += 1
        first = self._waiting[members[0].id]
        bind, advertise = controller_address([w.host for w in members], members[0].host,
                                             first.peer, first.interface)
        round_ = Round(self._rounds, self._generation, [w.id for w in members],
                       placements(members), bind, advertise, self._clock())
        for w in members:
            round_.joins[w.id] = self._waiting.pop(w.id)
        self._opened_at = self._clock() if self._waiting else None
        self._forming = round_
        first = round_.joins[round_.members[0]]
        first.round = round_
        first.reply = {"ok": True, "publish": {"bind": bind}, "generation": round_.generation}
        self._cond.notify_all()

    def _cancel_forming(self):
        """The forming round lost a member before rank 0 published: the others wait again."""
        round_ = self._forming
        self._forming = None
        self._rounds -= 1
        for wid, join in round_.joins.items():
            if wid == round_.members[0]:
                join.reply = {"error": f"round {round_.seq} was cancelled (a member left)"}
            elif not self._workers[wid].live:
                join.reply = {"exit": f"worker {wid} is no longer part of the job"}
            else:
                self._waiting[wid] = join
        if self._waiting and self._opened_at is None:
            self._opened_at = self._clock()

    def _placement_reply(self, round_, wid, controller):
        return {"ok": True, "placement": round_.placements[wid], "generation": round_.generation,
                "controller": controller}
