"""zen.run: Horovod's horovod.run, the launcher as a Python function.

run(func, args, kwargs, num_proc=N, ...) is `zenrun -np N ... python3 -m
zen.runner.run_task`: the keyword arguments become zenrun's flags (the same checks, the same
placement, TCP or MPI mode, remote hosts over ssh), func(*args, **kwargs) travels to every
rank cloudpickled in the environment and each rank's outcome comes back on its stdout
(run_task.py says how). Returns the ranks' return values, ordered by rank; a rank that
raised fails the call with RunError naming it and its error.
"""

import base64
import os
import secrets
import signal
import site
import sys

from zen.runner import args as arglib
from zen.runner import run_task
from zen.runner.launch import launch
from zen.runner.output import Output

# The environment holds the function in variables of at most this many characters each
# (Linux: 128 KiB per variable) and, with everything else, at most ARG_MAX (2 MiB by
# default) when a rank starts.
_CHUNK = 100_000
_MAX_TASK = 1 << 20

# Horovod's run arguments that zenrun has no fixed-size counterpart for: elastic jobs
# restart workers, which would run func again from its start with no single result per rank.
_ELASTIC = ("min_num_proc", "max_num_proc", "min_np", "max_np", "slots", "reset_limit",
            "cooldown_range")


class RunError(RuntimeError):
    """A zen.run job failed: `rank` (None when no rank reported an error) raised `error`
    (None when it could not be pickled; `traceback` holds its text either way)."""

    def __init__(self, message, rank=None, error=None, traceback=None):
        super().__init__(message)
        self.rank, self.error, self.traceback = rank, error, traceback


def _flags(num_proc, hosts, hostfile, start_timeout, ssh_port, ssh_identity_file,
           disable_cache, output_filename, verbose, use_gloo, use_mpi, mpi_args,
           network_interface):
    """zenrun's flags for Horovod's run arguments (None: not given)."""
    if use_gloo and use_mpi:
        raise ValueError("zen.run: use_gloo and use_mpi exclude each other")
    if hosts is not None and hostfile is not None:
        raise ValueError("zen.run: hosts and hostfile exclude each other")
    flags = ["-np", str(num_proc)]
    for flag, value in (("-H", hosts), ("--hostfile", hostfile),
                        ("--start-timeout", start_timeout), ("-p", ssh_port),
                        ("-i", ssh_identity_file), ("--output-filename", output_filename),
                        ("--mpi-args", mpi_args), ("--network-interface", network_interface)):
        if value is not None:
            flags += [flag, str(value)]
    for flag, value in (("--disable-cache", disable_cache), ("--verbose", verbose),
                        ("--tcp", use_gloo), ("--mpi", use_mpi)):
        if value:
            flags.append(flag)
    return flags


def _pythonpath(environ):
    """environ's PYTHONPATH with the folder this zen was imported from in front, so that the
    ranks import the same zen even where the caller found it through sys.path alone; not for
    an installed zen, whose site-packages is on every interpreter's path already (and before
    the standard library it could shadow modules)."""
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    parts = [p for p in environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    installed = set(site.getsitepackages() + [site.getusersitepackages()])
    if here in parts or here in installed:
        return None
    return os.pathsep.join([here] + parts)


def _task_env(func, args, kwargs, token):
    """The ZENRUN_TASK_* variables that carry func and its arguments."""
    try:
        import cloudpickle
    except ImportError:
        raise ImportError("zen.run needs cloudpickle to send func to the ranks (Debian: "
                          "python3-cloudpickle; pip install cloudpickle)") from None
    text = base64.b64encode(cloudpickle.dumps((func, tuple(args), dict(kwargs)))).decode()
    if len(text) > _MAX_TASK:
        raise ValueError(f"zen.run: func with its arguments pickles to {len(text)} base64 "
                         f"bytes; the ranks' environment carries at most {_MAX_TASK}: pass "
                         f"large data through files and let func read them")
    chunks = [text[i:i + _CHUNK] for i in range(0, len(text), _CHUNK)]
    env = {f"{run_task.TASK_PREFIX}{i}": c for i, c in enumerate(chunks)}
    env[run_task.CHUNKS_VARIABLE] = str(len(chunks))
    env[run_task.TOKEN_VARIABLE] = token
    return env


def _result_output(token, outcomes, signals):
    """An Output that keeps the ranks' result lines (in the order they arrive) from the
    printed output, and the signal that stopped the job (if one did) in signals."""

    class ResultOutput(Output):
        def stopped_by(self, sig, text):
            signals.append(sig)
            super().stopped_by(sig, text)

        def rank_line(self, rank, stream, line):
            found = run_task.parse_result_line(line, token) if stream == "stdout" else None
            if found is None:
                super().rank_line(rank, stream, line)
                return
            before, payload = found
            if before:
                super().rank_line(rank, stream, before)
            outcomes.append((rank, payload))

    return ResultOutput


def run(func, args=(), kwargs=None, num_proc=None, min_num_proc=None, max_num_proc=None,
        slots=None, reset_limit=None, cooldown_range=None, hosts=None, hostfile=None,
        start_timeout=None, ssh_port=None, ssh_identity_file=None, disable_cache=None,
        output_filename=None, verbose=None, use_gloo=None, use_mpi=None, mpi_args=None,
        network_interface=None, executable=None, env=None, np=None, min_np=None,
        max_np=None):
    """Runs func(*args, **kwargs) on num_proc (or np) ranks launched as zenrun launches them;
    returns the list of their return values, index = rank. Arguments as Horovod's run (each
    is zenrun's flag of the same name); env: the ranks' environment (default os.environ),
    executable: the Python that runs them (default sys.executable). Raises RunError when a
    rank raises (naming it; chained to its exception) or the job fails, ValueError for
    arguments zenrun refuses, KeyboardInterrupt (after stopping the ranks) on Ctrl-C."""
    if not callable(func):
        raise TypeError(f"zen.run: func must be callable, not {type(func).__name__}")
    given = {name: value for name, value in locals().items() if name in _ELASTIC}
    elastic = sorted(name for name, value in given.items() if value is not None)
    if elastic:
        raise ValueError(f"zen.run: {', '.join(elastic)} not supported: zen.run runs "
                         f"fixed-size jobs only (an elastic job restarts workers, which would "
                         f"run func again with no single result per rank); run a script "
                         f"with zen.torch.elastic under zenrun --min-np/--max-np instead")
    if num_proc is not None and np is not None and num_proc != np:
        raise ValueError(f"zen.run: num_proc={num_proc} and np={np} disagree (np is its old "
                         f"name)")
    size = num_proc if num_proc is not None else np if np is not None else 1  # Horovod's 1
    flags = _flags(size, hosts, hostfile, start_timeout, ssh_port,
                   ssh_identity_file, disable_cache, output_filename, verbose, use_gloo,
                   use_mpi, mpi_args, network_interface)
    command = [executable or sys.executable, "-m", "zen.runner.run_task"]
    environ = dict(os.environ if env is None else env)
    try:
        parsed = arglib.parse(flags + ["--"] + command, raise_errors=True, environ=environ)
    except arglib.UsageError as e:
        raise ValueError(f"zen.run: {e}") from None

    token = secrets.token_hex(8)
    environ.update(_task_env(func, args, kwargs or {}, token))
    path = _pythonpath(environ)
    if path is not None:
        environ["PYTHONPATH"] = path
    outcomes, signals = [], []
    try:
        code = launch(parsed, environ, _result_output(token, outcomes, signals))
    except arglib.UsageError as e:  # the placement's checks (hosts, hostfile)
        raise ValueError(f"zen.run: {e}") from None
    if signals == [signal.SIGINT]:
        # Ctrl-C: the ranks are stopped by now; the caller sees it as Horovod's run lets it
        # through, not as a failed job.
        raise KeyboardInterrupt
    return _results(parsed.num_proc, code, outcomes)


def _load(cloudpickle, rank, payload, what):
    try:
        return cloudpickle.loads(payload)
    except Exception as e:
        raise RunError(f"zen.run: rank {rank}'s {what} cannot be unpickled here: "
                       f"{type(e).__name__}: {e}", rank) from e


def _results(size, code, outcomes):
    import cloudpickle  # present: _task_env needed it

    values, errors = {}, []
    for rank, payload in outcomes:
        outcome = _load(cloudpickle, rank, payload, "result")
        if "value" in outcome:
            values[rank] = outcome["value"]
        else:
            errors.append((rank, outcome))
    if errors:
        rank, e = errors[0]  # the first to arrive: the others may be its consequences
        also = sorted({r for r, _ in errors[1:]} - {rank})
        more = f" (ranks {', '.join(map(str, also))} also raised)" if also else ""
        try:
            error = cloudpickle.loads(e["error"]) if e["error"] is not None else None
        except Exception:  # its class is not importable here: the text still says it
            error = None
        raise RunError(f"zen.run: rank {rank} raised {e['type']}: {e['message']}{more}\n"
                       f"{e['traceback']}", rank, error, e["traceback"]) from error
    missing = [r for r in range(size) if r not in values]
    if code != 0 or missing:
        why = (f"zenrun's exit code {code}: its message above names the rank" if code
               else "every rank exited with code 0")
        lost = f"; no result from rank{'s' if len(missing) > 1 else ''} " \
            f"{', '.join(map(str, missing))}" if missing else ""
        raise RunError(f"zen.run: the job failed ({why}){lost}")
    return [values[r] for r in range(size)]
