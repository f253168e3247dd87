"""The worker's side of zenrun's elastic rendezvous (docs/architecture.md, "Elastic mode").

zenrun --min-np/--max-np/--host-discovery-script starts each worker with
ZEN_ELASTIC_RENDEZVOUS=host:port, ZEN_ELASTIC_WORKER=<id> and ZEN_SECRET, not with a rank:
zen.common.basics.init() calls join() first, which waits for the driver to form the next
round and sets ZEN_RANK, ZEN_SIZE, ZEN_LOCAL_*, ZEN_CROSS_* and ZEN_CONTROLLER_ADDR (rank 0
also ZEN_CONTROLLER_FD: the socket it listens on, which the library adopts) for zen_init.
zen.common.elastic's State.check_host_updates asks pending_update() at every commit.

Wire: one JSON object per line (zen.common.json_lines), every request carrying ZEN_SECRET.
"""

import os
import socket
import sys

from zen.common import horovod_env, json_lines
from zen.common.controller_socket import controller_listener

RENDEZVOUS_VARIABLE = "ZEN_ELASTIC_RENDEZVOUS"
WORKER_VARIABLE = "ZEN_ELASTIC_WORKER"
CONNECT_SECONDS = 10.0
# The server writes a heartbeat line at least every few seconds while a join waits, and ends
# every wait itself (the elastic timeout); this long a silence means zenrun is gone.
SILENCE_SECONDS = 30.0
_PLACEMENT = (("rank", "ZEN_RANK"), ("size", "ZEN_SIZE"), ("local_rank", "ZEN_LOCAL_RANK"),
              ("local_size", "ZEN_LOCAL_SIZE"), ("cross_rank", "ZEN_CROSS_RANK"),
              ("cross_size", "ZEN_CROSS_SIZE"))

# The generation of the round this process last joined (0: none yet). Process-wide, as the
# environment join() writes: one worker per process.
_joined = {"generation": 0}


def enabled():
    """True when zenrun started this process as an elastic worker."""
    return bool(os.environ.get(RENDEZVOUS_VARIABLE))


def _address():
    text = os.environ[RENDEZVOUS_VARIABLE]
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise RuntimeError("zen elastic: %s='%s': expected host:port" %
                           (RENDEZVOUS_VARIABLE, text))
    return host, int(port)


def _request(op, **fields):
    """Connects, sends {op, secret, worker, generation, **fields}; returns (socket, stream)."""
    address = _address()
    try:
        sock = socket.create_connection(address, timeout=CONNECT_SECONDS)
    except OSError as e:
        raise RuntimeError("zen elastic: cannot reach zenrun's rendezvous at %s:%d: %s" %
                           (address[0], address[1], e)) from None
    sock.settimeout(SILENCE_SECONDS)
    stream = sock.makefile("rwb")
    request = {"op": op, "secret": os.environ.get("ZEN_SECRET", ""),
               "worker": os.environ.get(WORKER_VARIABLE, ""),
               "generation": _joined["generation"]}
    request.update(fields)
    json_lines.write(stream, request)
    return sock, stream


def _reply(stream, what):
    """The next reply that is not a heartbeat; RuntimeError when the server refused, failed
    or went silent; SystemExit(0) when the worker is not wanted any more."""
    while True:
        try:
            reply = json_lines.read(stream)
        except (OSError, ValueError) as e:  # socket.timeout is an OSError
            raise RuntimeError("zen elastic: %s: no answer from zenrun's rendezvous: %s" %
                               (what, e)) from None
        if reply is None:
            raise RuntimeError("zen elastic: %s: zenrun's rendezvous closed the connection" %
                               what)
        if reply.get("wait"):
            continue
        if "exit" in reply:
            sys.stderr.write("zen elastic: %s\n" % reply["exit"])
            sys.stderr.flush()
            raise SystemExit(0)
        if "error" in reply:
            raise RuntimeError("zen elastic: %s: %s" % (what, reply["error"]))
        return reply


def _interface_field():
    """{"interface": this host's address on ZEN_IFACE's first interface} (zenrun
    --network-interface: rank 0 then listens there), or {} without ZEN_IFACE; RuntimeError
    naming the interface when this host lacks it or it has no IPv4 address."""
    names = horovod_env.lookup(os.environ, "ZEN_IFACE")[0]  # or HOROVOD_GLOO_IFACE
    if not names:
        return {}
    from zen.runner import interfaces

    try:
        return {"interface": interfaces.ipv4_address(names.split(",")[0])}
    except interfaces.InterfaceError as e:
        raise RuntimeError("zen elastic: ZEN_IFACE: %s" % e) from None


def join():
    """Joins the next round: blocks until zenrun forms it, then sets this worker's ZEN_RANK...
    variables in os.environ. RuntimeError on timeout or refusal; SystemExit(0) when the job is
    finishing or this worker is no longer wanted."""
    sock, stream = _request("join", **_interface_field())
    try:
        reply = _reply(stream, "join")
        os.environ.pop("ZEN_CONTROLLER_FD", None)  # this round's rank 0 may be another worker
        publish = reply.get("publish")
        if publish is not None:
            listener = controller_listener(publish["bind"])
            json_lines.write(stream, {"op": "publish", "port": listener.getsockname()[1]})
            try:
                reply = _reply(stream, "publish")
            except BaseException:
                listener.close()
                raise
            # The library adopts it at every init (bindings/api.cc) and closes it at shutdown.
            os.environ["ZEN_CONTROLLER_FD"] = str(listener.detach())
        for key, name in _PLACEMENT:
            os.environ[name] = str(int(reply["placement"][key]))
        os.environ["ZEN_CONTROLLER_ADDR"] = reply["controller"]
        _joined["generation"] = int(reply["generation"])
    finally:
        stream.close()
        sock.close()


def pending_update():
    """None when not elastic or nothing changed since the round this worker last joined; else
    (generation, removed_only): the latest membership change, and whether every change since
    then only removed workers (Horovod's skip_sync)."""
    if not enabled():
        return None
    sock, stream = _request("pending")
    try:
        reply = _reply(stream, "pending_update")
    finally:
        stream.close()
        sock.close()
    pending = reply.get("pending")
    if pending is None:
        return None
    return int(pending["generation"]), bool(pending["removed_only"])
