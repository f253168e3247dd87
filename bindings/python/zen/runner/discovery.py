"""--host-discovery-script: the hosts an elastic job may use, asked of a user's script every
second, as Horovod's elastic driver does.

The script prints one host per line, `host` or `host:slots` (a host without slots gets
--slots-per-host); blank lines and '#' comments are skipped. A run that fails (non-zero exit,
no answer within the timeout, a bad line) is reported once per distinct reason and the last
good list is kept.
"""

import subprocess
import threading

from zen.runner import hosts as hostlib

INTERVAL_SECONDS = 1.0
SCRIPT_TIMEOUT_SECONDS = 10.0


class DiscoveryError(RuntimeError):
    """The script failed or printed something that is not a host list."""


def parse_output(text, default_slots, where):
    """[Host] from the script's output lines."""
    hosts = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, sep, slots = line.partition(":")
        try:
            hosts.append(hostlib.make_host(name.strip(),
                                           slots.strip() if sep else str(default_slots),
                                           f"{where}: line {number}"))
        except hostlib.HostError as e:
            raise DiscoveryError(str(e)) from None
    seen = set()
    for h in hosts:
        if h.name in seen:
            raise DiscoveryError(f"{where}: host '{h.name}' is listed twice")
        seen.add(h.name)
    return hosts


def run_script(script, default_slots, timeout=SCRIPT_TIMEOUT_SECONDS):
    """Runs the script once; returns [Host] (possibly empty) or raises DiscoveryError."""
    try:
        proc = subprocess.run([script], capture_output=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise DiscoveryError(f"{script} did not finish within {timeout:g} s") from None
    except OSError as e:
        raise DiscoveryError(f"cannot run {script}: {e.strerror}") from None
    if proc.returncode != 0:
        err = proc.stderr.decode(errors="replace").strip().splitlines()
        raise DiscoveryError(f"{script} exited with code {proc.returncode}"
                             + (f": {err[-1]}" if err else ""))
    return parse_output(proc.stdout.decode(errors="replace"), default_slots, script)


class Poller:
    """Runs the script every INTERVAL_SECONDS in a thread; on_hosts([Host]) gets each list
    that differs from the last one, on_error(message) each new failure reason."""

    def __init__(self, script, default_slots, on_hosts, on_error, last=None):
        self._script = script
        self._slots = default_slots
        self._on_hosts = on_hosts
        self._on_error = on_error
        self._last = last
        self._last_error = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self):
        self._thread.start()

    def stop(self):
        self._stop.set()

    def _loop(self):
        while not self._stop.wait(INTERVAL_SECONDS):
            try:
                hosts = run_script(self._script, self._slots)
            except DiscoveryError as e:
                if str(e) != self._last_error:
                    self._last_error = str(e)
                    self._on_error(f"host discovery: {e}; keeping the last host list")
                continue
            self._last_error = None
            if hosts != self._last:
                self._last = hosts
                self._on_hosts(hosts)
