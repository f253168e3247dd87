"""Zen: sparse-gradient synchronization (Python side).

Kept import-light on purpose: `import zen` loads nothing else. The launcher lives in
`zen.runner` (the `zenrun` command, tools/zenrun); the framework bindings `zen.torch` and
`zen.tensorflow` (and `zen.common`, what they share) are separate subpackages imported on
demand. `zen.run` (Horovod's horovod.run: a function run on N launched ranks) is
zen.runner's, loaded when first used.
"""

__version__ = "0.1.0"  # keep in step with project(zen VERSION ...) in CMakeLists.txt


def __getattr__(name):
    if name == "run":
        from zen.runner.run_func import run

        return run
    raise AttributeError(f"module 'zen' has no attribute '{name}'")
