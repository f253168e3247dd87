"""What the framework bindings share and need no framework for: libzen.so through ctypes
(zen.common.basics: init, shutdown, rank, size, ..., stats, timeline, and the build and
launch queries is_homogeneous, mpi_built, nccl_built, ...), process sets
(zen.common.process_sets: ProcessSet, add_process_set, ...), the reduce operations'
numbering (Horovod's), the compressors' framework-independent logic
(zen.common.compression) and broadcast_object / allgather_object's (zen.common.objects)."""
