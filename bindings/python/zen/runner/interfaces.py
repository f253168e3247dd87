"""Network interfaces by name, for --network-interface / ZEN_IFACE (the library's own look-up is
ops/net_interface.cc): an interface's IPv4 address on this machine, and, run as a script
(`python3 interfaces.py NAME`), on a remote host through the launch command.

Linux's SIOCGIFADDR gives an interface's (first) IPv4 address without a third-party package;
Python's standard library has no getifaddrs.
"""

import fcntl
import socket
import struct
import sys

_SIOCGIFADDR = 0x8915


class InterfaceError(ValueError):
    """The interface is not on this host, or has no IPv4 address (the message says which)."""


def ipv4_address(name):
    """The IPv4 address of interface `name` on this machine, as text; InterfaceError naming
    it when the machine has no such interface or it has no IPv4 address."""
    known = [n for _, n in socket.if_nameindex()]
    if name not in known:
        raise InterfaceError(f"no network interface '{name}' on this host (it has: "
                             f"{', '.join(known) or 'none'})")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            packed = fcntl.ioctl(s.fileno(), _SIOCGIFADDR,
                                 struct.pack("256s", name.encode()[:15]))
        except OSError:
            raise InterfaceError(f"network interface '{name}' has no IPv4 address on this "
                                 f"host") from None
    return socket.inet_ntoa(packed[20:24])


def parse_list(text):
    """The names of a comma-separated --network-interface / ZEN_IFACE value; ValueError for an
    empty name (the library rejects the same, core/config.cc)."""
    names = text.split(",")
    if any(not n.strip() or n != n.strip() for n in names):
        raise ValueError(f"expected comma-separated network interface names, e.g. eth0 or "
                         f"ib0,eth0, not '{text}'")
    return names


def main(argv):
    """Prints the address of argv[0] and exits 0, or the reason and exits 1."""
    try:
        print(ipv4_address(argv[0]))
    except InterfaceError as e:
        print(e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
