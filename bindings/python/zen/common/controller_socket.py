"""The listening socket rank 0's library adopts (ZEN_CONTROLLER_FD, ops/tcp_rendezvous.cc):
zenrun opens it for a fixed-size job, an elastic worker for each round it is rank 0 in."""

import socket


def controller_listener(bind_host="127.0.0.1"):
    """A socket listening on a free port of bind_host. Its opener holds it from choosing the
    port until rank 0's library has it (inherited, or in the same process), so no other
    process can take the port in between; the library accepts on it instead of binding."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((bind_host, 0))
        s.listen(socket.SOMAXCONN)
    except OSError:
        s.close()
        raise
    return s
