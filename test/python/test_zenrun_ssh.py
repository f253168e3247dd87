"""zenrun's and zen.run's remote launch over a real ssh: the default launch command (ssh with
-p/-i, as horovodrun's) into a private sshd running in a network namespace, a second host
(ssh_host.py). Rank 0 runs here and rank 1 in the namespace, unless said otherwise.

A zen.torch allreduce across the two hosts (the value checked, rank 1 proven to run in the
namespace, odd arguments and environment values and a large environment arriving whole); a
failing, a killed and a stopped remote rank, each with its exit code and message and no rank
left running once zenrun returns (the remote one stopped through its stdin, its last line
still printed); zenrun interrupted (the remote rank gets SIGINT), terminated and killed; zen.run returning the ranks' values from
the remote host, and a rank's exception; a host key not known yet; a refused port, an
unreachable address and a host that never answers, each failing on time with ssh's or
zenrun's reason; --mpi, its ranks started by Open MPI's own ssh after zenrun's ssh check.

Run: /usr/bin/python3 -m pytest -q -rs test/python/test_zenrun_ssh.py   (root; after
tools/build-python; also CTest: python_zenrun_ssh). Skipped, saying why, without root,
openssh-server/openssh-client (tools/setup) or network namespaces.
"""

import contextlib
import hashlib
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from rank_jobs import BINDINGS, CHECK_ENV, HERE, ZENRUN, environment, require_zen_torch
from ssh_host import ssh_host, forget_host_key

sys.path.insert(0, BINDINGS)

JOB = os.path.join(HERE, "ssh_job.py")
PYTHON = "/usr/bin/python3"
GRACE = 1  # --grace-seconds of the jobs that stop ranks


@pytest.fixture(scope="module")
def host(tmp_path_factory):
    with ssh_host(tmp_path_factory.mktemp("sshd"), os.getpid()) as h:
        yield h


def _ssh_flags(host, hosts=None, np=2, port=None, key=None):
    """zenrun's flags for np ranks on hosts (default: rank 0 here, rank 1 on host) over ssh
    to port (sshd's) with key (the test's)."""
    return ["-np", str(np), "-H", hosts or f"localhost:1,{host.addr}:1", "-p",
            str(port or host.port), "-i", str(key or host.key), "--controller-addr",
            host.root_addr]


def zenrun(flags, argv, extra_env=(), timeout=120):
    t0 = time.monotonic()
    r = subprocess.run([ZENRUN] + flags + argv, capture_output=True, text=True,
                       timeout=timeout, env=environment(dict(CHECK_ENV, **dict(extra_env))),
                       cwd=HERE)
    return r, time.monotonic() - t0


def _reports(out):
    return {rep["rank"]: rep for rep in (json.loads(line.split("REPORT ", 1)[1])
                                         for line in out.splitlines() if "REPORT {" in line)}


def _netns(ns):
    return f"net:[{os.stat(f'/run/netns/{ns}').st_ino}]"


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _pids(folder, n, within=60.0):
    deadline = time.monotonic() + within
    while len([f for f in os.listdir(folder) if f.startswith("rank.")
               and not f.endswith(".tmp")]) < n:
        assert time.monotonic() < deadline, f"only {os.listdir(folder)} of {n} pids"
        time.sleep(0.05)
    return [int((folder / f"rank.{r}").read_text()) for r in range(n)]


def _assert_gone(host, pids, within=1.0):
    """The ranks' pids, and every process of the namespace but sshd's listener (the rank's
    wrapper and its sshd session), end within `within` seconds of zenrun's return."""
    deadline = time.monotonic() + within
    while [p for p in pids if _alive(p)] or host.processes():
        if time.monotonic() > deadline:
            raise AssertionError(f"alive after zenrun returned: ranks "
                                 f"{[p for p in pids if _alive(p)]}, in the namespace "
                                 f"{host.processes()}")
        time.sleep(0.05)


def test_allreduce_across_ssh(host, tmp_path):
    require_zen_torch()
    key_dir = tmp_path / "key dir"  # -i FILE with a space in it
    key_dir.mkdir()
    key = shutil.copy2(host.key, key_dir / "id ed25519")
    odd = "it's \"$HOME\" `id` ; & | * \\ é\nsecond line"
    big = "".join(random.Random(7).choice("abcdefgh0123 =;'\"") for _ in range(120_000))
    args = ["plain", "two words", "it's", "$HOME", "*", "a\nb", ""]
    r, _ = zenrun(_ssh_flags(host, key=key) + ["--start-timeout", "60"],
                  [PYTHON, JOB, "allreduce"] + args, {"ZENTEST_ODD": odd, "ZENTEST_BIG": big})
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    reports = _reports(r.stdout)
    assert sorted(reports) == [0, 1], r.stdout
    assert reports[0]["netns"] != reports[1]["netns"] == _netns(host.ns)
    for rep in reports.values():
        assert rep["size"] == 2 and rep["sum"] == [3.0, 30.0], rep
        assert rep["args"] == args and rep["odd"] == odd, rep
        assert rep["big_len"] == len(big), rep
        assert rep["big_sha"] == hashlib.sha256(big.encode()).hexdigest()


def test_host_key_not_known_yet_is_accepted_once(host):
    """No prompt and no "Host key verification failed" for a new host, as with horovodrun's
    ssh (StrictHostKeyChecking=no): the key is added to known_hosts, and used from then on."""
    forget_host_key(host.addr)
    flags = _ssh_flags(host, f"{host.addr}:1", np=1)
    r, _ = zenrun(flags, [PYTHON, "-c", "print('hi')"])
    assert r.returncode == 0, r.stderr
    assert f"Permanently added '[{host.addr}]:{host.port}'" in r.stderr, r.stderr
    r, _ = zenrun(flags, [PYTHON, "-c", "print('hi')"])
    assert r.returncode == 0 and "Permanently added" not in r.stderr, r.stderr
    assert r.stdout == "[0]<stdout>:hi\n"


def test_failing_remote_rank_stops_the_job(host, tmp_path):
    r, took = zenrun(_ssh_flags(host) + ["--grace-seconds", str(GRACE)],
                     [PYTHON, JOB, "part", "--pid-dir", str(tmp_path), "sleep", "exit:7"])
    assert r.returncode == 7, r.stderr
    assert (f"zenrun: rank 1 (host {host.addr}) exited with code 7 first; stopped 1 other "
            f"rank") in r.stderr
    assert "[0]<stdout>:rank 0 got SIGTERM" in r.stdout, r.stdout
    assert took < 60, took
    _assert_gone(host, _pids(tmp_path, 2, within=0))


def test_failing_local_rank_stops_the_remote_one(host, tmp_path):
    """The remote rank is stopped through its stdin (SIGTERM from its wrapper, SIGKILL after
    the grace period): its line about SIGTERM still comes back over ssh, and it is gone when
    zenrun returns."""
    r, took = zenrun(_ssh_flags(host) + ["--grace-seconds", str(GRACE)],
                     [PYTHON, JOB, "part", "--pid-dir", str(tmp_path), "exit:5", "sleep"])
    assert r.returncode == 5, r.stderr
    assert "zenrun: rank 0 (host localhost) exited with code 5 first; stopped 1 other rank" \
        in r.stderr
    assert "[1]<stdout>:rank 1 got SIGTERM" in r.stdout, r.stdout + r.stderr
    assert took < 60, took
    _assert_gone(host, _pids(tmp_path, 2, within=0))


def test_remote_rank_killed_by_a_signal_is_reported_as_such(host, tmp_path):
    """ssh exits 255 for a remote death by signal; the wrapper's report makes it SIGKILL."""
    r, _ = zenrun(_ssh_flags(host) + ["--grace-seconds", str(GRACE)],
                  [PYTHON, JOB, "part", "--pid-dir", str(tmp_path), "sleep", "kill"])
    assert r.returncode == 128 + signal.SIGKILL, r.stderr
    assert f"zenrun: rank 1 (host {host.addr}) was killed by SIGKILL first" in r.stderr
    assert "ZENRUN_KILLED" not in r.stdout
    _assert_gone(host, _pids(tmp_path, 2, within=0))


@contextlib.contextmanager
def _zenrun_running(host, tmp_path):
    proc = subprocess.Popen([ZENRUN] + _ssh_flags(host) + ["--grace-seconds", str(GRACE)]
                            + [PYTHON, JOB, "part", "--pid-dir", str(tmp_path), "sleep",
                               "sleep"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=environment(CHECK_ENV), cwd=HERE)
    try:
        yield proc, _pids(tmp_path, 2)
    finally:
        proc.kill()
        proc.communicate()


def test_interrupted_zenrun_interrupts_the_remote_rank(host, tmp_path):
    """Ctrl-C reaches the remote rank as SIGINT, as it reaches the local one (through its
    wrapper's stdin: ssh carries no signals); both catch it and sleep on, so the grace
    period's SIGKILL ends them, and the remote rank's line still comes back."""
    with _zenrun_running(host, tmp_path) as (proc, pids):
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + signal.SIGINT, err
    assert "zenrun: received SIGINT; stopped 2 ranks" in err, err
    assert "[0]<stdout>:rank 0 got SIGINT" in out, out + err
    assert "[1]<stdout>:rank 1 got SIGINT" in out, out + err
    assert "got SIGTERM" not in out, out + err
    _assert_gone(host, pids)


def test_terminated_zenrun_stops_the_remote_rank(host, tmp_path):
    with _zenrun_running(host, tmp_path) as (proc, pids):
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "zenrun: received SIGTERM; stopped 2 ranks" in err, err
    assert "[1]<stdout>:rank 1 got SIGTERM" in out, out + err
    _assert_gone(host, pids)


def test_killed_zenrun_leaves_no_remote_rank(host, tmp_path):
    """zenrun gets SIGKILL: ssh reads end-of-file on its stdin and passes it on; the remote
    wrapper stops its rank (SIGKILL after the grace period)."""
    with _zenrun_running(host, tmp_path) as (proc, pids):
        proc.kill()
        proc.wait(10)
    _assert_gone(host, pids, within=GRACE + 10)


def test_zen_run_on_the_remote_host(host):
    """zen.run with Horovod's hosts, ssh_port and ssh_identity_file: both ranks in the
    namespace (rank 0 listening on its address there), the values back by rank; a rank's
    exception comes back too, and a function of 300 KiB gets there."""
    require_zen_torch()
    import zen
    from zen.runner import RunError

    def allreduce_rank(scale):
        import torch
        import zen.torch as zt

        zt.init()
        total = zt.allreduce(torch.tensor([float(zt.rank() + 1)]), op=zt.Sum).item()
        return zt.rank(), total * scale, os.readlink("/proc/self/ns/net")

    kwargs = dict(hosts=f"{host.addr}:2", ssh_port=host.port, ssh_identity_file=host.key,
                  env=dict(os.environ, **CHECK_ENV), start_timeout=60)
    got = zen.run(allreduce_rank, args=(2.0,), np=2, **kwargs)
    assert got == [(r, 6.0, _netns(host.ns)) for r in (0, 1)]

    def fail_on_rank_1():
        if os.environ["ZEN_RANK"] == "1":
            raise ValueError("remote trouble")
        return "ok"

    with pytest.raises(RunError, match=r"rank 1 raised ValueError: remote trouble"):
        zen.run(fail_on_rank_1, np=2, **kwargs)

    data = bytes(range(256)) * 1200  # 300 KiB: several environment variables, through stdin

    def digest():
        return hashlib.sha256(data).hexdigest()

    assert zen.run(digest, np=2, **kwargs) == [hashlib.sha256(data).hexdigest()] * 2


def test_refused_port_fails_at_once(host):
    r, took = zenrun(_ssh_flags(host, port=host.port + 1),
                     [PYTHON, "-c", "import time; time.sleep(60)"])
    assert r.returncode == 255, r.stderr
    assert (f"[1]<stderr>:ssh: connect to host {host.addr} port {host.port + 1}: Connection "
            f"refused") in r.stderr, r.stderr
    assert (f"zenrun: rank 1 (host {host.addr}) exited with code 255 first (before it "
            f"started") in r.stderr, r.stderr
    assert took < 20, took


def test_unreachable_address_fails_on_time(host):
    """An address of the bridge's subnet that no one holds: no route once ARP gives up."""
    nobody = host.root_addr.rpartition(".")[0] + ".250"
    r, took = zenrun(_ssh_flags(host, f"localhost:1,{nobody}:1")
                     + ["--start-timeout", "20", "--grace-seconds", str(GRACE)],
                     [PYTHON, "-c", "import time; time.sleep(60)"])
    assert r.returncode in (1, 255), r.stderr
    assert f"rank 1 (host {nobody})" in r.stderr, r.stderr
    assert took < 20 + GRACE + 10, took


def test_host_that_never_answers_fails_at_the_start_timeout(host):
    """A port that accepts the connection and never speaks ssh: --start-timeout ends it, then
    ssh is killed after the grace period."""
    silent = socket.socket()
    silent.bind((host.root_addr, 0))
    silent.listen(8)
    held = []
    stop = threading.Event()

    def accept():
        silent.settimeout(0.2)
        while not stop.is_set():
            with contextlib.suppress(OSError):
                held.append(silent.accept()[0])

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    try:
        r, took = zenrun(_ssh_flags(host, f"localhost:1,{host.root_addr}:1",
                                    port=silent.getsockname()[1])
                         + ["--start-timeout", "3", "--grace-seconds", str(GRACE)],
                         [PYTHON, "-c", "import time; time.sleep(60)"])
    finally:
        stop.set()
        t.join()
        for c in held:
            c.close()
        silent.close()
    assert r.returncode == 1, r.stderr
    assert (f"zenrun: 1 of 2 ranks did not start within 3 s: rank 1 (host {host.root_addr})"
            in r.stderr), r.stderr
    assert took < 3 + GRACE + 2 + 10, took


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="no mpirun (openmpi-bin)")
def test_mpi_mode_over_ssh(host):
    """--mpi: Open MPI's own ssh (-p/-i as plm_rsh_args) starts rank 1 in the namespace, for
    a host key not known before too (zenrun's ssh check first, as horovodrun's, learns it);
    the allreduce's value checked. A refused port fails in that check, naming the host."""
    require_zen_torch()
    forget_host_key(host.addr)
    flags = _ssh_flags(host) + ["--mpi", "--start-timeout", "60"]
    r, _ = zenrun(flags, [PYTHON, JOB, "allreduce"])
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    reports = _reports(r.stdout)
    assert sorted(reports) == [0, 1], r.stdout
    assert reports[0]["netns"] != reports[1]["netns"] == _netns(host.ns)
    assert all(rep["sum"] == [3.0, 30.0] for rep in reports.values()), reports
    r, took = zenrun(_ssh_flags(host, port=host.port + 1) + ["--mpi"], [PYTHON, "-c", "1"])
    assert r.returncode == 1, r.stderr
    assert (f"zenrun: --mpi: ssh to {host.addr}: ssh: connect to host {host.addr} port "
            f"{host.port + 1}: Connection refused") in r.stderr, r.stderr
    assert took < 20, took
