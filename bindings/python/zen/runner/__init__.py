"""zen.runner: the `zenrun` launcher (tools/zenrun; README "Launching jobs with zenrun").

Modules: args (flags -> ZEN_* variables), hosts (host lists, Horovod's rank placement),
tcp_run (zenrun starts the ranks, locally or through a launch command such as ssh), mpi_run
(through mpirun), supervisor (output, start reports, failures, signals), rank_wrapper (the
standalone per-rank wrapper), check_build (--check-build), launch (main); elastic mode:
elastic_driver (workers, exits, host changes), elastic_rounds (membership, generations,
rounds), rendezvous_server (its wire), discovery (--host-discovery-script); zen.run
(Horovod's horovod.run): run_func (the caller's side), run_task (the ranks').
Importing the package loads none of them; `run` and `RunError` load run_func when first used.
"""


def __getattr__(name):
    if name in ("run", "RunError"):
        from zen.runner import run_func

        return getattr(run_func, name)
    raise AttributeError(f"module 'zen.runner' has no attribute '{name}'")


def main(argv=None):
    """Runs zenrun with `argv` (default sys.argv[1:]); returns its exit code."""
    from zen.runner.launch import main as _main

    return _main(argv)
