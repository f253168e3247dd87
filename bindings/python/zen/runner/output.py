"""Rank output: whole lines, prefixed `[rank]<stdout>:` / `[rank]<stderr>:` as horovodrun
does, written under one lock so lines from different ranks never interleave, optionally
copied (unprefixed) to DIR/rank.N/{stdout,stderr} (--output-filename, Horovod's layout);
with timestamps, each prefix begins with the local time as time.asctime() writes it
(horovodrun --prefix-output-with-timestamp)."""

import os
import sys
import threading
import time

from zen.runner.rank_wrapper import KILLED_PREFIX, READY_PREFIX


class Output:
    def __init__(self, num_ranks, log_dir=None, timestamps=False):
        self._lock = threading.Lock()
        self._timestamps = timestamps
        self._streams = {"stdout": sys.stdout.buffer, "stderr": sys.stderr.buffer}
        self._broken = set()
        self._logs = {}
        self._width = len(str(max(num_ranks - 1, 0)))
        self._log_dir = log_dir

    def open_logs(self, ranks):
        """Creates DIR/rank.N/ for each rank; raises OSError when the folder is unusable."""
        if not self._log_dir:
            return
        for rank in ranks:
            folder = os.path.join(self._log_dir, f"rank.{rank:0{self._width}d}")
            os.makedirs(folder, exist_ok=True)
            for stream in ("stdout", "stderr"):
                self._logs[(rank, stream)] = open(os.path.join(folder, stream), "wb")

    def close_logs(self):
        with self._lock:
            for f in self._logs.values():
                f.close()
            self._logs.clear()

    def _write(self, stream, data):
        if stream in self._broken:
            return
        out = self._streams[stream]
        try:
            out.write(data)
            out.flush()
        except (BrokenPipeError, ValueError):
            self._broken.add(stream)  # our reader went away: keep draining the ranks

    def rank_line(self, rank, stream, line):
        """One line (bytes, newline added if missing) of `rank`'s `stream`."""
        if not line.endswith(b"\n"):
            line += b"\n"
        stamp = time.asctime() if self._timestamps else ""
        with self._lock:
            self._write(stream, f"{stamp}[{rank}]<{stream}>:".encode() + line)
            log = self._logs.get((rank, stream))
            if log is not None:
                log.write(line)
                log.flush()

    def raw(self, stream, line):
        """A line that belongs to no rank (mpirun's own messages), passed through."""
        if not line.endswith(b"\n"):
            line += b"\n"
        with self._lock:
            self._write(stream, line)

    def message(self, text):
        """zenrun's own one-line messages, on stderr."""
        with self._lock:
            self._write("stderr", f"zenrun: {text}\n".encode())

    def stopped_by(self, sig, text):
        """The job was stopped because zenrun received `sig` (text says so); zen.run's output
        hears it here, to raise the caller's KeyboardInterrupt on SIGINT."""
        self.message(text)


def is_ready_line(line, token):
    """(True, rank text) when `line` is the wrapper's start report for this job's token."""
    words = line.rstrip(b"\r\n").split(b" ")
    if len(words) == 3 and words[0] == READY_PREFIX.encode() and words[1] == token.encode():
        return True, words[2].decode(errors="replace")
    return False, None


def killed_signal(line, token):
    """(the output before it, the signal number) when `line` holds a remote wrapper's report of
    its rank's death by a signal for this job's token, else None. The report may follow output
    the rank left without a newline (the wrapper cannot see the rank's last byte: the rank
    writes to the same stdout directly)."""
    head = f"{KILLED_PREFIX} {token} ".encode()
    at = line.rfind(head)
    if at < 0:
        return None
    words = line[at + len(head):].rstrip(b"\r\n").split(b" ")
    if len(words) == 2 and words[1].isdigit():
        return line[:at], int(words[1])
    return None
