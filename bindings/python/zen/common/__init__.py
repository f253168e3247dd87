"""What the framework bindings share and need no framework for: libzen.so through ctypes
(zen.common.basics: init, shutdown, rank, size, ..., stats, timeline), the reduce
operations' numbering (Horovod's) and the compressors' framework-independent logic
(zen.common.compression)."""
