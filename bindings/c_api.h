#pragma once

/* Zen's C API: what framework bindings (zen.torch, zen.tensorflow) and C programs call. It is
 * a thin layer over one process-wide zen::bindings::Api (bindings/api.h) that holds the
 * runtime (the daemon of this rank) and the table of handles; that object is the only state
 * the library keeps for the process. Link with libzen.so (target zen_shared).
 *
 * Usage:
 *   zen_init();                                        // ZEN_* / zenrun / mpirun environment
 *   zen_tensor_t t = {data, ZEN_FLOAT32, 2, shape};
 *   zen_handle_t h;
 *   if (zen_enqueue_allreduce("fc.weight", &t, &t, ZEN_AVERAGE, ZEN_NO_COMPLETION, &h))
 *     fprintf(stderr, "%s\n", zen_last_error());
 *   zen_wait(h, -1);                                   // or zen_poll, or a completion
 *   zen_release(h);
 *   zen_shutdown();
 *
 * Errors: every call that can fail returns a zen_code_t (0 = ZEN_OK); zen_last_error() then
 * holds the message (per thread). Operations themselves fail through zen_wait's return value
 * (the daemon's status: mismatched dtypes or shapes between ranks, a failed peer, shutdown).
 *
 * Memory: enqueue never copies tensors: the caller keeps every buffer it passes (inputs,
 * outputs, indices, values, shapes and splits may be freed after the call) alive and
 * unchanged until the operation completes. Outputs whose size only the collective knows
 * (sparse result, gathered tensor, alltoall's output) are owned by the handle and readable
 * until zen_release.
 *
 * GPU tensors: set device_type = ZEN_DEVICE_CUDA and device_index (zero-initialized fields
 * mean host memory). The daemon runs them on its own CUDA stream once they are ready: after
 * ready_event (a cudaEvent_t) if given, else after the work queued so far on `stream` (a
 * cudaStream_t, say the framework's current stream; the daemon records an event there during
 * the enqueue call), else at once. When the operation completes, the outputs are written
 * (zen_wait returns after the device finished). A build without CUDA refuses them
 * (ZEN_INVALID_ARGUMENT, "built without CUDA"). Results of CUDA inputs stay on their device,
 * in the daemon's cudaMalloc'd memory, freed by zen_release: the gathered tensor
 * (zen_gathered_t's device_type and device_index) and the sparse result
 * (zen_sparse_result_placed; zen_sparse_result, which promises host memory, refuses it).
 *
 * Threads: any thread may call any function. Completions run on the background thread (for
 * GPU tensors: the daemon's finalizer thread), after the outputs are readable, possibly
 * before the enqueue call returns; they must be quick and must not wait on handles. */

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define ZEN_C_EXPORT __attribute__((visibility("default")))
#else
#define ZEN_C_EXPORT
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* 3: alltoall and reducescatter (zen_op_t gained splits and num_splits).
 * 4: zen_sparse_result_placed; the sparse result of CUDA inputs stays on their device
 *    (zen_sparse_result refuses it with ZEN_INVALID_ARGUMENT).
 * 5: ZEN_ADASUM.
 * 6: process sets (zen_add_process_set, zen_remove_process_set, zen_process_set_ranks;
 *    zen_op_t gained process_set).
 * 7: zen_is_homogeneous, zen_mpi_threads_supported, zen_mpi_built, zen_nccl_built. */
#define ZEN_C_API_VERSION 7

/* Codes 1..8 are the daemon's status codes (zen::StatusCode). */
typedef enum zen_code {
  ZEN_OK = 0,
  ZEN_INVALID_ARGUMENT = 1, /* bad input: dtype, shape, name in flight, index out of range */
  ZEN_OUT_OF_RANGE = 2,
  ZEN_FAILED_PRECONDITION = 3,
  ZEN_TIMEOUT = 4,  /* a peer did not answer within ZEN_TIMEOUT */
  ZEN_IO_ERROR = 5, /* a transport or peer failed */
  ZEN_ABORTED = 6,  /* the job shut down while the operation was pending */
  ZEN_INTERNAL = 7,
  ZEN_UNIMPLEMENTED = 8,
  ZEN_NOT_INITIALIZED = 16, /* zen_init has not run, or zen_shutdown has */
  ZEN_UNKNOWN_HANDLE = 17,  /* never issued, or released */
  ZEN_PENDING = 18          /* zen_wait: still running when the timeout ran out */
} zen_code_t;

typedef enum zen_dtype {
  ZEN_FLOAT32 = 0,
  ZEN_FLOAT16 = 1,
  ZEN_BFLOAT16 = 2,
  ZEN_FLOAT64 = 3,
  ZEN_INT32 = 4,
  ZEN_INT64 = 5
} zen_dtype_t;

/* Dense allreduce and reducescatter take the first five; sparse allreduce ZEN_SUM and
 * ZEN_AVERAGE only (others are refused at enqueue). Min/max/product: every rank gets identical
 * bits; 16-bit floats are reduced in fp32 on the CPU; int32/int64 products wrap like two's
 * complement. ZEN_ADASUM (Horovod's Adasum): dense allreduce of host floating-point tensors
 * on a power-of-two number of ranks only, computed in fp64, identical bits on every rank;
 * anything else is refused at enqueue (CUDA tensors with ZEN_UNIMPLEMENTED). */
typedef enum zen_reduce_op {
  ZEN_SUM = 0,
  ZEN_AVERAGE = 1,
  ZEN_MIN = 2,
  ZEN_MAX = 3,
  ZEN_PRODUCT = 4,
  ZEN_ADASUM = 5
} zen_reduce_op_t;

typedef enum zen_op_kind {
  ZEN_OP_SPARSE_ALLREDUCE = 0,
  ZEN_OP_ALLREDUCE = 1,
  ZEN_OP_ALLGATHER = 2,
  ZEN_OP_BROADCAST = 3,
  ZEN_OP_JOIN = 4,
  ZEN_OP_BARRIER = 5,
  ZEN_OP_ALLTOALL = 6,
  ZEN_OP_REDUCESCATTER = 7
} zen_op_kind_t;

/* > 0; unique within the process; valid until zen_release. */
typedef int64_t zen_handle_t;

typedef enum zen_device_type { ZEN_DEVICE_CPU = 0, ZEN_DEVICE_CUDA = 1 } zen_device_type_t;

/* A dense tensor, C order, in host memory unless device_type says CUDA (see "GPU tensors"
 * above; the last four fields may stay zero for a host tensor). */
typedef struct zen_tensor {
  void* data;
  int32_t dtype; /* zen_dtype_t */
  int32_t ndims;
  const int64_t* shape; /* ndims entries; copied by enqueue */
  int32_t device_type;  /* zen_device_type_t */
  int32_t device_index; /* CUDA device ordinal */
  void* ready_event;    /* cudaEvent_t or NULL: the input is ready after it */
  void* stream;         /* cudaStream_t or NULL: the input is ready after its queued work */
} zen_tensor_t;

/* A row-sparse COO tensor: nnz row indices into [0, num_rows), which may repeat (repeated
 * rows are summed), and their rows, values[nnz x row_size]. indices and values live on the
 * same device (the device fields as in zen_tensor_t). */
typedef struct zen_sparse_tensor {
  const int64_t* indices;
  const void* values;
  int64_t nnz;
  int64_t num_rows;
  int64_t row_size;
  int32_t dtype; /* zen_dtype_t */
  int32_t device_type;
  int32_t device_index;
  void* ready_event;
  void* stream;
} zen_sparse_tensor_t;

/* Runs on the background thread when the operation ends; message is "" on success and valid
 * only during the call. */
typedef void (*zen_callback_fn)(zen_handle_t handle,
                                int32_t code,
                                const char* message,
                                void* user_data);
typedef struct zen_completion {
  zen_callback_fn fn; /* NULL: none */
  void* user_data;
} zen_completion_t;
#ifdef __cplusplus
#define ZEN_NO_COMPLETION (zen_completion_t{nullptr, nullptr})
#else
#define ZEN_NO_COMPLETION ((zen_completion_t){NULL, NULL})
#endif

/* ---- lifecycle and placement ---- */

/* Builds this rank's runtime from the environment: ZEN_RANK/ZEN_SIZE/ZEN_CONTROLLER_ADDR
 * (zenrun, TCP), else mpirun's placement (MPI), else a job of one. Blocks until every rank
 * has connected (at most ZEN_TIMEOUT). Idempotent. */
ZEN_C_EXPORT int zen_init(void);
/* Stops the job on every rank (the others' pending operations fail with "shut down by rank
 * N at user request") and drops the runtime; handles stay readable. ZEN_OK when not
 * initialized; otherwise the cause the job stopped with when it was not this call. Under MPI
 * the process cannot zen_init again. */
ZEN_C_EXPORT int zen_shutdown(void);
ZEN_C_EXPORT int zen_is_initialized(void);
/* -1 (and ZEN_NOT_INITIALIZED in zen_last_error) before zen_init. */
ZEN_C_EXPORT int zen_rank(void);
ZEN_C_EXPORT int zen_size(void);
ZEN_C_EXPORT int zen_local_rank(void);
ZEN_C_EXPORT int zen_local_size(void);
ZEN_C_EXPORT int zen_cross_rank(void);
ZEN_C_EXPORT int zen_cross_size(void);
/* 1 when every host runs the same number of ranks (every rank's local size is the same), else
 * 0; the same on every rank, established once by zen_init (the ranks compare their local sizes
 * while connecting). -1 before zen_init. */
ZEN_C_EXPORT int zen_is_homogeneous(void);
/* 1 when the job runs over MPI and MPI provided MPI_THREAD_MULTIPLE (other MPI users may run
 * beside Zen's background thread), 0 otherwise (other backends included); -1 before
 * zen_init. */
ZEN_C_EXPORT int zen_mpi_threads_supported(void);
/* "tcp", "mpi", "in-process"; "" before zen_init. Static storage. */
ZEN_C_EXPORT const char* zen_backend(void);
ZEN_C_EXPORT const char* zen_version(void);
/* 1 when this libzen takes CUDA tensors (built with CUDA and NCCL), else 0. */
ZEN_C_EXPORT int zen_cuda_built(void);
/* 1 when this libzen has the MPI backend (CMake ZEN_WITH_MPI=ON), else 0. */
ZEN_C_EXPORT int zen_mpi_built(void);
/* NCCL_VERSION_CODE of the NCCL this libzen was built with (e.g. 22809 for 2.28.9), else 0. */
ZEN_C_EXPORT int zen_nccl_built(void);
/* The message of the last failed call on this thread ("" if none); valid until this
 * thread's next failing call. */
ZEN_C_EXPORT const char* zen_last_error(void);

/* ---- operations (each never waits on the network) ---- */

/* name: the same on every rank, unique among this rank's pending operations. */
/* input and output may be the same tensor (in place); output has input's dtype and size. */
ZEN_C_EXPORT int zen_enqueue_allreduce(const char* name,
                                       const zen_tensor_t* input,
                                       const zen_tensor_t* output,
                                       int32_t reduce_op,
                                       zen_completion_t done,
                                       zen_handle_t* handle);
/* dense_output NULL: the result is a coalesced sparse tensor (zen_sparse_result); else the
 * dense result [num_rows x row_size] of input's dtype is written there. */
ZEN_C_EXPORT int zen_enqueue_sparse_allreduce(const char* name,
                                              const zen_sparse_tensor_t* input,
                                              int32_t reduce_op,
                                              const zen_tensor_t* dense_output,
                                              zen_completion_t done,
                                              zen_handle_t* handle);
/* Ranks may differ in the first dimension; the result is read with zen_allgather_result. */
ZEN_C_EXPORT int zen_enqueue_allgather(const char* name,
                                       const zen_tensor_t* input,
                                       zen_completion_t done,
                                       zen_handle_t* handle);
/* In place: root_rank's tensor overwrites the others'. */
ZEN_C_EXPORT int zen_enqueue_broadcast(const char* name,
                                       const zen_tensor_t* tensor,
                                       int32_t root_rank,
                                       zen_completion_t done,
                                       zen_handle_t* handle);
/* Horovod's alltoall: splits[d] rows of the first dimension go to rank d, in order
 * (num_splits == zen_size() entries summing to the first dimension; splits NULL and
 * num_splits 0: an equal split, the first dimension divisible by zen_size()). The result,
 * what every rank sent here in rank order, and the received splits are read with
 * zen_alltoall_result. Ranks may differ in the first dimension; the other dimensions and the
 * dtype must match. Bad splits on any rank fail the operation on every rank. Not while a
 * rank has joined. splits is copied by enqueue. */
ZEN_C_EXPORT int zen_enqueue_alltoall(const char* name,
                                      const zen_tensor_t* input,
                                      const int64_t* splits,
                                      int32_t num_splits,
                                      zen_completion_t done,
                                      zen_handle_t* handle);
/* Horovod's reducescatter: input (the same shape on every rank) reduced over all ranks, of
 * which this rank's piece of the first dimension is written to output, of input's dtype and
 * [zen_reducescatter_rows(rows, zen_rank(), zen_size()), ...input's other dimensions]. */
ZEN_C_EXPORT int zen_enqueue_reducescatter(const char* name,
                                           const zen_tensor_t* input,
                                           const zen_tensor_t* output,
                                           int32_t reduce_op,
                                           zen_completion_t done,
                                           zen_handle_t* handle);
/* Rows of a first dimension of `rows` that reducescatter leaves on `rank` of `size` (as
 * Horovod splits: rows / size, one more for the first rows % size ranks); -1 for a bad
 * argument. */
ZEN_C_EXPORT int64_t zen_reducescatter_rows(int64_t rows, int32_t rank, int32_t size);
/* This rank has no more data; completes when every rank has joined (zen_join_result).
 * Meanwhile it contributes the op's identity (zeros for sum and average; no rows) to the
 * others' reductions. */
ZEN_C_EXPORT int zen_enqueue_join(zen_completion_t done, zen_handle_t* handle);
ZEN_C_EXPORT int zen_enqueue_barrier(zen_completion_t done, zen_handle_t* handle);

/* One operation of a group. kind selects the fields used: name, input/output (dense ops;
 * broadcast uses input in place; alltoall and allgather input only), sparse and dense_output
 * (sparse allreduce; dense_output.data NULL for a sparse result), reduce_op, root_rank,
 * splits and num_splits (alltoall), process_set (every kind but join). The zen_enqueue_*
 * functions above run over every rank; zen_enqueue_group with a process_set runs an
 * operation over that set (see "process sets" below). */
typedef struct zen_op {
  int32_t kind; /* zen_op_kind_t */
  const char* name;
  zen_tensor_t input;
  zen_tensor_t output;
  zen_sparse_tensor_t sparse;
  zen_tensor_t dense_output;
  int32_t reduce_op;
  int32_t root_rank;
  zen_completion_t done;
  const int64_t* splits; /* alltoall: num_splits entries, or NULL for an equal split */
  int32_t num_splits;
  int32_t process_set; /* the set it runs over: 0 (zero-initialized) is every rank */
} zen_op_t;
/* All or none; a group reaches the daemon in one cycle, so it fuses as well as it can
 * (horovod's grouped_allreduce). handles receives count handles. */
ZEN_C_EXPORT int zen_enqueue_group(const zen_op_t* ops, int32_t count, zen_handle_t* handles);

/* ---- process sets (Horovod's) ----
 *
 * A process set is a subset of the job's ranks that runs collectives together, known by the
 * id zen_add_process_set returns (0 is the whole job). Rules:
 * - Adding and removing are collectives of the whole job: every rank calls
 *   zen_add_process_set with the same ranks (any order) and zen_remove_process_set with the
 *   same id, in the same order as its other adds and removes. Each blocks until every rank has
 *   registered (removed) the set, at most ZEN_TIMEOUT (then ZEN_TIMEOUT, and the request stays
 *   posted); ranks that differ between the ranks, duplicates, ranks outside the job, an
 *   unknown id or the global set fail it on every rank. Not from a completion. Ids are never
 *   reused.
 * - An operation over set s (zen_op_t.process_set = s) is enqueued by s's members only: a
 *   non-member's or an unknown id's enqueue fails at once (ZEN_INVALID_ARGUMENT). Its rank
 *   numbers (root_rank, splits, the order of gathered rows, received splits, reducescatter's
 *   pieces) are ranks within s: positions in its ascending ranks (zen.torch and
 *   zen.tensorflow take broadcast's root as a job rank, as Horovod's, and translate it).
 *   Different ranks may use the same name in different sets at once; on one rank a name is
 *   in flight once.
 * - Join is global only. Removing a set fails its operations still pending. */

/* Registers ranks[0..count) as a new process set on every rank; *id receives its id. */
ZEN_C_EXPORT int zen_add_process_set(const int32_t* ranks, int32_t count, int32_t* id);
ZEN_C_EXPORT int zen_remove_process_set(int32_t id);
/* Set id's ranks in the job, ascending: *count receives how many, and the first
 * min(*count, capacity) are written to ranks (may be NULL with capacity 0). Id 0: every rank.
 * ZEN_INVALID_ARGUMENT for an id this rank does not know. */
ZEN_C_EXPORT int zen_process_set_ranks(int32_t id,
                                       int32_t* ranks,
                                       int32_t capacity,
                                       int32_t* count);

/* ---- completion ---- */

/* *done = 1 when the operation has ended (either way). */
ZEN_C_EXPORT int zen_poll(zen_handle_t handle, int* done);
/* Waits up to timeout_seconds (< 0: no limit) and returns the operation's status, or
 * ZEN_PENDING while it still runs (wait again). */
ZEN_C_EXPORT int zen_wait(zen_handle_t handle, double timeout_seconds);
/* Forgets the handle and its outputs. */
ZEN_C_EXPORT int zen_release(zen_handle_t handle);

/* Outputs of an ended operation (or inside its completion); pointers valid until
 * zen_release. */
typedef struct zen_sparse_result {
  const int64_t* indices; /* nnz sorted, distinct rows */
  const void* values;     /* nnz x row_size */
  int64_t nnz;
  int64_t num_rows;
  int64_t row_size;
  int32_t dtype;
} zen_sparse_result_t;
/* Host memory only: a sparse result on a device is refused (ZEN_INVALID_ARGUMENT). */
ZEN_C_EXPORT int zen_sparse_result(zen_handle_t handle, zen_sparse_result_t* result);
/* The sparse result wherever it is: *device_type ZEN_DEVICE_CPU (host memory), or
 * ZEN_DEVICE_CUDA and *device_index for CUDA inputs (indices and values are then device
 * memory, the daemon's, freed by zen_release). device_type and device_index may be NULL. */
ZEN_C_EXPORT int zen_sparse_result_placed(zen_handle_t handle,
                                          zen_sparse_result_t* result,
                                          int32_t* device_type,
                                          int32_t* device_index);
typedef struct zen_gathered {
  const void* data; /* every rank's rows in rank order */
  size_t bytes;
  int32_t ndims;
  const int64_t* shape; /* [total rows, ...] */
  int32_t device_type;  /* where data is: ZEN_DEVICE_CPU, or ZEN_DEVICE_CUDA for CUDA inputs */
  int32_t device_index;
} zen_gathered_t;
ZEN_C_EXPORT int zen_allgather_result(zen_handle_t handle, zen_gathered_t* result);
typedef struct zen_alltoall_result {
  zen_gathered_t output;          /* what every rank sent here, rank 0's rows first */
  const int64_t* received_splits; /* num_ranks entries: rows received from each rank */
  int32_t num_ranks;
} zen_alltoall_result_t;
ZEN_C_EXPORT int zen_alltoall_result(zen_handle_t handle, zen_alltoall_result_t* result);
ZEN_C_EXPORT int zen_join_result(zen_handle_t handle, int32_t* last_joined_rank);

/* ---- observability ---- */

/* Totals of this rank (zen::RuntimeStats). */
typedef struct zen_stats {
  uint64_t cycles;
  uint64_t fast_path_cycles;
  uint64_t slow_path_cycles;
  uint64_t cache_hits;
  uint64_t buckets_executed;
  uint64_t tensors_executed;
  uint64_t completed;
  uint64_t failed;
  uint64_t bytes_sent;
  uint64_t bytes_received;
  uint64_t stall_warnings;
  double max_imbalance;
} zen_stats_t;
ZEN_C_EXPORT int zen_stats(zen_stats_t* stats);
/* Everything, per tensor too, as JSON ({"cycles": ..., "phase_seconds": {...},
 * "buckets_by_scheme": {...}, "tensors": {"name": {...}}, "config": {"fusion_threshold_bytes":
 * ..., "cycle_time_ms": ..., ...}: the settings the runtime started with}); free *json with
 * zen_free. */
ZEN_C_EXPORT int zen_stats_json(char** json);
ZEN_C_EXPORT void zen_free(void* pointer);

/* Writes a Chrome trace per rank (".rank<N>" inserted into path) until zen_stop_timeline.
 * Available unless ZEN_TIMELINE names a file (then the timeline runs from zen_init). */
ZEN_C_EXPORT int zen_start_timeline(const char* path, int mark_cycles);
ZEN_C_EXPORT int zen_stop_timeline(void);

#ifdef __cplusplus
}
#endif
