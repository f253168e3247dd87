"""Unit tests of zenrun's elastic rendezvous: elastic_rounds.Rounds served by
rendezvous_server.RendezvousServer on a real socket, asked by raw JSON-line clients in
threads (and once by zen.common.elastic_rendezvous in a subprocess); and the discovery
script's parsing, failures and polling (zen/runner/discovery.py).

Run: /usr/bin/python3 -m pytest -q test/python/test_elastic_rendezvous.py
(also CTest: python_elastic_rendezvous). Every wait is bounded.
"""

import os
import queue
import re
import socket
import subprocess
import sys
import threading
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
from rank_jobs import BINDINGS  # noqa: E402

sys.path.insert(0, BINDINGS)

from zen.common import json_lines  # noqa: E402
from zen.runner import discovery  # noqa: E402
from zen.runner.elastic_rounds import Rounds, controller_address, placements  # noqa: E402
from zen.runner.rendezvous_server import RendezvousServer  # noqa: E402

SECRET = "s3cret"
WAIT = 10.0  # bound of every wait in these tests


class Book:
    """A Rounds book, its server, and the notifications it made."""

    def __init__(self, min_np=1, timeout=30.0, reset_limit=None):
        self.events = queue.Queue()
        self.rounds = Rounds(min_np, timeout, reset_limit,
                             notify=lambda kind, data: self.events.put((kind, data)))
        self.server = RendezvousServer(self.rounds, SECRET)

    def add(self, wid, host="localhost", order=(0, 0)):
        self.rounds.add_worker(wid, host, order)

    def event(self, kind):
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            try:
                k, data = self.events.get(timeout=0.1)
            except queue.Empty:
                continue
            if k == kind:
                return data
        raise AssertionError(f"no {kind} event within {WAIT} s")

    def close(self):
        self.server.close()


@pytest.fixture
def book_factory():
    books = []

    def make(**kw):
        b = Book(**kw)
        books.append(b)
        return b

    yield make
    for b in books:
        b.close()


def request(port, op, worker, secret=SECRET, publish_port=None):
    """One request; returns the final reply (heartbeats skipped). A rank 0 publishes
    publish_port (or a fresh number) and returns the answer to that."""
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT) as s:
        s.settimeout(WAIT)
        f = s.makefile("rwb")
        json_lines.write(f, {"op": op, "secret": secret, "worker": worker, "generation": 0})
        while True:
            reply = json_lines.read(f)
            if reply is None or not reply.get("wait"):
                break
        if reply is not None and "publish" in reply:
            assert reply["publish"]["bind"] == "127.0.0.1"
            json_lines.write(f, {"op": "publish", "port": publish_port or 4242})
            reply = json_lines.read(f)
        return reply


def join_all(port, workers, **kw):
    """Joins each worker from its own thread; {worker: reply}."""
    out = {}
    threads = [threading.Thread(target=lambda w=w: out.__setitem__(w, request(port, "join", w,
                                                                              **kw)))
               for w in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT + 5)
    assert not any(t.is_alive() for t in threads), "a join did not return"
    return out


def ranks(replies):
    return {w: r["placement"]["rank"] for w, r in replies.items()}


def wait_until_waiting(b, worker):
    """Until worker's join, sent from a thread, is waiting in the book: a thread may reach the
    server any time later, so a sleep would not do. (The book has no public view of it.)"""
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        with b.rounds._cond:
            if worker in b.rounds._waiting:
                return
        time.sleep(0.01)
    raise AssertionError(f"{worker}'s join did not reach the book within {WAIT} s")


def test_round_forms_when_every_live_worker_joined(book_factory):
    b = book_factory(min_np=2)
    for i, order in enumerate([(0, 0), (0, 1), (1, 0)]):
        b.add(f"w{i}", host="localhost" if order[0] == 0 else "127.0.0.2", order=order)
    b.rounds.record(False)
    replies = join_all(b.server.port, ["w2", "w1", "w0"])
    assert ranks(replies) == {"w0": 0, "w1": 1, "w2": 2}  # host order, then slot
    for r in replies.values():
        assert r["ok"] and r["controller"] == "127.0.0.1:4242" and r["generation"] == 1
        assert r["placement"]["size"] == 3
    assert replies["w1"]["placement"]["local_rank"] == 1
    assert replies["w2"]["placement"]["cross_rank"] == 1
    assert b.event("formed").members == ["w0", "w1", "w2"]


def test_placements_count_local_and_cross_ranks_as_horovod():
    class W:
        def __init__(self, wid, host):
            self.id, self.host = wid, host

    p = placements([W("a", "h1"), W("b", "h2"), W("c", "h1"), W("d", "h2"), W("e", "h3")])
    assert [p[x]["local_rank"] for x in "abcde"] == [0, 0, 1, 1, 0]
    assert [p[x]["local_size"] for x in "abcde"] == [2, 2, 2, 2, 1]
    assert [p[x]["cross_rank"] for x in "abcde"] == [0, 1, 0, 1, 2]
    assert [p[x]["cross_size"] for x in "abcde"] == [3, 3, 2, 2, 3]


def test_rank0_listens_where_its_join_came_from():
    # All on this machine: loopback. A remote member: rank 0's address toward zenrun (a
    # namespace's interface; its host name would not resolve there), else for a join from
    # loopback or of unknown origin every interface and a name.
    assert controller_address(["localhost", "127.0.0.1"], "localhost", "127.0.0.1") == \
        ("127.0.0.1", "127.0.0.1")
    assert controller_address(["ns0", "ns1"], "ns1", "10.215.7.3") == ("10.215.7.3",
                                                                      "10.215.7.3")
    assert controller_address(["localhost", "ns1"], "localhost", "10.215.7.1") == \
        ("10.215.7.1", "10.215.7.1")
    assert controller_address(["ns0", "ns1"], "ns0", None) == ("0.0.0.0", "ns0")
    assert controller_address(["localhost", "ns1"], "localhost", "127.0.0.1") == \
        ("0.0.0.0", socket.gethostname())


def test_survivors_keep_their_order_before_new_workers(book_factory):
    b = book_factory(min_np=2)
    b.add("w0", order=(0, 0))
    b.add("w1", order=(0, 1))
    b.add("w2", order=(0, 2))
    b.rounds.record(False)
    join_all(b.server.port, ["w0", "w1", "w2"])
    b.rounds.retire("w0")  # rank 0 died; its replacement takes its slot
    b.add("w3", order=(0, 0))
    b.rounds.record(False)
    replies = join_all(b.server.port, ["w3", "w2", "w1"])
    assert ranks(replies) == {"w1": 0, "w2": 1, "w3": 2}
    assert all(r["generation"] == 2 for r in replies.values())


def test_wrong_secret_is_refused(book_factory):
    b = book_factory()
    b.add("w0")
    for op in ("join", "pending"):
        reply = request(b.server.port, op, "w0", secret="guess")
        assert "refused" in reply["error"], reply
    assert b.rounds.rounds_formed == 0


def test_unknown_worker_is_refused(book_factory):
    b = book_factory()
    assert "unknown worker 'x'" in request(b.server.port, "join", "x")["error"]


def test_elastic_timeout_forms_without_laggards_when_min_np_joined(book_factory):
    b = book_factory(min_np=2, timeout=0.5)
    for i in range(3):
        b.add(f"w{i}", order=(0, i))
    start = time.monotonic()
    replies = join_all(b.server.port, ["w0", "w2"])
    assert time.monotonic() - start < 5
    assert ranks(replies) == {"w0": 0, "w2": 1}
    assert b.event("stop") == ["w1"]
    assert "no longer part" in request(b.server.port, "join", "w1")["exit"]


def test_new_workers_alone_start_the_timeout_once_the_last_round_is_gone(book_factory):
    b = book_factory(min_np=1, timeout=0.5)
    b.add("w0")
    join_all(b.server.port, ["w0"])
    b.add("w1", order=(0, 1))  # while w0 trains, a new worker waits without a timeout
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("r", request(b.server.port, "join", "w1")))
    t.start()
    wait_until_waiting(b, "w1")
    time.sleep(1.0)  # twice the timeout: w1 still waits
    assert "r" not in out and b.events.get_nowait()[0] == "formed"
    b.add("w2", order=(0, 2))
    b.rounds.change(["w0"], removed_only=False)  # w0 died: the timeout runs from here
    t.join(WAIT)
    assert out["r"]["placement"]["size"] == 1, out
    assert b.event("stop") == ["w2"]


def test_elastic_timeout_fails_the_job_below_min_np(book_factory):
    b = book_factory(min_np=3, timeout=0.5)
    for i in range(3):
        b.add(f"w{i}", order=(0, i))
    replies = join_all(b.server.port, ["w0", "w1"])
    for r in replies.values():
        assert "2 workers joined within --elastic-timeout 0.5 s, fewer than --min-np 3" in \
            r["error"], r
    assert "fewer than --min-np 3" in b.event("fail")


def test_reset_limit(book_factory):
    b = book_factory(min_np=1, reset_limit=1)
    b.add("w0")
    b.add("w1", order=(0, 1))
    join_all(b.server.port, ["w0", "w1"])  # the first round: no reset
    b.rounds.retire("w1")
    b.rounds.record(True)
    assert ranks(join_all(b.server.port, ["w0"])) == {"w0": 0}  # reset 1
    reply = request(b.server.port, "join", "w0")  # reset 2 > 1
    assert "more than --reset-limit 1" in reply["error"], reply
    assert "reset-limit" in b.event("fail")


def test_pending_update_and_removed_only(book_factory):
    b = book_factory(min_np=1)
    b.add("w0")
    b.add("w1", order=(0, 1))
    b.rounds.record(False)
    join_all(b.server.port, ["w0", "w1"])
    assert request(b.server.port, "pending", "w0")["pending"] is None
    b.rounds.retire("w1")
    b.rounds.record(True)
    assert request(b.server.port, "pending", "w0")["pending"] == {"generation": 2,
                                                                  "removed_only": True}
    b.add("w2", order=(0, 2))
    b.rounds.record(False)
    assert request(b.server.port, "pending", "w0")["pending"] == {"generation": 3,
                                                                  "removed_only": False}
    join_all(b.server.port, ["w0", "w2"])
    assert request(b.server.port, "pending", "w0")["pending"] is None


def test_finishing_job_tells_joins_to_exit(book_factory):
    b = book_factory(min_np=2)
    b.add("w0")
    b.add("w1", order=(0, 1))
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("r", request(b.server.port, "join", "w0")))
    t.start()
    wait_until_waiting(b, "w0")  # a waiting join is told, not only a later one
    b.rounds.finish("the job is finishing")
    t.join(WAIT)
    assert out["r"] == {"exit": "the job is finishing"}
    assert request(b.server.port, "join", "w1") == {"exit": "the job is finishing"}


def test_rank0_leaving_before_publish_reforms_the_round(book_factory):
    b = book_factory(min_np=1)
    b.add("w0")
    b.add("w1", order=(0, 1))
    port = b.server.port
    # w0 becomes rank 0 and goes away without publishing.
    s = socket.create_connection(("127.0.0.1", port), timeout=WAIT)
    f = s.makefile("rwb")
    json_lines.write(f, {"op": "join", "secret": SECRET, "worker": "w0", "generation": 0})
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("r", request(port, "join", "w1")))
    t.start()
    reply = json_lines.read(f)
    while reply.get("wait"):
        reply = json_lines.read(f)
    assert "publish" in reply
    b.rounds.retire("w0")  # the driver saw it exit
    s.close()
    t.join(WAIT)
    assert out["r"]["placement"] == {"rank": 0, "size": 1, "local_rank": 0, "local_size": 1,
                                     "cross_rank": 0, "cross_size": 1}, out


def test_client_module_joins_and_publishes(book_factory, tmp_path):
    """zen.common.elastic_rendezvous in a subprocess: join sets the placement variables and
    ZEN_CONTROLLER_FD (a socket listening on ZEN_CONTROLLER_ADDR's port); pending_update."""
    b = book_factory(min_np=1)
    b.add("w0")
    b.rounds.record(False)
    code = (
        "import os, socket\n"
        "from zen.common import elastic_rendezvous as er\n"
        "assert er.enabled()\n"
        "er.join()\n"
        "s = socket.socket(fileno=int(os.environ['ZEN_CONTROLLER_FD']))\n"
        "port = int(os.environ['ZEN_CONTROLLER_ADDR'].rsplit(':', 1)[1])\n"
        "assert s.getsockname()[1] == port, (s.getsockname(), port)\n"
        "print(os.environ['ZEN_RANK'], os.environ['ZEN_SIZE'], er.pending_update())\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZEN_")}
    env.update(PYTHONPATH=os.path.join(ROOT, "bindings", "python"), ZEN_SECRET=SECRET,
               ZEN_ELASTIC_RENDEZVOUS=f"127.0.0.1:{b.server.port}", ZEN_ELASTIC_WORKER="w0")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["0", "1", "None"]
    # Told to exit: SystemExit(0) with the reason on stderr.
    b.rounds.finish("the job is finishing (worker 3 exited 0)")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0 and "the job is finishing" in r.stderr, r.stderr
    # A wrong secret: a RuntimeError naming the refusal.
    env["ZEN_SECRET"] = "wrong"
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 1 and "refused" in r.stderr, r.stderr


# -- --host-discovery-script (zen/runner/discovery.py) -----------------------------------------

def _script(tmp_path, body):
    script = tmp_path / "discover.sh"
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(0o755)
    return str(script)


def test_discovery_output_is_parsed_as_horovod_host_lines():
    hosts = discovery.parse_output("node1:2\nnode2\n# a comment\n\n 127.0.0.2:4 \n", 3, "s")
    assert [(h.name, h.slots) for h in hosts] == [("node1", 2), ("node2", 3), ("127.0.0.2", 4)]
    for text, message in [("node1:x\n", "slots of 'node1' must be a positive integer"),
                          ("node1\nnode1:2\n", "host 'node1' is listed twice"),
                          ("bad host\n", "bad host name 'bad host'")]:
        with pytest.raises(discovery.DiscoveryError, match=re.escape(message)):
            discovery.parse_output(text, 1, "s")


def test_discovery_script_failures_say_why(tmp_path):
    with pytest.raises(discovery.DiscoveryError, match="exited with code 3: no cluster"):
        discovery.run_script(_script(tmp_path, "echo no cluster >&2; exit 3\n"), 1)
    with pytest.raises(discovery.DiscoveryError, match="did not finish within 0.5 s"):
        discovery.run_script(_script(tmp_path, "sleep 5\n"), 1, timeout=0.5)


def test_discovery_poller_reports_changes_and_each_new_failure_once(tmp_path):
    hosts_file = tmp_path / "hosts"
    hosts_file.write_text("a:1\n")
    script = _script(tmp_path, f"cat {hosts_file} || exit 1\n")
    seen, errors = queue.Queue(), queue.Queue()
    poller = discovery.Poller(script, 1, seen.put, errors.put,
                              last=discovery.parse_output("a:1\n", 1, "s"))
    poller.start()
    try:
        time.sleep(2.5)
        assert seen.empty()  # the same list: no report
        hosts_file.write_text("a:1\nb:2\n")
        assert [(h.name, h.slots) for h in seen.get(timeout=WAIT)] == [("a", 1), ("b", 2)]
        hosts_file.unlink()  # the script fails from now on: reported once, list kept
        assert "keeping the last host list" in errors.get(timeout=WAIT)
        time.sleep(2.5)
        assert errors.empty() and seen.empty()
    finally:
        poller.stop()
