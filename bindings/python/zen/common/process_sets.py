"""Process sets (Horovod's), for zen.torch and zen.tensorflow alike: ProcessSet,
global_process_set, add_process_set, remove_process_set and init's process_sets, over
libzen.so's zen_add_process_set, zen_remove_process_set and zen_process_set_ranks (ctypes).

The rules (the daemon's, bindings/c_api.h "Process sets"):
* add_process_set and remove_process_set are collectives of the whole job: every rank calls
  them, in the same order, with the same ranks. Each returns once the set exists (is gone) on
  every rank, or raises on every rank (ranks that differ between the ranks, a duplicate, a
  rank outside the job), within ZEN_TIMEOUT.
* A collective over a set is called by its members only (others get ValueError at once).
* Broadcast's root_rank is the root's rank in the job, as Horovod's, and must be a member;
  the other rank numbers a collective over a set takes or returns (alltoall's splits, the
  order of allgather's rows) are ranks within the set: positions in its ascending ranks,
  ProcessSet.rank(), as Horovod's. (The C API takes the root within the set too.)
* join is global only; barrier(process_set) is an allreduce-free barrier of the set.
"""

import ctypes
import threading
import warnings

from zen.common import basics

# The C API's codes this module tells apart (bindings/c_api.h zen_code_t).
_INVALID_ARGUMENT = 1
_NOT_INITIALIZED = 16


class ProcessSet:
    """A set of the job's ranks that runs collectives together (Horovod's ProcessSet).

    Build it from a list of ranks, then pass it to init(process_sets=[...]) or
    add_process_set(); process_set_id is set then (None before, and after
    remove_process_set). Compared by identity, as Horovod's."""

    process_set_id = None
    ranks = None
    mpi_comm = None  # Horovod's sets from an MPI communicator are not in Zen

    def __init__(self, ranks):
        try:
            ranks = sorted(ranks)
        except TypeError:
            raise ValueError("ProcessSet should be initialized with a list of process ranks, "
                             "not %r" % (ranks,)) from None
        if any(not isinstance(r, int) or isinstance(r, bool) for r in ranks):
            raise ValueError("ProcessSet should be initialized with a list of process ranks "
                             "(ints), not %r" % (ranks,))
        self.ranks = ranks

    def _invalidate(self):
        self.process_set_id = None

    def size(self):
        """How many ranks the set has, or None before it is added."""
        if self.process_set_id is None:
            return None
        return len(self.ranks)

    def rank(self):
        """This process's rank within the set (its position in ranks), or None before the set
        is added; ValueError on a rank that is not a member."""
        if self.process_set_id is None:
            return None
        me = basics.rank()
        if me not in self.ranks:
            raise ValueError("rank %d is not a member of %s" % (me, self))
        return self.ranks.index(me)

    def included(self):
        """Whether this process is a member, or None when the set has no ranks yet."""
        if self.ranks is None:
            return None
        return basics.rank() in self.ranks

    def __str__(self):
        return "ProcessSet(process_set_id=%s, ranks=%s, mpi_comm=%s)" % (
            self.process_set_id, self.ranks, self.mpi_comm)

    __repr__ = __str__


# Every rank; its ranks are filled by init (Horovod's global_process_set).
global_process_set = ProcessSet([])
global_process_set.process_set_id = 0

_lock = threading.Lock()
_added = []  # the sets added since init, invalidated at shutdown


def _setup_lib():
    c = basics.lib()
    if not getattr(c, "_zen_process_sets", False):
        c.zen_add_process_set.restype = ctypes.c_int
        c.zen_add_process_set.argtypes = [ctypes.POINTER(ctypes.c_int32), ctypes.c_int32,
                                          ctypes.POINTER(ctypes.c_int32)]
        c.zen_remove_process_set.restype = ctypes.c_int
        c.zen_remove_process_set.argtypes = [ctypes.c_int32]
        c.zen_process_set_ranks.restype = ctypes.c_int
        c.zen_process_set_ranks.argtypes = [ctypes.c_int32, ctypes.POINTER(ctypes.c_int32),
                                            ctypes.c_int32, ctypes.POINTER(ctypes.c_int32)]
        c._zen_process_sets = True
    return c


def _raise(code, what):
    message = "%s: %s" % (what, basics.last_error())
    if code in (_INVALID_ARGUMENT, _NOT_INITIALIZED):
        raise ValueError(message)
    raise RuntimeError(message)


def process_set_ranks(process_set_id):
    """The daemon's ranks of set process_set_id (ascending); ValueError for an unknown id."""
    c = _setup_lib()
    count = ctypes.c_int32()
    code = c.zen_process_set_ranks(process_set_id, None, 0, ctypes.byref(count))
    if code != 0:
        _raise(code, "process set %d" % process_set_id)
    ranks = (ctypes.c_int32 * max(count.value, 1))()
    code = c.zen_process_set_ranks(process_set_id, ranks, count.value, ctypes.byref(count))
    if code != 0:
        _raise(code, "process set %d" % process_set_id)
    return list(ranks[:count.value])


def add_process_set(process_set):
    """Registers process_set (a ProcessSet, or a list of ranks) on every rank and returns the
    ProcessSet, its process_set_id set. A collective of the whole job: every rank calls it, in
    the same order, with the same ranks; raises on every rank otherwise (ValueError)."""
    if not isinstance(process_set, ProcessSet):
        process_set = ProcessSet(process_set)
    if process_set.process_set_id is not None:
        raise ValueError("Attempted to add a process set that has already been added: %s" %
                         process_set)
    c = _setup_lib()
    ranks = (ctypes.c_int32 * max(len(process_set.ranks), 1))(*process_set.ranks)
    new_id = ctypes.c_int32(-1)
    # ctypes releases the GIL: the daemon's thread and other Python threads keep running.
    code = c.zen_add_process_set(ranks, len(process_set.ranks), ctypes.byref(new_id))
    if code != 0:
        _raise(code, "add_process_set(%s)" % process_set.ranks)
    process_set.process_set_id = new_id.value
    with _lock:
        _added.append(process_set)
    return process_set


def remove_process_set(process_set):
    """Removes process_set on every rank (a collective of the whole job, as add_process_set)
    and invalidates it; True when it was removed. False, as Horovod, for the global set and a
    set never added or already removed (nothing is posted then); False with a warning when the
    daemon refused it (an id it does not know). Raises RuntimeError when the job failed."""
    process_set_id = process_set.process_set_id
    if process_set_id is None or process_set_id == 0:
        return False
    code = _setup_lib().zen_remove_process_set(process_set_id)
    process_set._invalidate()
    with _lock:
        if process_set in _added:
            _added.remove(process_set)
    if code == 0:
        return True
    if code == _INVALID_ARGUMENT:
        warnings.warn("remove_process_set(%d): %s" % (process_set_id, basics.last_error()))
        return False
    _raise(code, "remove_process_set(%d)" % process_set_id)


def init(process_sets=None):
    """After basics.init(): the global set's ranks, then process_sets (ProcessSet objects or
    rank lists) added in order; the ProcessSet objects get their ids. Returns the added sets."""
    global_process_set.ranks = list(range(basics.size()))
    return [add_process_set(ps) for ps in (process_sets or [])]


def invalidate_all():
    """At shutdown: the added sets' ids mean nothing to the next runtime."""
    with _lock:
        added = list(_added)
        _added.clear()
    for ps in added:
        ps._invalidate()


def process_set_id(process_set, what, members_only=True):
    """The id a collective `what` runs over: 0 for the global set (or None); ValueError for
    a set never added or already removed, and (members_only) on a rank that is not a
    member."""
    if process_set is None or process_set is global_process_set:
        return 0
    if not isinstance(process_set, ProcessSet):
        raise ValueError("%s: process_set must be a ProcessSet (add_process_set), not %r" %
                         (what, process_set))
    if process_set.process_set_id is None:
        raise ValueError("%s: %s has not been added (add_process_set, init(process_sets=...)) "
                         "or has been removed" % (what, process_set))
    if members_only and process_set.process_set_id != 0 and not process_set.included():
        raise ValueError("%s: rank %d is not a member of %s; only its members call its "
                         "collectives" % (what, basics.rank(), process_set))
    return process_set.process_set_id


def set_rank(process_set):
    """This rank within process_set (None: the global set)."""
    if process_set is None or process_set.process_set_id == 0:
        return basics.rank()
    return process_set.rank()


def root_in_set(process_set, root_rank, what):
    """A root given as a rank of the job (Horovod's broadcast root_rank, over a set too) ->
    its rank within process_set, which the daemon takes; ValueError when it is not a member."""
    if not isinstance(root_rank, int) or isinstance(root_rank, bool) or root_rank < 0:
        raise ValueError("%s: root_rank must be a rank, not %r" % (what, root_rank))
    if process_set is None or process_set.process_set_id == 0:
        return root_rank
    if root_rank not in process_set.ranks:
        raise ValueError("%s: root_rank %d is not a member of %s" % (what, root_rank,
                                                                    process_set))
    return process_set.ranks.index(root_rank)


def set_size(process_set):
    """process_set's size (None: the global set)."""
    if process_set is None or process_set.process_set_id == 0:
        return basics.size()
    return process_set.size()


def init_job(who, comm=None, process_sets=None):
    """Horovod's init(comm, process_sets) for zen.torch and zen.tensorflow (who: the calling
    function): basics.init(), then init(process_sets) when this call started the daemon. Sets
    are added once, by the call that starts the job: passing them to an initialized zen
    raises ValueError (add_process_set adds more)."""
    basics.check_init_args(who, comm)
    started = not basics.is_initialized()
    if not started and process_sets:
        raise ValueError("%s: zen is already initialized; add process sets with "
                         "add_process_set" % who)
    basics.init()
    if started:
        init(process_sets)


def rank_and_size(process_set_id):
    """(this rank within set process_set_id, the set's size), asked of the daemon: for code
    that knows only the id (zen.tensorflow's gradient functions read it from the op)."""
    if process_set_id == 0:
        return basics.rank(), basics.size()
    ranks = process_set_ranks(process_set_id)
    me = basics.rank()
    if me not in ranks:
        raise ValueError("rank %d is not a member of process set %d" % (me, process_set_id))
    return ranks.index(me), len(ranks)
