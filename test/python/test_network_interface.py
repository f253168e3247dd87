"""--network-interface / ZEN_IFACE on one machine: the flag's parsing and what it becomes
(ZEN_IFACE, ZEN_CONTROLLER_ADDR, mpirun's -mca flags, elastic rank 0's address), the
interface look-up, and real zen.torch jobs: one on loopback ("lo") whose allreduces are
checked, and one naming an interface this machine lacks, where every rank must fail at init
with a message naming it and zenrun must exit non-zero within a bound. The jobs across hosts
with two networks each are test_network_interface_netns.py's.

Run: /usr/bin/python3 -m pytest -q test/python/test_network_interface.py (the jobs after
tools/build-python; also CTest: python_network_interface).
"""

import os
import re
import sys
import time

import pytest

from rank_jobs import BINDINGS, HERE, TORCH_PYTHON, require_zen_torch, zenrun_streaming

sys.path.insert(0, BINDINGS)

from zen.runner import args as arglib  # noqa: E402
from zen.runner import hosts as hostlib  # noqa: E402
from zen.runner import interfaces  # noqa: E402
from zen.runner import mpi_run, tcp_run  # noqa: E402
from zen.runner.elastic_rounds import controller_address  # noqa: E402

JOB = os.path.join(HERE, "iface_job.py")
ENV = {"ZEN_TIMEOUT": "20", "ZEN_THREADS": "1", "OMP_NUM_THREADS": "1"}


class Messages:
    def __init__(self):
        self.lines = []

    def message(self, text):
        self.lines.append(text)


def test_loopback_address_and_a_missing_interface():
    assert interfaces.ipv4_address("lo") == "127.0.0.1"
    with pytest.raises(interfaces.InterfaceError,
                       match=r"no network interface 'zen-absent0' on this host \(it has: .*lo"):
        interfaces.ipv4_address("zen-absent0")


def test_flag_and_alias_become_zen_iface():
    for flag in ("--network-interface", "--network-interfaces"):
        args = arglib.parse(["-np", "2", flag, "ib0,eth0", "true"])
        assert arglib.knob_env(args)["ZEN_IFACE"] == "ib0,eth0"
    assert "ZEN_IFACE" not in arglib.knob_env(arglib.parse(["-np", "2", "true"]))
    assert "ZEN_IFACE" in arglib.KNOWN_VARIABLES


@pytest.mark.parametrize("bad", ["", "eth0,", ",eth0", "eth0, ib0"])
def test_bad_list_is_a_usage_error(bad, capsys):
    with pytest.raises(SystemExit) as e:
        arglib.parse(["-np", "2", "--network-interface", bad, "true"])
    assert e.value.code == 2
    assert "expected comma-separated network interface names" in capsys.readouterr().err


def test_nccl_gets_the_interfaces_unless_set():
    from zen.runner import launch

    args = arglib.parse(["-np", "2", "--network-interface", "eth1", "true"])
    assert launch._base_env(args, {})[0]["NCCL_SOCKET_IFNAME"] == "eth1"
    assert launch._base_env(args, {"NCCL_SOCKET_IFNAME": "ib0"})[0]["NCCL_SOCKET_IFNAME"] == "ib0"
    assert "NCCL_SOCKET_IFNAME" not in launch._base_env(arglib.parse(["-np", "2", "true"]), {})[0]


def test_mpirun_gets_the_interfaces():
    args = arglib.parse(["-np", "2", "--mpi", "--network-interface", "eth1,ib0", "true"])
    hosts = [hostlib.Host("localhost", 2)]
    env = arglib.knob_env(args)
    argv = mpi_run.build_command(args, hosts, hostlib.assign_ranks(hosts, 2), env)
    text = " ".join(argv)
    assert "-mca btl_tcp_if_include eth1,ib0 -mca oob_tcp_if_include eth1,ib0" in text, text
    assert "-x ZEN_IFACE" in text, text
    assert "-x NCCL_SOCKET_IFNAME" in " ".join(
        mpi_run.build_command(args, hosts, hostlib.assign_ranks(hosts, 2),
                              dict(env, NCCL_SOCKET_IFNAME="eth1"))), text
    plain = mpi_run.build_command(args, hosts, hostlib.assign_ranks(hosts, 2), {})
    assert "btl_tcp_if_include" not in " ".join(plain)


def test_controller_address_on_the_local_first_hosts_interface():
    args = arglib.parse(["-np", "2", "--network-interface", "lo", "true"])
    slots = hostlib.assign_ranks([hostlib.Host("localhost", 2)], 2)
    said = Messages()
    addr, listener = tcp_run.controller_addr(args, slots, "lo", said)
    try:
        assert addr == f"127.0.0.1:{listener.getsockname()[1]}"
        assert listener.getsockname()[0] == "127.0.0.1"
    finally:
        listener.close()
    # An interface zenrun cannot find: the old address, said why (the ranks report it too).
    addr, listener = tcp_run.controller_addr(args, slots, "zen-absent0", said)
    listener.close()
    assert addr.startswith("127.0.0.1:")
    assert "no network interface 'zen-absent0'" in said.lines[-1], said.lines
    # An explicit --controller-addr host wins.
    args = arglib.parse(["-np", "2", "--controller-addr", "10.9.8.7:4000", "true"])
    assert tcp_run.controller_addr(args, slots, "lo", said) == ("10.9.8.7:4000", None)


def test_remote_first_host_is_asked_through_the_launch_command():
    # `sh -c` as the launch command: the remote host is this machine, asked as if remote.
    args = arglib.parse(["-np", "2", "-H", "far-away:2", "--launch-command",
                         "env HOST={host} sh -c", "true"])
    slots = hostlib.assign_ranks([hostlib.Host("far-away", 2)], 2)
    said = Messages()
    addr, listener = tcp_run.controller_addr(args, slots, "lo", said)
    assert listener is None and addr.startswith("127.0.0.1:"), (addr, said.lines)
    addr, _ = tcp_run.controller_addr(args, slots, "zen-absent0", said)
    assert addr.startswith("far-away:")
    assert "far-away: no network interface 'zen-absent0'" in said.lines[-1], said.lines


def test_elastic_rank0_listens_on_its_interface_address():
    assert controller_address(["a", "b"], "a", "10.0.0.2", "10.1.0.2") == ("10.1.0.2",
                                                                           "10.1.0.2")
    assert controller_address(["a", "b"], "a", "10.0.0.2") == ("10.0.0.2", "10.0.0.2")
    assert controller_address(["localhost"], "localhost", "127.0.0.1", "10.1.0.2") == (
        "10.1.0.2", "10.1.0.2")


def test_elastic_join_carries_the_workers_interface_address(monkeypatch):
    from zen.common import elastic_rendezvous
    from zen.runner.rendezvous_server import _ipv4_or_none

    monkeypatch.delenv("ZEN_IFACE", raising=False)
    assert elastic_rendezvous._interface_field() == {}
    monkeypatch.setenv("ZEN_IFACE", "lo,eth0")
    assert elastic_rendezvous._interface_field() == {"interface": "127.0.0.1"}
    monkeypatch.setenv("ZEN_IFACE", "zen-absent0")
    with pytest.raises(RuntimeError, match="ZEN_IFACE: no network interface 'zen-absent0'"):
        elastic_rendezvous._interface_field()
    # zenrun takes only an IPv4 address from a join (else the join's source address).
    assert _ipv4_or_none("10.1.0.2") == "10.1.0.2"
    assert [_ipv4_or_none(x) for x in (None, "", "eth0", "::1", 7)] == [None] * 5


def test_loopback_job_sums():
    require_zen_torch()
    code, out, err = zenrun_streaming(["-np", "3", "--network-interface", "lo", TORCH_PYTHON,
                                       JOB, "--steps", "2"], ENV, timeout=120)
    assert code == 0, out[-3000:] + err[-3000:]
    done = re.findall(r"IFACE rank (\d) of 3 controller ([\d.]+):\d+ sum ok", out)
    assert sorted(done) == [(str(r), "127.0.0.1") for r in range(3)], out + err


def test_missing_interface_fails_every_rank_loudly():
    require_zen_torch()
    t0 = time.monotonic()
    # SIGTERM ignored from the shell on (inherited through exec), so that every rank outlives
    # zenrun's stop of the others long enough to report its own init error.
    code, out, err = zenrun_streaming(["-np", "3", "--network-interface", "zen-absent0",
                                       "--grace-seconds", "20", "sh", "-c",
                                       f"trap '' TERM; exec {TORCH_PYTHON} {JOB}"], ENV,
                                      timeout=60)
    assert code != 0, out + err
    assert time.monotonic() - t0 < 40, err
    for rank in range(3):
        assert re.search(rf"^\[{rank}\]<stderr>:INIT FAILED: .*ZEN_IFACE: no network interface "
                         r"'zen-absent0' on this host \(it has: ", err, re.M), err
    assert "--network-interface: no network interface 'zen-absent0'" in err, err
