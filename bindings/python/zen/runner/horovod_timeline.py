"""HOROVOD_TIMELINE=PATH as a Horovod user's tooling reads it. Horovod writes one Chrome trace,
rank 0's (the coordinator's view: its operations and every rank's negotiation ticks), at
PATH itself; the library writes one per rank, ".rank<N>" inserted (core/runtime.cc). When the
job's timeline comes from that alias (no ZEN_TIMELINE, no --timeline-filename, which keep
Zen's naming) and rank 0 runs on this machine, zenrun makes PATH a symbolic link to rank 0's
file, so that chrome://tracing or a script opening PATH reads rank 0's trace, valid JSON
while the job runs too (the writer keeps it so)."""

import os

from zen.common import horovod_env
from zen.runner import hosts as hostlib


def rank_path(path, rank):
    """core/runtime.cc's rankPath: "/x/t.json" -> "/x/t.rank0.json", "/x/t" -> "/x/t.rank0"."""
    folder, name = os.path.split(path)
    stem, dot, ext = name.rpartition(".")
    if not dot or not stem:  # no extension, or a leading dot only (".trace")
        return path + ".rank%d" % rank
    return os.path.join(folder, "%s.rank%d.%s" % (stem, rank, ext))


def link_rank0(env, rank0_host):
    """Makes HOROVOD_TIMELINE's PATH (env: the ranks' environment) a link to rank 0's file
    where it applies; returns a message when the link could not be made, else None."""
    path, source = horovod_env.lookup(env, "ZEN_TIMELINE")
    if source != "HOROVOD_TIMELINE" or not path or path == "DYNAMIC" or \
            not hostlib.is_local(rank0_host):
        return None
    path = os.path.abspath(path)  # local ranks start in this directory
    temporary = path + ".zenrun-link"
    try:
        if os.path.lexists(temporary):
            os.unlink(temporary)
        os.symlink(os.path.basename(rank_path(path, 0)), temporary)
        os.replace(temporary, path)  # Horovod overwrites PATH too
    except OSError as e:
        return (f"HOROVOD_TIMELINE={path}: cannot link it to rank 0's trace "
                f"({e.strerror}); the ranks' traces are {rank_path(path, 0)} and its siblings")
    return None
