/* The GPU worker of a run, from kreplay's side: one process per GPU for the
 * whole run (forked on first use, or early by gpu_session_prewarm), holding
 * one context and stream, fed requests (gpu_proto.h) over a socket and
 * operands through a shared arena (shm_arena.h).
 *
 * Operands are named by their content (content_hash.h): the session keeps a
 * mirror of what the worker holds, sends only bytes it lacks, and tells it
 * what to drop when its budget (half the device's free memory at open, or
 * KREPLAY_GPU_RESIDENT_MB) would be exceeded.  So a case's weight, its
 * activations and x cross to the device once for every kernel, rerun and
 * reference of the case; the weight stays for the next case when it is the
 * same bytes.
 *
 * Isolation stays as it was with a child per launch: a request that crashes
 * or hangs the worker (killed at the timeout) is CRASHED or TIMEOUT, the
 * worker and everything it held are gone, and the next request starts a
 * fresh one and sends what it needs again.  A launch that leaves the device
 * suspect (a runtime error, an out-of-bounds write) retires the worker too.
 *
 * The kreplay process itself never initializes the GPU runtime: every GPU
 * call is the worker's.  Under --no-isolate the requests are answered in
 * kreplay's own process instead (a crash ends the run).
 *
 * A session without a device (device < 0) serves persistent plugins
 * (KREPLAY_PLUGIN_PERSISTENT: Python kernels) in one host worker. */
#ifndef KR_GPU_SESSION_H
#define KR_GPU_SESSION_H

#include "external_launch.h"
#include "gpu_run.h"
#include "isolate.h"
#include "registry.h"

typedef struct gpu_session gpu_session_t;

typedef struct {
    int device;                 /* the GPU's index; < 0: a host worker (no device) */
    int standin;                /* the stand-in device (gpu_device.h) */
    int in_process;             /* --no-isolate: answered in this process */
    double timeout_s;           /* per request (<= 0: none) */
    /* Kernels beyond the registry a request may name (plugins): the list
     * must be complete before the first request, and live as long. */
    const kernel_desc_t *const *extra_kernels;
    int n_extra_kernels;
} gpu_session_options_t;

/* A session; nothing is started yet.  -1 with err when the shared arena
 * cannot be made. */
int gpu_session_open(gpu_session_t **s, const gpu_session_options_t *o, kr_error_t *err);

/* Starts the worker (forked here, on the calling thread) and opens its
 * device in the background (a thread), so the run's first GPU request does
 * not wait for the runtime's start-up. */
void gpu_session_prewarm(gpu_session_t *s);

/* Ends the worker and frees everything.  NULL is fine. */
void gpu_session_close(gpu_session_t *s);

/* Whether the device opened: 1 with its name, else 0 with why. */
int gpu_session_device(gpu_session_t *s, char *name, size_t name_cap, char *why, size_t why_cap);

/* The GPUs the worker's runtime sees (after the device opened; 0 before). */
int gpu_session_device_count(gpu_session_t *s);

/* The session's stand-in flag (rows say "stand-in"). */
int gpu_session_is_standin(const gpu_session_t *s);

/* Whether the device computes the references (a CUDA build's cuBLAS, or the
 * stand-in); else the CPU does. */
int gpu_session_refs_supported(gpu_session_t *s);

/* What the session did, for tests and benchmarks. */
typedef struct {
    int64_t requests;           /* sent to the worker */
    int64_t operand_bytes;      /* operand bytes sent (the worker held the rest) */
    int64_t workers;            /* workers started (a crash or a retirement starts another) */
} gpu_session_stats_t;

void gpu_session_stats(const gpu_session_t *s, gpu_session_stats_t *out);

/* Forgets the digests remembered for the buffers of the case being
 * replayed (the next case may reuse their addresses). */
void gpu_session_case_end(gpu_session_t *s);

/* k's GPU twin on the case's operands (gpu_launch.h).  Returns 0 when the
 * request ran, however it ended: ir says how (OK: res as gpu_run_kernel
 * gives it, outputs malloc'd; FAILED: res->verdict / note why, a run that
 * could not happen; CRASHED / TIMEOUT: the worker died), or -1 with err when
 * no worker could be started. */
int gpu_session_twin(gpu_session_t *s, const kernel_desc_t *k, const kernel_inputs_t *in,
                     const kernel_act_t *act, const kernel_options_t *kopt,
                     const gpu_run_options_t *opt, gpu_run_result_t *res, isolate_result_t *ir,
                     kr_error_t *err);

/* C[M, N] = A[M, K] @ dequant(W)^T, fp32 (the references) or fp64 (f64: C
 * is double), on the device (cuBLAS, TF32 off) or the stand-in's
 * reference/gemm_ref.h grid (panel_rows: its row panels).  -1 with err. */
int gpu_session_ref_mxfp4(gpu_session_t *s, const float *A, int64_t M, const mxfp4_weight_t *W,
                          int f64, int64_t panel_rows, void *C, kr_error_t *err);
/* C[M, N] = A[M, K] @ W^T with W the bf16 weight [N, K]. */
int gpu_session_ref_bf16(gpu_session_t *s, const float *A, int64_t M, const uint16_t *W,
                         int64_t N, int64_t K, int64_t panel_rows, float *C, kr_error_t *err);

/* A plugin kernel's launches as plan says (runs, fault, row_offset):
 * GPU plugins on the device, persistent plugins in the worker's own
 * memory.  out [M, N] gets run 1's bits when o->ok; a crash or hang of the
 * worker is o's verdict (CRASHED / TIMEOUT).  -1 with err only when the
 * harness failed. */
int gpu_session_plugin(gpu_session_t *s, const kernel_desc_t *k, const kernel_inputs_t *in,
                       const kernel_act_t *act, const kernel_options_t *kopt,
                       const launch_plan_t *plan, uint16_t *out, launch_outcome_t *o,
                       kr_error_t *err);

#endif
