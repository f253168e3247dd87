"""zenrun's elastic rendezvous server: JSON lines over TCP (zen.common.json_lines), served
from zenrun's process, answering for an elastic_rounds.Rounds book.

Requests (one per connection; each carries the job's ZEN_SECRET, refused without it):
  {"op": "join", "secret", "worker", "generation"[, "interface": IPv4 address on ZEN_IFACE]}
      -> {"wait": true} every few seconds while the round forms, then one of
         {"ok", "placement": {rank, size, local_rank, local_size, cross_rank, cross_size},
          "generation", "controller": "host:port"}
         {"ok", "publish": {"bind": address}, "generation"}: this worker is rank 0; it
             listens on a free port of `bind` and sends {"op": "publish", "port": P} on the
             same connection, answered with the placement reply above
         {"exit": message}: the job is finishing or the worker is not wanted (exit 0)
         {"error": message}: refused, or the job failed
  {"op": "pending", "secret", "worker", "generation"}
      -> {"ok", "pending": null or {"generation", "removed_only"}}
"""

import hmac
import ipaddress
import socket
import socketserver
import threading

from zen.common import json_lines

REQUEST_SECONDS = 10.0  # a client must send its request this soon after connecting
HEARTBEAT_SECONDS = 5.0  # < zen.common.elastic_rendezvous.SILENCE_SECONDS


class _Handler(socketserver.StreamRequestHandler):
    def handle(self):
        server = self.server
        self.connection.settimeout(REQUEST_SECONDS)
        try:
            request = json_lines.read(self.rfile)
        except (OSError, ValueError):
            return
        if request is None:
            return
        try:
            if not hmac.compare_digest(str(request.get("secret", "")).encode(),
                                       server.secret.encode()):
                self._send({"error": "refused: wrong or missing ZEN_SECRET"})
                return
            op = request.get("op")
            worker = str(request.get("worker", ""))
            if op == "pending":
                self._send(server.rounds.pending(worker))
            elif op == "join":
                self._join(worker, _ipv4_or_none(request.get("interface")))
            else:
                self._send({"error": f"unknown request '{op}'"})
        except OSError:
            pass  # the worker went away; the driver sees its exit

    def _send(self, obj):
        json_lines.write(self.wfile, obj)

    def _join(self, worker, interface):
        rounds = self.server.rounds
        # The address the join came from is the worker's own on its way to zenrun: where
        # it listens and what the others dial when it is rank 0, unless it named its address
        # on ZEN_IFACE's interface (--network-interface).
        join = rounds.join(worker, heartbeat=lambda: self._send({"wait": True}),
                           heartbeat_seconds=HEARTBEAT_SECONDS, peer=self.client_address[0],
                           interface=interface)
        self._send(join.reply)
        if join.round is None or "publish" not in join.reply:
            return
        self.connection.settimeout(rounds.elastic_timeout)
        try:
            answer = json_lines.read(self.rfile)
        except (OSError, ValueError) as e:
            rounds.abandon(join.round, f"no port from rank 0: {e}")
            raise OSError(str(e)) from None
        if answer is None or answer.get("op") != "publish" or \
                not str(answer.get("port", "")).isdigit():
            rounds.abandon(join.round, f"expected a publish request, found {answer!r}")
            return
        self._send(rounds.publish(join.round, int(answer["port"])))


def _ipv4_or_none(text):
    """A join's "interface" field when it is an IPv4 address, else None (absent or garbage:
    the join's source address is used)."""
    if not isinstance(text, str) or not text:
        return None
    try:
        return str(ipaddress.IPv4Address(text))
    except ValueError:
        return None


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


class RendezvousServer:
    """Serves `rounds` on bind:0 in background threads until close()."""

    def __init__(self, rounds, secret, bind="127.0.0.1"):
        self._server = _Server((bind, 0), _Handler)
        self._server.rounds = rounds
        self._server.secret = secret
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.2}, daemon=True)
        self._thread.start()

    def address(self, host):
        """ZEN_ELASTIC_RENDEZVOUS for a worker that reaches zenrun as `host`."""
        return f"{host}:{self.port}"

    def close(self):
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5.0)


def advertised_host(worker_host, is_local):
    """How a worker on worker_host reaches zenrun's machine."""
    return "127.0.0.1" if is_local(worker_host) else socket.gethostname()
