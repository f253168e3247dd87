/* Compiled as C: bindings/c_api.h is valid C, and a C program can run a job of one through
 * it (zen_init from an environment without placement). Returns 0 or the failing step. */
#include <stdio.h>
#include <string.h>

#include "bindings/c_api.h"

static int completions = 0;

static void on_done(zen_handle_t handle, int32_t code, const char* message, void* user_data) {
  (void)handle;
  (void)message;
  if (code == ZEN_OK && user_data == &completions) ++completions;
}

int zen_c_smoke(void) {
  if (zen_is_initialized() != 0) return 1;
  if (zen_rank() != -1 || strstr(zen_last_error(), "not initialized") == NULL) return 2;
  if (zen_init() != ZEN_OK) {
    fprintf(stderr, "zen_init: %s\n", zen_last_error());
    return 3;
  }
  if (zen_size() != 1 || zen_rank() != 0 || zen_local_size() != 1) return 4;

  float x[6] = {1, 2, 3, 4, 5, 6};
  int64_t shape[2] = {2, 3};
  zen_tensor_t t = {x, ZEN_FLOAT32, 2, shape};
  zen_completion_t done = {on_done, &completions};
  zen_handle_t h = 0;
  if (zen_enqueue_allreduce("x", &t, &t, ZEN_SUM, done, &h) != ZEN_OK) return 5;
  if (zen_wait(h, 30.0) != ZEN_OK || completions != 1 || x[5] != 6.0f) return 6;
  if (zen_release(h) != ZEN_OK || zen_release(h) != ZEN_UNKNOWN_HANDLE) return 7;

  int64_t indices[3] = {4, 1, 4};
  float values[6] = {1, 1, 2, 2, 3, 3};
  zen_sparse_tensor_t s = {indices, values, 3, 8, 2, ZEN_FLOAT32};
  if (zen_enqueue_sparse_allreduce("s", &s, ZEN_SUM, NULL, ZEN_NO_COMPLETION, &h) != ZEN_OK) {
    return 8;
  }
  if (zen_wait(h, 30.0) != ZEN_OK) return 9;
  zen_sparse_result_t r;
  if (zen_sparse_result(h, &r) != ZEN_OK || r.nnz != 2 || r.indices[0] != 1 || r.indices[1] != 4 ||
      ((const float*)r.values)[2] != 4.0f) {
    return 10;
  }
  zen_release(h);

  /* A CUDA tensor on a device no machine has is refused at enqueue, saying why (a build
   * without CUDA: "built without CUDA"). */
  zen_tensor_t g = {x, ZEN_FLOAT32, 2, shape, ZEN_DEVICE_CUDA, 999, NULL, NULL};
  if (zen_enqueue_allreduce("g", &g, &g, ZEN_SUM, ZEN_NO_COMPLETION, &h) != ZEN_INVALID_ARGUMENT ||
      strstr(zen_last_error(), "'g' is on cuda:999") == NULL) {
    fprintf(stderr, "device tensor: %s\n", zen_last_error());
    return 13;
  }
  if (!zen_cuda_built() && strstr(zen_last_error(), "built without") == NULL) return 14;
  g.device_type = 7;
  if (zen_enqueue_allreduce("g", &g, &g, ZEN_SUM, ZEN_NO_COMPLETION, &h) != ZEN_INVALID_ARGUMENT) {
    return 15;
  }

  /* Alltoall and reducescatter in a job of one: the identity. */
  zen_alltoall_result_t a;
  if (zen_enqueue_alltoall("a", &t, NULL, 0, ZEN_NO_COMPLETION, &h) != ZEN_OK ||
      zen_wait(h, 30.0) != ZEN_OK || zen_alltoall_result(h, &a) != ZEN_OK || a.num_ranks != 1 ||
      a.received_splits[0] != 2 || a.output.shape[0] != 2 || a.output.shape[1] != 3 ||
      ((const float*)a.output.data)[4] != 5.0f) {
    return 16;
  }
  zen_release(h);
  float piece[6] = {0};
  zen_tensor_t out = {piece, ZEN_FLOAT32, 2, shape};
  if (zen_reducescatter_rows(2, 0, 1) != 2 ||
      zen_enqueue_reducescatter("r", &t, &out, ZEN_AVERAGE, ZEN_NO_COMPLETION, &h) != ZEN_OK ||
      zen_wait(h, 30.0) != ZEN_OK || piece[5] != 6.0f) {
    return 17;
  }
  zen_release(h);

  char* json = NULL;
  if (zen_stats_json(&json) != ZEN_OK || strstr(json, "\"tensors\"") == NULL) return 11;
  zen_free(json);
  if (zen_shutdown() != ZEN_OK || zen_is_initialized() != 0) return 12;
  return 0;
}
