/* The GPU twins as data: for each kernel_gpu_entry_t a descriptor's
 * gpu_entry can name, the launch of kr_gpu.h it runs (SIMT, and on the
 * matrix units where it has such a variant) and the device buffers it needs
 * beyond the operands its descriptor's formats give (pre-shifted weights,
 * split-K scratch and counters, a load-time weight layout).  The GPU runner
 * (harness/engine/gpu_run.c) uploads the operands by the descriptor's
 * formats, calls prepare, then launch: a new GPU twin is a row here plus its
 * kernel in the GPU sources, and no code in harness/ names it. */
#ifndef KR_GPU_ENTRY_H
#define KR_GPU_ENTRY_H

#include <stddef.h>
#include <stdint.h>

#include "kr_gpu.h"
#include "registry.h"

/* The device operands and outputs of one launch (all device pointers).  The
 * runner fills those its descriptor's formats give; prepare the rest. */
typedef struct {
    int64_t M, N, K;
    /* activations */
    const uint8_t *x;           /* fp8 codes [M, K], or MXFP4 codes one per byte */
    const float *xs;            /* fp8 per-token scales [M] */
    int x_fmt;                  /* fp8 codes: 0 e4m3fn, 1 e4m3fnuz */
    const uint8_t *a_scales;    /* MXFP4 activations' e8m0 [M, K/32] */
    const float *xf;            /* a quantizer's source x [M, K] fp32 */
    const uint16_t *x_bf16;     /* bf16 activations [M, K] */
    /* weights */
    kr_gpu_mxfp4_t w;
    const uint8_t *ref;         /* per-row reference exponents [N] (W4A8) */
    const uint8_t *w8;          /* the pre-shifted e4m3 weight the matrix units read */
    const uint8_t *wdec;        /* w4a8.decode: the weight in its warp-contiguous order */
    const uint16_t *w_bf16;
    int splits;                 /* the descriptor's split-K count */
    float *scratch;
    size_t scratch_bytes;
    int *counters;
    int64_t n_counters;
    /* outputs */
    void *out;                  /* bf16 [M, N], or a quantizer's codes [M, K] */
    void *scale_out;            /* a quantizer's scales */
    /* What no GPU kernel reads, but the stand-in (harness/engine/gpu_device.h),
     * which runs the CPU model on these buffers, needs to rebuild its inputs. */
    const float *x_dequant;     /* the activations' fp32 values [M, K] */
    const uint8_t *case_ref;    /* the case's weight_ref [N], or NULL */
    int64_t dispatch_M;         /* the M the configuration is picked for (0: M) */
} kr_gpu_operands_t;

/* What prepare may use, and what it says back. */
typedef struct {
    void *owner;                /* the runner's: passed to alloc */
    /* Device memory the runner frees after the run; KR_GPU_OK or a status. */
    int (*alloc)(void *owner, void **p, size_t bytes);
    kr_gpu_stream_t stream;
    int matrix;                 /* the matrix-unit variant will run */
    const char *step;           /* out: the step that failed, for the row's note */
    const char *decline;        /* out: why these operands cannot run (an UNSUPPORTED row) */
    double extra_bytes;         /* out: bytes per launch read beyond the operands (may be < 0) */
} kr_gpu_prepare_t;

typedef int (*kr_gpu_entry_launch_fn)(const kr_gpu_operands_t *o, kr_gpu_stream_t stream);

typedef struct {
    kernel_gpu_entry_t entry;
    kr_gpu_entry_launch_fn launch;          /* the bit-faithful SIMT kernel */
    kr_gpu_entry_launch_fn launch_matrix;   /* the matrix-unit variant, or NULL */
    /* Device buffers beyond the operands, once before the first launch
     * (never inside one); NULL: none.  KR_GPU_OK, or a status with step
     * set; decline set (status KR_GPU_ERR_UNSUPPORTED) when it cannot run. */
    int (*prepare)(kr_gpu_operands_t *o, kr_gpu_prepare_t *p);
    int uses_splits;            /* launch reads o->splits (the descriptor's split_k) */
    int fault_host;             /* the fault kernels (kr_gpu_fault_launch) run on its operands */
} kr_gpu_entry_t;

/* The row of `entry`, or NULL (KERNEL_GPU_NONE, or none built for it). */
const kr_gpu_entry_t *kr_gpu_entry_find(kernel_gpu_entry_t entry);

/* The entry the fault kernels borrow operands from (KERNEL_GPU_NONE if none). */
kernel_gpu_entry_t kr_gpu_entry_fault_host(void);

#endif
