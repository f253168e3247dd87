"""Host lists, hostfiles and rank placement, computed as Horovod does.

Placement (horovod/runner/common/util/hosts.py, get_host_assignments): hosts are filled in
the order given, each up to its slot count, until -np ranks are placed. On each host
local_rank counts 0, 1, ...; local_size is the number of ranks placed on that host. The
ranks with the same local_rank form a "cross" group: cross_rank is the index of the host
among the hosts that hold that local_rank, cross_size the number of such hosts.
"""

import re
import socket
from dataclasses import dataclass
from typing import List


class HostError(ValueError):
    """A host list, hostfile or placement request that cannot be used (a usage error)."""


@dataclass(frozen=True)
class Host:
    name: str
    slots: int


@dataclass(frozen=True)
class Slot:
    """Where one rank runs and its place in the world, local and cross groups."""

    host: str
    rank: int
    size: int
    local_rank: int
    local_size: int
    cross_rank: int
    cross_size: int


_HOST_RE = re.compile(r"^[A-Za-z0-9_.\-]+$")


def make_host(name: str, slots_text: str, where: str) -> Host:
    """A Host from a name and slot count text; HostError saying `where` when either is bad."""
    if not name or not _HOST_RE.match(name):
        raise HostError(f"{where}: bad host name '{name}'")
    try:
        slots = int(slots_text)
    except ValueError:
        raise HostError(f"{where}: slots of '{name}' must be a positive integer, "
                        f"not '{slots_text}'") from None
    if slots < 1:
        raise HostError(f"{where}: slots of '{name}' must be a positive integer, not {slots}")
    return Host(name, slots)


def _check_unique(hosts: List[Host], where: str) -> List[Host]:
    seen = set()
    for h in hosts:
        if h.name in seen:
            raise HostError(f"{where}: host '{h.name}' is listed twice; give it once with "
                            f"its total slots")
        seen.add(h.name)
    if not hosts:
        raise HostError(f"{where}: no hosts")
    return hosts


def parse_hosts(text: str) -> List[Host]:
    """Parses "h1:4,h2:2" (a host without ":slots" has one slot, as with mpirun -H)."""
    hosts = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            raise HostError(f"-H '{text}': empty host entry")
        name, sep, slots = item.partition(":")
        hosts.append(make_host(name, slots if sep else "1", f"-H '{text}'"))
    return _check_unique(hosts, f"-H '{text}'")


def parse_hostfile_text(text: str, path: str = "hostfile") -> List[Host]:
    """Parses hostfile lines "host slots=4" (also "host:4" or a bare "host" = 1 slot);
    '#' starts a comment, blank lines are skipped."""
    hosts = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        where = f"{path}:{number}"
        words = line.split()
        name, slots = words[0], "1"
        if ":" in name:
            name, _, slots = name.partition(":")
        for word in words[1:]:
            key, sep, value = word.partition("=")
            if key in ("slots", "max_slots", "max-slots") and sep:
                if key == "slots":
                    slots = value
            else:
                raise HostError(f"{where}: expected 'host slots=N', found '{line}'")
        hosts.append(make_host(name, slots, where))
    return _check_unique(hosts, path)


def parse_hostfile(path: str) -> List[Host]:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise HostError(f"--hostfile: cannot read '{path}': {e.strerror}") from None
    return parse_hostfile_text(text, path)


def format_hosts(hosts: List[Host]) -> str:
    return ",".join(f"{h.name}:{h.slots}" for h in hosts)


def assign_ranks(hosts: List[Host], num_proc: int) -> List[Slot]:
    """Places num_proc ranks on the hosts in order (Horovod's get_host_assignments)."""
    total = sum(h.slots for h in hosts)
    if num_proc < 1:
        raise HostError(f"-np must be at least 1, not {num_proc}")
    if num_proc > total:
        raise HostError(f"-np {num_proc} but the hosts offer only {total} slot"
                        f"{'s' if total != 1 else ''} ({format_hosts(hosts)}); "
                        f"add hosts or slots, or lower -np")
    placed = []  # (host, [ranks])
    cross = {}  # local_rank -> {host: cross_rank}
    rank = 0
    for h in hosts:
        ranks = []
        for local_rank in range(h.slots):
            if rank == num_proc:
                break
            ranks.append(rank)
            rank += 1
            at_local = cross.setdefault(local_rank, {})
            at_local[h.name] = len(at_local)
        if ranks:
            placed.append((h, ranks))
    slots = []
    for h, ranks in placed:
        for local_rank, r in enumerate(ranks):
            at_local = cross[local_rank]
            slots.append(Slot(host=h.name, rank=r, size=num_proc, local_rank=local_rank,
                              local_size=len(ranks), cross_rank=at_local[h.name],
                              cross_size=len(at_local)))
    return slots


def is_local(host: str) -> bool:
    """True for names that mean this machine. No DNS look-ups: a name not recognised here
    is launched through the launch command, which also works for this machine (ssh to
    itself), only slower."""
    if host in ("localhost", "ip6-localhost", "::1") or host.startswith("127."):
        return True
    name = socket.gethostname()
    return host in (name, name.split(".", 1)[0])
