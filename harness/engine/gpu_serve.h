/* The GPU worker's side of gpu_proto.h: the process that holds the device
 * (one context, one stream) for the whole run, the blobs kreplay sent it,
 * and the dequantized weight of the case's references; it answers one
 * request at a time.  Runs in the worker (isolate_worker_t), or in kreplay's
 * own process under --no-isolate. */
#ifndef KR_GPU_SERVE_H
#define KR_GPU_SERVE_H

#include <stddef.h>

#include "kr_error.h"
#include "registry.h"

typedef struct gpu_serve_state gpu_serve_state_t;

typedef struct {
    unsigned char *arena;       /* the shared arena's base (shm_arena.h) */
    /* Kernels beyond the registry a request may name (plugins), as the run
     * loaded them before the worker was forked. */
    const kernel_desc_t *const *extra;
    int n_extra;
    gpu_serve_state_t *state;   /* the worker's own, made on its first request */
} gpu_serve_ctx_t;

/* isolate_serve_fn: answers one request of gpu_proto.h.  0, or -1 with err
 * (a malformed request, a blob it does not hold). */
int gpu_serve(void *ctx, const void *request, size_t request_bytes, kr_error_t *err);

/* Frees the state (the device's buffers, the device): the in-process
 * server at the end of the run; a worker's goes with it. */
void gpu_serve_ctx_release(gpu_serve_ctx_t *ctx);

#endif
