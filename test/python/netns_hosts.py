"""Hosts that are network namespaces on this machine, for the multi-host launcher tests
(test_zenrun.py, test_elastic_netns.py). Needs root and iproute2; a test that cannot create
them skips, saying why (pytest -rs shows it; CTest reports python_elastic_netns as skipped).

bridged(tag, count): `count` namespaces, each with a veth whose other end is a port of a bridge
in the root namespace that holds 10.215.S.1/24 (zenrun's address for the workers); namespace i
has 10.215.S.(i+2). The names derive from tag (the test process's whole pid: unique among
the processes running) and S is the first subnet from tag on that this machine does not use,
chosen and assigned to the bridge under a lock (SUBNET_LOCK), so tests running in parallel
(ctest -j, another build directory's run) do not collide. Everything is deleted afterwards,
also on a failure.

two_networks(tag, count): `count` namespaces on two such bridges, a "mgmt" and a "data"
network (two free subnets): namespace i has interface MGMT_IFACE at mgmt's .(i+2) and
DATA_IFACE at data's .(i+2), the same names in every namespace as on real hosts, which
--network-interface needs; the root namespace holds .1 on both bridges.
"""

import contextlib
import fcntl
import subprocess
import time

import pytest


def ip(*args, check=True):
    return subprocess.run(["ip"] + list(args), capture_output=True, text=True, timeout=10,
                          check=check)


class Bridged:
    def __init__(self, names, root_addr, addrs):
        self.names = names  # the namespaces: the hosts' names for -H and discovery
        self.root_addr = root_addr  # zenrun's address on the bridge
        self.addrs = addrs  # {namespace: its address}


MGMT_IFACE = "zmgmt0"
DATA_IFACE = "zdata0"
# Held from choosing subnets until their bridges hold them, by every process using this file.
SUBNET_LOCK = "/tmp/zen-netns-subnets.lock"
LOCK_WAIT = 60  # seconds; a holder runs a few `ip` commands


@contextlib.contextmanager
def _subnet_lock():
    with open(SUBNET_LOCK, "a") as f:
        deadline = time.monotonic() + LOCK_WAIT
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{SUBNET_LOCK} held for over {LOCK_WAIT} s")
                time.sleep(0.05)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _free_subnets(tag, count=1):
    """count subnets 10.215.S. with S from tag on, skipping those this machine already has
    (another test run's bridge: its routes would take our packets). Call under _subnet_lock
    and assign them before releasing it (_add_bridges)."""
    used = ip("-o", "-4", "addr", "show", check=False).stdout
    found = []
    for k in range(250):
        subnet = f"10.215.{(tag + k) % 250}."
        if f" {subnet}" not in used:
            found.append(subnet)
            if len(found) == count:
                return found
    pytest.skip("too few free 10.215.S.0/24 subnets on this machine")


def _add_bridges(tag, bridges):
    """Creates the bridges, up, each holding .1 of a free subnet; their subnets."""
    with _subnet_lock():
        subnets = _free_subnets(tag, len(bridges))
        for bridge, subnet in zip(bridges, subnets):
            ip("link", "add", bridge, "type", "bridge")
            ip("addr", "add", subnet + "1/24", "dev", bridge)
            ip("link", "set", bridge, "up")
    return subnets


def _add_namespaces(names):
    probe = ip("netns", "add", names[0], check=False)
    if probe.returncode != 0:
        pytest.skip(f"multi-host tests need `ip netns add` (root): {probe.stderr.strip()}")
    for ns in names[1:]:
        ip("netns", "add", ns)


@contextlib.contextmanager
def bridged(tag, count):
    bridge = f"zeb{tag}"
    names = [f"zen{tag}h{i}" for i in range(count)]
    try:
        _add_namespaces(names)
        subnet = _add_bridges(tag, [bridge])[0]
        for i, ns in enumerate(names):
            inside, port = f"ze{tag}v{i}", f"ze{tag}p{i}"
            ip("link", "add", inside, "type", "veth", "peer", "name", port)
            ip("link", "set", inside, "netns", ns)
            ip("link", "set", port, "master", bridge, "up")
            ip("-n", ns, "addr", "add", f"{subnet}{i + 2}/24", "dev", inside)
            ip("-n", ns, "link", "set", inside, "up")
            ip("-n", ns, "link", "set", "lo", "up")
        yield Bridged(names, subnet + "1", {ns: f"{subnet}{i + 2}" for i, ns in enumerate(names)})
    finally:
        for i, ns in enumerate(names):
            ip("netns", "del", ns, check=False)  # deletes its veth and the bridge port with it
            ip("link", "del", f"ze{tag}p{i}", check=False)  # a veth that never moved
        ip("link", "del", bridge, check=False)


class TwoNetworks:
    def __init__(self, names, mgmt, data):
        self.names = names  # the namespaces
        self.mgmt = mgmt  # {namespace: its MGMT_IFACE address, "root": the bridge's}
        self.data = data  # the same for DATA_IFACE


@contextlib.contextmanager
def two_networks(tag, count):
    names = [f"zen{tag}n{i}" for i in range(count)]
    bridges = [f"zem{tag}", f"zed{tag}"]
    try:
        _add_namespaces(names)
        subnets = _add_bridges(tag, bridges)
        for i, ns in enumerate(names):
            ip("-n", ns, "link", "set", "lo", "up")
            for bridge, subnet, inside in zip(bridges, subnets, (MGMT_IFACE, DATA_IFACE)):
                # Made with names unique in the root namespace, renamed once inside.
                moving, port = f"{bridge}v{i}", f"{bridge}p{i}"
                ip("link", "add", moving, "type", "veth", "peer", "name", port)
                ip("link", "set", moving, "netns", ns)
                ip("link", "set", port, "master", bridge, "up")
                ip("-n", ns, "link", "set", moving, "name", inside)
                ip("-n", ns, "addr", "add", f"{subnet}{i + 2}/24", "dev", inside)
                ip("-n", ns, "link", "set", inside, "up")
        yield TwoNetworks(
            names,
            dict({ns: f"{subnets[0]}{i + 2}" for i, ns in enumerate(names)}, root=subnets[0] + "1"),
            dict({ns: f"{subnets[1]}{i + 2}" for i, ns in enumerate(names)}, root=subnets[1] + "1"))
    finally:
        for ns in names:
            ip("netns", "del", ns, check=False)  # deletes its veths and the bridge ports
        for bridge in bridges:
            for i in range(count):
                ip("link", "del", f"{bridge}p{i}", check=False)  # a veth that never moved
            ip("link", "del", bridge, check=False)
