"""Zen: sparse-gradient synchronization (Python side).

Kept import-light on purpose: `import zen` loads nothing else. The launcher lives in
`zen.runner` (the `zenrun` command, tools/zenrun); the framework bindings `zen.torch` and
`zen.tensorflow` (and `zen.common`, what they share) are separate subpackages imported on
demand.
"""

__version__ = "0.1.0"  # keep in step with project(zen VERSION ...) in CMakeLists.txt
