"""What the framework bindings share and need no framework for: libzen.so through ctypes
(zen.common.basics: init, shutdown, rank, size, ..., stats, timeline) and the reduce
operations' numbering (Horovod's)."""
