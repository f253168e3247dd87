"""Hosts that are network namespaces on this machine, for the multi-host launcher tests
(test_zenrun.py, test_elastic_netns.py). Needs root and iproute2; a test that cannot create
them skips, saying why (pytest -rs shows it; CTest reports python_elastic_netns as skipped).

bridged(tag, count): `count` namespaces, each with a veth whose other end is a port of a bridge
in the root namespace that holds 10.215.S.1/24 (zenrun's address for the workers); namespace i
has 10.215.S.(i+2). The names derive from tag (the test process's pid) and S is the first
subnet from tag on that this machine does not use, so tests running in parallel (ctest -j,
another build directory's run) do not collide. Everything is deleted afterwards, also on a
failure.
"""

import contextlib
import subprocess

import pytest


def ip(*args, check=True):
    return subprocess.run(["ip"] + list(args), capture_output=True, text=True, timeout=10,
                          check=check)


class Bridged:
    def __init__(self, names, root_addr, addrs):
        self.names = names  # the namespaces: the hosts' names for -H and discovery
        self.root_addr = root_addr  # zenrun's address on the bridge
        self.addrs = addrs  # {namespace: its address}


def _free_subnet(tag):
    """10.215.S. with S from tag on, skipping those this machine already has (another test
    run's bridge: its routes would take our packets)."""
    used = ip("-o", "-4", "addr", "show", check=False).stdout
    for k in range(250):
        subnet = f"10.215.{(tag + k) % 250}."
        if f" {subnet}" not in used:
            return subnet
    pytest.skip("every 10.215.S.0/24 subnet is in use on this machine")


@contextlib.contextmanager
def bridged(tag, count):
    subnet = _free_subnet(tag)
    bridge = f"zeb{tag}"
    names = [f"zen{tag}h{i}" for i in range(count)]
    probe = ip("netns", "add", names[0], check=False)
    if probe.returncode != 0:
        pytest.skip(f"multi-host tests need `ip netns add` (root): {probe.stderr.strip()}")
    try:
        ip("link", "add", bridge, "type", "bridge")
        ip("addr", "add", subnet + "1/24", "dev", bridge)
        ip("link", "set", bridge, "up")
        for i, ns in enumerate(names):
            inside, port = f"ze{tag}v{i}", f"ze{tag}p{i}"
            if i:
                ip("netns", "add", ns)
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
