/* Running one registry kernel on the GPU (kernels/gpu/kr_gpu.h) for a
 * kernel_inputs_t + kernel_act_t, the way `kreplay replay --device gpu`
 * needs it:
 *   - operands uploaded as the kernel consumes them (the act the CPU side
 *     prepared: recorded or quantized fp8, MXFP4 activations);
 *   - the output allocated between guard canaries (canary_bytes of 0xA5
 *     before and after), checked after every launch -> OOB_WRITE;
 *   - the output poisoned with the bf16 NaN pattern 0x7FC1 before every
 *     launch (no kernel writes that pattern: NaN outputs are 0x7FC0/0xFFC0),
 *     so an element no thread wrote is seen -> WRONG ("unwritten");
 *   - `reruns` launches on the same inputs compared bit for bit
 *     (NaN == NaN) -> NONDETERMINISTIC on any difference;
 *   - every launch timed with events, and `timed_runs` more launches: the
 *     median and min of the warm ones (all but the first, when there are
 *     several), TFLOP/s (2MNK) and GB/s (weights + activations + output,
 *     read or written once).
 * The checks run where the data is (gpu_launch.h): only launch 1's output
 * is downloaded.
 * Split-K scratch and block counters are allocated before the first launch,
 * never inside one.  Every runtime status is checked; a failure gives
 * verdict ERROR with the runtime's message.
 *
 * The runner does not know the model: pass the model's bits to
 * gpu_run_check_model() to get MODEL_MISMATCH (or keep PASS). */
#ifndef KR_GPU_RUN_H
#define KR_GPU_RUN_H

#include <stddef.h>
#include <stdint.h>

#include "kr_error.h"
#include "metrics.h"
#include "registry.h"
#include "result.h"

typedef enum {
    GPU_VARIANT_SIMT = 0,       /* the bit-faithful kernel of the registry name */
    GPU_VARIANT_MATRIX,         /* a twin with gpu_matrix on the matrix units (NVIDIA mma e4m3 / gfx12 WMMA) */
} gpu_variant_t;

typedef struct {
    int device;                 /* default 0 */
    int reruns;                 /* bitwise-compared launches, default 3 (>= 1) */
    int timed_runs;             /* warm timed launches after the reruns, default 5 (0: none) */
    size_t canary_bytes;        /* guard bytes on each side of the output, default 4096 */
    gpu_variant_t variant;
    const char *fault;          /* NULL, or a fault kernel run on the operands of the folded
                                   W4A8 twin (KERNEL_GPU_W4A8_FOLDED):
                                   "race", "oob", "unwritten" (kr_gpu_fault_launch) */
} gpu_run_options_t;

typedef struct {
    char kernel[64];            /* registry name, "+mma"/"+wmma" or "+fault:<name>" appended */
    char device[128];
    int64_t M, N, K;
    /* GEMM kernels: bf16 bits [M, N] of the first launch (malloc'd). */
    uint16_t *out;
    /* Quantizers: codes [M, K]; per-token scales [M] (fp8) or e8m0 bytes [M, K/32] (mxfp4). */
    uint8_t *q_codes;
    float *q_token_scale;
    uint8_t *q_block_scale;

    int reruns;                 /* launches compared */
    int64_t rerun_diff;         /* elements (bytes for quantizers) that differ from launch 1 in any rerun */
    uint64_t rerun_max_ulp;     /* largest bf16 ULP distance among them (GEMM) */
    int64_t unwritten;          /* elements that kept the poison in some launch */
    int64_t first_unwritten;    /* flat index of the first one, -1 if none */
    int64_t canary_bad;         /* guard bytes found changed (summed over launches) */
    int64_t canary_bad_after;   /* ... of them in the guard after the output */

    double ms_median, ms_min;   /* over the timed launches (NaN if none) */
    double flops, bytes;        /* per launch */
    double tflops, gbps;        /* at the median */

    ulp_stats_t model;          /* filled by gpu_run_check_model */
    int model_checked;
    verdict_t verdict;
    char note[512];
} gpu_run_result_t;

void gpu_run_options_default(gpu_run_options_t *o);

/* 1 if this build has GPU support and a device is present; else 0 with the
 * reason in why (e.g. "no GPU support built", "no GPU device"). */
int gpu_available(char *why, size_t cap);

/* Can the GPU run this kernel?  Its descriptor's gpu_entry (and gpu_matrix
 * for the matrix variant) says so. */
int gpu_kernel_runs(const kernel_desc_t *k, gpu_variant_t variant);
/* The same for a registry name. */
int gpu_kernel_supported(const char *name, gpu_variant_t variant);

/* res before a run: k's label ("+mma" / "+wmma" / "+fault:<name>" appended),
 * nothing measured yet, verdict PASS. */
void gpu_run_result_init(gpu_run_result_t *res, const kernel_desc_t *k, int64_t M, int64_t N,
                         int64_t K, const gpu_run_options_t *opt, int standin);

/* 1 (res UNSUPPORTED, its note why) when k has no twin for opt's variant, or
 * opt's fault runs on another kernel's operands; else 0. */
int gpu_run_declined(const kernel_desc_t *k, const gpu_run_options_t *opt, gpu_run_result_t *res);

/* Runs k on the GPU.  `act` is what k->prepare_act built (the operands the
 * kernel consumes).  Returns 0 with res filled (its verdict says what was
 * seen), or -1 with err set when the run could not happen at all (no GPU,
 * allocation failure, unsupported kernel); res->verdict is then ERROR or
 * UNSUPPORTED and res->note says why. */
int gpu_run_kernel(const kernel_desc_t *k, const kernel_inputs_t *in, const kernel_act_t *act,
                   const kernel_options_t *kopt, const gpu_run_options_t *opt,
                   gpu_run_result_t *res, kr_error_t *err);

/* Compares res->out with the model's bits [M, N] (NaN == NaN, whatever the
 * payload).  A PASS becomes MODEL_MISMATCH when more than max_ulp ULPs
 * separate any pair, or when any pair is not bit-identical and max_ulp is 0.
 * Fills res->model. */
void gpu_run_check_model(gpu_run_result_t *res, const uint16_t *model, uint64_t max_ulp);

void gpu_run_result_free(gpu_run_result_t *res);

#endif
