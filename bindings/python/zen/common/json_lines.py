"""One JSON object per line over a socket: the wire format of zenrun's elastic rendezvous
(zen.runner.rendezvous_server and its client, zen.common.elastic_rendezvous)."""

import json

# A request or reply is a few hundred bytes; a longer line is a stray client, not the protocol.
MAX_LINE = 1 << 16


def write(stream, obj):
    """Writes obj as one line to a binary stream (socket.makefile("rwb")) and flushes."""
    stream.write(json.dumps(obj, separators=(",", ":")).encode() + b"\n")
    stream.flush()


def read(stream):
    """The next line's object (a dict), or None at end of stream. Raises ValueError for a line
    that is not a JSON object or is longer than MAX_LINE; socket.timeout as the stream does."""
    line = stream.readline(MAX_LINE + 1)
    if not line:
        return None
    if len(line) > MAX_LINE or not line.endswith(b"\n"):
        raise ValueError("line longer than %d bytes or cut short" % MAX_LINE)
    obj = json.loads(line.decode())
    if not isinstance(obj, dict):
        raise ValueError("expected a JSON object, found %r" % line[:80])
    return obj
