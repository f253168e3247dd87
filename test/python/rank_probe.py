"""What a rank runs in test_zenrun.py: reports its environment and plays a part.

    rank_probe.py [--pid-dir D] [--fail RANK:CODE] [--delay S]
                  [--others exit|sleep|ignore-term] [--rendezvous [--steal-port]]

Prints one stdout line `ENV {...}` (its ZEN_*/HOROVOD_*/OMPI_COMM_WORLD_* variables, pid and
network namespace) and one stderr line `hello from rank R`; writes D/rank.R with its pid; then the
rank named by --fail exits with CODE after --delay seconds (with --pid-dir, counted once every
rank wrote its pid), and the others exit 0, sleep, or sleep ignoring SIGTERM. --rendezvous:
rank 0 listens on ZEN_CONTROLLER_ADDR's port and every other rank connects and sends
ZEN_SECRET (a real cross-host connection check); rank 0 listens on ZEN_CONTROLLER_FD when
zenrun passed one, as the library does. --steal-port (with --pid-dir D): rank 1 first tries
to take that port itself (prints STEAL taken, and holds it, or STEAL refused) and then writes
D/stolen; rank 0 listens only once that file exists: another process grabbing the port zenrun
chose before rank 0 has it, whatever the schedule.
"""

import argparse
import json
import os
import signal
import socket
import sys
import time


def from_env(what):
    for name in ("ZEN_" + what, "OMPI_COMM_WORLD_" + what):
        if name in os.environ:
            return int(os.environ[name])
    raise SystemExit(f"rank_probe: neither ZEN_{what} nor OMPI_COMM_WORLD_{what} is set")


def wait_until(done, what, within=30.0):
    """Polls done() until it holds; exits saying `what` did not happen after `within` s."""
    deadline = time.monotonic() + within
    while not done():
        if time.monotonic() > deadline:
            raise SystemExit(f"rank_probe: {what} within {within} s")
        time.sleep(0.02)


def write_file(path, text):
    """Written whole or not at all, for a rank polling for it."""
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.rename(path + ".tmp", path)


def wait_for_pids(folder, size):
    """Until every rank has written its pid file, i.e. runs with its signals set: a rank
    failing earlier would have zenrun stop ranks still starting (a delay alone would not do
    on a loaded machine)."""
    wait_until(lambda: len([f for f in os.listdir(folder) if f.startswith("rank.")
                            and not f.endswith(".tmp")]) >= size,
               "not every rank wrote its pid")


_HELD = []  # a port taken by --steal-port stays taken until the process exits


def steal(host, port):
    """Binds and listens on the port; the socket (kept open by the caller), else None."""
    thief = socket.socket()
    thief.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        thief.bind((host, port))
        thief.listen(1)
    except OSError:
        thief.close()
        print("STEAL refused", flush=True)
        return None
    print("STEAL taken", flush=True)
    return thief


def rendezvous(rank, size, steal_dir=None):
    """steal_dir: --steal-port's --pid-dir (None: no stealing)."""
    host, _, port = os.environ["ZEN_CONTROLLER_ADDR"].rpartition(":")
    secret = os.environ["ZEN_SECRET"]
    deadline = time.monotonic() + 15
    if rank == 0:
        if steal_dir:
            stolen = os.path.join(steal_dir, "stolen")
            wait_until(lambda: os.path.exists(stolen), "rank 1 did not try to steal the port")
        if "ZEN_CONTROLLER_FD" in os.environ:
            srv = socket.socket(fileno=int(os.environ["ZEN_CONTROLLER_FD"]))
        else:
            srv = socket.socket()
            srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            srv.bind((host, int(port)))
            srv.listen(size)
        srv.settimeout(15)
        peers = []
        while len(peers) < size - 1:
            conn, _ = srv.accept()
            with conn:
                conn.settimeout(5)
                words = conn.makefile().readline().split()
                if len(words) != 2 or words[1] != secret:
                    raise SystemExit(f"rank_probe: bad hello {words}")
                peers.append(int(words[0]))
        print(f"RENDEZVOUS ok peers={sorted(peers)}", flush=True)
        return
    if steal_dir and rank == 1:
        _HELD.append(steal(host, int(port)))
        write_file(os.path.join(steal_dir, "stolen"), "")
    while True:
        try:
            with socket.create_connection((host, int(port)), timeout=2) as c:
                c.sendall(f"{rank} {secret}\n".encode())
            print("RENDEZVOUS connected", flush=True)
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--pid-dir")
    p.add_argument("--fail")
    p.add_argument("--delay", type=float, default=0.0)
    p.add_argument("--others", choices=("exit", "sleep", "ignore-term"), default="exit")
    p.add_argument("--rendezvous", action="store_true")
    p.add_argument("--steal-port", action="store_true")
    a = p.parse_args()
    rank = from_env("RANK")
    fail_rank, code = (int(x) for x in a.fail.split(":")) if a.fail else (None, None)
    if a.others == "ignore-term" and rank != fail_rank:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # before the pid file says it runs
    env = {k: v for k, v in os.environ.items()
           if k.startswith(("ZEN_", "ZENRUN_", "HOROVOD_", "OMPI_COMM_WORLD_"))}
    try:
        netns = os.readlink("/proc/self/ns/net")
    except OSError:
        netns = ""
    print("ENV " + json.dumps({"env": env, "pid": os.getpid(), "netns": netns}), flush=True)
    print(f"hello from rank {rank}", file=sys.stderr, flush=True)
    if a.steal_port and not a.pid_dir:
        raise SystemExit("rank_probe: --steal-port needs --pid-dir")
    if a.pid_dir:
        write_file(os.path.join(a.pid_dir, f"rank.{rank}"), str(os.getpid()))
    if a.rendezvous:
        rendezvous(rank, int(os.environ["ZEN_SIZE"]), a.pid_dir if a.steal_port else None)
    if rank == fail_rank:
        if a.pid_dir:
            wait_for_pids(a.pid_dir, from_env("SIZE"))
        time.sleep(a.delay)
        print(f"rank {rank} failing with {code}", file=sys.stderr, flush=True)
        sys.exit(code)
    if a.others in ("sleep", "ignore-term"):
        time.sleep(120)


if __name__ == "__main__":
    main()
