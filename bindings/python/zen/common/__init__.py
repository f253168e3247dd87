"""What the framework bindings share and need no framework for: libzen.so through ctypes
(zen.common.basics: init, shutdown, rank, size, ..., stats, timeline), process sets
(zen.common.process_sets: ProcessSet, add_process_set, ...), the reduce operations'
numbering (Horovod's) and the compressors' framework-independent logic
(zen.common.compression)."""
