"""What the ranks of the zen.torch and zen.tensorflow tests share (torch_checks.py,
tf_checks.py, torch_train.py, tf_train.py, ...): the checkout's package on sys.path, the list
of checks, a check's report, the line rank_jobs.py reads back, the loops over the checks and
over the training schemes, and expect_raises. Standard library only: it serves either
framework."""

import json
import os
import sys
import traceback

PREFIX = "ZENTEST "
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def add_checkout_package():
    """Puts the checkout's bindings/python on sys.path, for the scripts to call before they
    import zen. The checkout's package last: PYTHONPATH (CTest's staged copy in its build
    directory) first."""
    sys.path.append(os.path.join(ROOT, "bindings", "python"))


class Checks(list):
    """A script's checks in the order they are defined: check, the decorator, adds one. The
    scripts bind it as `check` (check = CHECKS.check): rank_jobs.check_names finds the
    checks by that decorator's name without importing the script."""

    def check(self, fn):
        self.append(fn)
        return fn


def barrier_if_running(hvd):
    """run_checks' default after(): a barrier while the daemon runs (a check may shut it
    down), a failing one passed over (a stopped daemon: the later checks report it)."""
    if hvd.is_initialized():
        try:
            hvd.barrier()
        except Exception:  # noqa: BLE001 - a stopped daemon: later checks report it
            pass


def report(name, fn):
    """Runs fn() and prints `ZENTEST {"check": name, "ok": ..., "error": ...}`, the error
    being the traceback when fn raised."""
    result = {"check": name, "ok": True, "error": None}
    try:
        fn()
    except Exception:  # noqa: BLE001 - reported to the test
        result = {"check": name, "ok": False, "error": traceback.format_exc()}
    print(PREFIX + json.dumps(result), flush=True)


def run_checks(hvd, checks, names, after=None):
    """Between hvd.init() and hvd.shutdown() (hvd: zen.torch or zen.tensorflow), reports
    each of checks (a Checks: functions, named by __name__) that names holds, or all when
    names is empty, in order; after() runs after each (a barrier keeping the ranks in step;
    barrier_if_running(hvd) when None). Returns 0, the exit code."""
    if after is None:
        def after():
            barrier_if_running(hvd)
    hvd.init()
    for fn in checks:
        if not names or fn.__name__ in names:
            report(fn.__name__, fn)
            after()
    hvd.shutdown()
    return 0


def train_schemes(hvd, schemes, reference, variants):
    """The training tests: want = reference() (one process, no zen), then for each scheme
    the daemon started anew (ZEN_SCHEME, hvd.init) and each of variants(scheme, want), a
    list of (check name, function), reported with a barrier after, then hvd.shutdown().
    Returns 0, the exit code."""
    want = reference()
    for scheme in schemes:
        os.environ["ZEN_SCHEME"] = scheme
        hvd.init()
        try:
            for name, fn in variants(scheme, want):
                report(name, fn)
                hvd.barrier()
        finally:
            hvd.shutdown()
    return 0


def expect_raises(exc, fn, contains=None):
    """The exception fn() raised, which must be an exc whose message holds contains."""
    try:
        fn()
    except exc as e:
        if contains is not None:
            assert contains in str(e), "%r not in %r" % (contains, str(e))
        return e
    raise AssertionError("%s was not raised" % exc.__name__)
