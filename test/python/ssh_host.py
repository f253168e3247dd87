"""A second host reached over a real ssh, for the tests of zenrun's and zen.run's remote launch
(test_zenrun_ssh.py): a network namespace (netns_hosts.bridged, one namespace) running a
private sshd that only the test's own key may log in to, as root.

ssh_host(tmp_path, tag) yields an SshHost: `addr`, the namespace's address (the host's name for
-H; not a name zenrun takes for this machine, so its ranks go through ssh), `port` (sshd's,
for -p: not 22, so the flag is needed), `key` (the client's private key, for -i), `root_addr`
(this machine's address on the bridge, where ranks in the namespace reach a local rank 0) and
`ns` (the namespace). sshd runs in the foreground (-D, its log under tmp_path), its host and
client keys generated in tmp_path; its start is waited for (the port answers) at most
START_WAIT seconds. Afterwards sshd and whatever still runs in the namespace are killed, and
the host's entry is removed from ~/.ssh/known_hosts, where zenrun's ssh (StrictHostKeyChecking=
no, as horovodrun's) adds it. Skips, saying why, without root, sshd or ssh-keygen
(tools/setup installs openssh-server and openssh-client), or where namespaces cannot be made.
"""

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time

import pytest

from netns_hosts import bridged, ip

SSHD = "/usr/sbin/sshd"  # sshd re-executes itself, which needs its absolute path
PORT = 2222
START_WAIT = 15.0  # seconds; sshd starts in well under one, unless the machine is loaded


class SshHost:
    def __init__(self, ns, addr, root_addr, port, key, listener):
        self.ns, self.addr, self.root_addr, self.port, self.key = ns, addr, root_addr, port, key
        self._listener = listener  # sshd's pid

    def processes(self):
        """The pids running in the namespace, sshd's own listener excluded (the ranks and their
        sshd sessions)."""
        pids = ip("netns", "pids", self.ns, check=False).stdout.split()
        return [int(p) for p in pids if int(p) != self._listener]


def _config(folder, addr, host_key, client_key):
    path = folder / "sshd_config"
    path.write_text(f"""\
ListenAddress {addr}
Port {PORT}
HostKey {host_key}
AuthorizedKeysFile {client_key}.pub
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
StrictModes no
UsePAM no
PidFile none
PrintMotd no
""")
    return path


def _wait_for_port(proc, addr, log):
    deadline = time.monotonic() + START_WAIT
    while True:
        if proc.poll() is not None:
            raise AssertionError(f"sshd exited with {proc.returncode}:\n{log.read_text()}")
        try:
            with socket.create_connection((addr, PORT), timeout=1.0):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise AssertionError(f"sshd did not listen on {addr}:{PORT} within "
                                     f"{START_WAIT:g} s:\n{log.read_text()}") from None
            time.sleep(0.05)


def forget_host_key(addr):
    """Removes [addr]:PORT from ~/.ssh/known_hosts."""
    known = os.path.expanduser("~/.ssh/known_hosts")
    if os.path.exists(known):
        subprocess.run(["ssh-keygen", "-R", f"[{addr}]:{PORT}", "-f", known],
                       capture_output=True, timeout=10)
        with contextlib.suppress(FileNotFoundError):
            os.remove(known + ".old")  # ssh-keygen -R's backup


@contextlib.contextmanager
def ssh_host(folder, tag):
    if os.geteuid() != 0:
        pytest.skip("the ssh tests log in as root to a private sshd in a network namespace")
    for tool in (SSHD, shutil.which("ssh-keygen"), shutil.which("ssh")):
        if tool is None or not os.access(tool, os.X_OK):
            pytest.skip("the ssh tests need openssh-server and openssh-client (tools/setup)")
    keys = {}
    for name in ("host_key", "client_key"):
        keys[name] = folder / name
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"zen test {name}",
                        "-f", str(keys[name])], check=True, capture_output=True, timeout=30)
    os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # its privilege separation directory
    with bridged(tag, 1) as net:
        ns = net.names[0]
        addr = net.addrs[ns]
        config = _config(folder, addr, keys["host_key"], keys["client_key"])
        log = folder / "sshd.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(["ip", "netns", "exec", ns, SSHD, "-D", "-e", "-f",
                                     str(config)], stdout=out, stderr=subprocess.STDOUT)
        # ip netns exec execs sshd: proc.pid is sshd's
        host = SshHost(ns, addr, net.root_addr, PORT, str(keys["client_key"]), proc.pid)
        try:
            _wait_for_port(proc, addr, log)
            yield host
        finally:
            proc.kill()
            proc.wait()
            for pid in host.processes():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            forget_host_key(addr)
