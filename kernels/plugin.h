/* kreplay plugin ABI: how an external shared library exposes its own GEMM
 * kernels to `kreplay replay --plugin ./libmykernels.so`.
 *
 * This header is the whole contract.  It is plain C, depends on nothing but
 * <stdint.h>, and may be copied into the plugin's own tree.
 *
 * A plugin exports ONE data symbol, KREPLAY_PLUGIN_SYMBOL ("kreplay_plugin"),
 * of type kreplay_plugin_t:
 *
 *     KREPLAY_PLUGIN_EXPORT const kreplay_plugin_t kreplay_plugin = {
 *         .abi_version = KREPLAY_PLUGIN_ABI_VERSION,
 *         .struct_size = sizeof(kreplay_plugin_t),
 *         .name = "mykernels",
 *         .kernel_count = 1,
 *         .kernels = my_kernels,
 *     };
 *
 * Versioning.  The symbol name never changes; its first member, abi_version,
 * is frozen at offset 0 in every version of this ABI, so kreplay can always
 * read it and refuse a library built against another version with a message
 * naming the file, the version found and the version expected.  Any change to
 * the layout or the meaning of anything below bumps
 * KREPLAY_PLUGIN_ABI_VERSION.  struct_size lets kreplay also refuse a library
 * whose structure is shorter than this header's (a truncated or mismatched
 * build).
 *
 * The launch function has the signature of the MXFP4 dispatch's launch
 * (radiance_mxfp4_fp8 `_ext.launch`):
 *
 *     launch(x_fp8, weight, weight_scale, weight_ref, x_scale, out, M, N, K, stream)
 *
 *   x_fp8         [M, K] fp8 e4m3fn codes, row-major (one byte each), the
 *                 activations quantized per token (OCP e4m3fn: bias 7,
 *                 max 448, NaN = 0x7F/0xFF, no Inf).
 *   weight        MXFP4 e2m1 codes packed two per byte, element 2j in the LOW
 *                 nibble of byte j: [N, K/2] in checkpoint order, or in WPERM
 *                 fragment order (permute_w of the dispatch) when the kernel
 *                 declares KREPLAY_WEIGHT_FRAGMENT (then N % 16 == 0 and
 *                 K % 16 == 0).
 *   weight_scale  e8m0 block exponents, one per 32 consecutive k of a row:
 *                 value 2^(E-127), 0xFF = NaN.  Layout [K/32, N] (what the
 *                 production kernel reads after its one-time transpose;
 *                 KREPLAY_SCALES_KN) or [N, K/32] (the checkpoint's;
 *                 KREPLAY_SCALES_NK), as the kernel declares.  kreplay hands
 *                 the raw bytes; decoding them is the kernel's business.
 *   weight_ref    the dispatch's route argument.  KREPLAY_WREF_NONE (the
 *                 per-block-rescale path): NULL, as the dispatch passes
 *                 pointer 0 for a weight_ref of 2 elements.
 *                 KREPLAY_WREF_ROW_MAX (the folded path): [N] bytes, row n's
 *                 reference exponent = max over b of E[n][b] (make_row_ref),
 *                 or the case's recorded weight_ref when it has N elements.
 *   x_scale       [M] fp32 per-token scales: row m of x is x_fp8[m] * x_scale[m].
 *   out           [M, N] bf16 (uint16 bits), row-major, written completely.
 *   M, N, K       the GEMM: out = (x_fp8 * x_scale) @ dequant(weight)^T.
 *   stream        CPU plugin: NULL.  GPU plugin: the stream to launch on.
 *   returns       0 on success; nonzero on failure (then last_error, if the
 *                 plugin provides it, says why).
 *
 * CPU plugins (flags without KREPLAY_PLUGIN_GPU): every pointer is a HOST
 * pointer, stream is NULL, and the output must be complete when launch
 * returns.  kreplay fills `out` with the bf16 pattern 0x7FC1 beforehand (so
 * unwritten elements are seen) and surrounds it with guard bytes reaching 128
 * rows and columns past [M, N] (so writes past either end are seen).
 *
 * GPU plugins (flags with KREPLAY_PLUGIN_GPU): every pointer is a DEVICE
 * pointer of the runtime kreplay is built with (CUDA or HIP; see
 * kr_gpu_backend()), allocated by kreplay on the current device, and stream is
 * that runtime's stream (cudaStream_t / hipStream_t) created by kreplay.  The
 * launch may be asynchronous: kreplay synchronizes the stream after launch
 * returns and checks the runtime's status before reading `out`.  The plugin
 * must be linked against the same runtime as kreplay and must not allocate
 * inside launch if it is ever to be captured in a graph (the production rule).
 * A GPU plugin's launches run in kreplay's GPU worker: one process per GPU
 * for the whole run, holding one context and stream, with the case's
 * operands resident on the device (uploaded once per case).  Under the
 * stand-in (KREPLAY_GPU_STANDIN=1, no GPU runtime) the "device" pointers are
 * host pointers and stream is NULL.
 *
 * Isolation.  kreplay calls launch in a separate process with a timeout
 * (`--timeout`; unless `--no-isolate`): a forked child per launch for a CPU
 * plugin, the GPU worker for a GPU plugin, one worker for the run for a
 * persistent plugin.  A crash, abort or hang then becomes a CRASHED or
 * TIMEOUT row, that process is ended (a fresh worker takes the next launch)
 * and the run goes on.  The process leads its own process group, killed
 * when it ends, and its stdout is its stderr.  launch runs `--reruns` times
 * on the same inputs (default 3), the outputs compared bit for bit.  A
 * plugin therefore must not rely on state set by an earlier launch (a
 * persistent one may keep caches that do not change its results).  Its
 * constructors run first in a throw-away child (a crash or an exit there
 * refuses the plugin, naming it), then at dlopen in kreplay's own process:
 * they must not touch a GPU.
 *
 * Bits.  kreplay compares the output against fp32 references and, bit by bit,
 * against its models; build the plugin with -ffp-contract=off unless the
 * kernel really fuses multiply-adds.  launch may be called concurrently from
 * several processes, never from several threads of one process at once. */
#ifndef KREPLAY_PLUGIN_H
#define KREPLAY_PLUGIN_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The ABI this header describes. */
#define KREPLAY_PLUGIN_ABI_VERSION 1u

/* The one symbol a plugin exports (a const kreplay_plugin_t). */
#define KREPLAY_PLUGIN_SYMBOL "kreplay_plugin"

/* Marks the symbol exported even under -fvisibility=hidden. */
#if defined(__GNUC__) || defined(__clang__)
#define KREPLAY_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define KREPLAY_PLUGIN_EXPORT
#endif

/* kreplay_plugin_t.flags */
#define KREPLAY_PLUGIN_GPU 1u           /* pointers are device pointers; stream is a runtime stream */
#define KREPLAY_PLUGIN_PERSISTENT 2u    /* launched in one long-lived worker process per run, which
                                           keeps the plugin's state (a warm interpreter, a compiled
                                           kernel) between launches; a crash or a hang still ends
                                           only that process and its row */

/* kreplay_kernel_t.act_format */
#define KREPLAY_ACT_FP8_E4M3FN_TOKEN 0u /* e4m3fn codes [M, K] + fp32 scale per row */

/* kreplay_kernel_t.weight_order */
#define KREPLAY_WEIGHT_CHECKPOINT 0u    /* [N, K/2]: row n holds W[n][0..K) */
#define KREPLAY_WEIGHT_FRAGMENT 1u      /* WPERM fragment order (the dispatch's permute_w) */

/* kreplay_kernel_t.scale_layout */
#define KREPLAY_SCALES_KN 0u            /* [K/32, N]: the production kernel's layout */
#define KREPLAY_SCALES_NK 1u            /* [N, K/32]: the checkpoint's layout */

/* kreplay_kernel_t.weight_ref */
#define KREPLAY_WREF_NONE 0u            /* per-block path: weight_ref = NULL */
#define KREPLAY_WREF_ROW_MAX 1u         /* folded path: [N] per-row reference exponents */

/* The MXFP4 dispatch's launch signature (see above). */
typedef int (*kreplay_launch_fn)(const void *x_fp8, const void *weight, const void *weight_scale,
                                 const void *weight_ref, const float *x_scale, void *out,
                                 int64_t M, int64_t N, int64_t K, void *stream);

/* One kernel of a plugin. */
typedef struct {
    const char *name;           /* unique, [A-Za-z0-9._+-], at most 63 chars, not a registry
                                   kernel's name; e.g. "mylib.w4a8_perblock" */
    const char *summary;        /* one line for `kreplay list kernels` (may be NULL) */
    const char *accumulation;   /* the accumulation order, free text (may be NULL) */
    uint32_t act_format;        /* KREPLAY_ACT_* */
    uint32_t weight_order;      /* KREPLAY_WEIGHT_* */
    uint32_t scale_layout;      /* KREPLAY_SCALES_* */
    uint32_t weight_ref;        /* KREPLAY_WREF_* */
    int32_t k_multiple;         /* K % k_multiple == 0 required; 0 = 32 (a multiple of 32) */
    int32_t n_multiple;         /* N % n_multiple == 0 required; 0 = any N */
    int64_t m_min, m_max;       /* the M band served; 0, 0 = every M >= 1 */
    double rel_tol_exact;       /* threshold on rel_fro vs R_exact; 0 = 0.01 */
    double rel_tol_source;      /* threshold on rel_fro vs R_source; 0 = 0.08 */
    kreplay_launch_fn launch;
} kreplay_kernel_t;

/* What the library exports as KREPLAY_PLUGIN_SYMBOL.  abi_version MUST stay
 * the first member in every version. */
typedef struct {
    uint32_t abi_version;       /* KREPLAY_PLUGIN_ABI_VERSION the plugin was built against */
    uint32_t struct_size;       /* sizeof(kreplay_plugin_t) the plugin was built with */
    const char *name;           /* the library's name, for reports */
    uint32_t flags;             /* KREPLAY_PLUGIN_GPU or 0 */
    int32_t kernel_count;       /* 1 .. 256 */
    const kreplay_kernel_t *kernels;
    /* Why the last launch on this thread failed, or NULL (may itself be NULL). */
    const char *(*last_error)(void);
} kreplay_plugin_t;

/* ---- Named operands (optional; plugins without it are unaffected) ----
 *
 * A plugin may also export KREPLAY_OPERANDS_SYMBOL, a const
 * kreplay_plugin_operands_t.  Its kernels are then launched through
 * launch_named instead of launch: the kernel asks for the operands it takes,
 * by name, through `get`, which kreplay computes on demand:
 *
 *   name            bytes and layout (row-major, little-endian)
 *   x               [M, K] fp32 source activations
 *   x_bf16          [M, K] bf16 bits of x (round to nearest even)
 *   weight_bf16     [N, K] bf16 bits (the bf16 layer's weight)
 *   x_fp8, x_scale  as launch's, when the activations are fp8 per token
 *   x_mxfp4         [M, K/2] e2m1 codes, element 2j in the low nibble of byte j,
 *   x_mxfp4_scale   [M, K/32] e8m0: the activations as the operands-of kernel's
 *                   prepare_act quantizes them (--mxfp4-quant honoured)
 *   weight, weight_scale, weight_ref   as launch's, in the kernel's declared layouts
 *   w_folded        [N, K] e4m3fn codes of the folded weight (kernels/cpu/folded_weight.h):
 *                   e2m1 * 2^(E[n][b] - ref[n]) rounded to e4m3fn, saturating
 *   w_folded_scale  [N] fp32 2^(ref[n] - 127): W[n][k] ~ e4m3fn(w_folded) * scale[n]
 *
 * get returns 0 with *data / *bytes set (valid until launch_named returns), or
 * nonzero with *data a NUL-terminated reason (e.g. the case has no x).
 *
 * operands_of(i) names the registry kernel whose operands kernel i takes
 * ("family.variant" of `kreplay list kernels`) or returns NULL: kreplay then
 * prepares the activations as that kernel does (and judges R_exact on them),
 * reads the weight it reads, and checks the result --vs it bit for bit. */
#define KREPLAY_OPERANDS_SYMBOL "kreplay_plugin_operands"

typedef struct kreplay_operand_source kreplay_operand_source_t;

typedef int (*kreplay_get_operand_fn)(const kreplay_operand_source_t *src, const char *name,
                                      const void **data, int64_t *bytes);

typedef int (*kreplay_launch_named_fn)(int32_t kernel_index, const kreplay_operand_source_t *src,
                                       kreplay_get_operand_fn get, void *out, int64_t M,
                                       int64_t N, int64_t K, void *stream);

typedef struct {
    uint32_t struct_size;       /* sizeof(kreplay_plugin_operands_t) the plugin was built with */
    const char *(*operands_of)(int32_t kernel_index);   /* may itself be NULL */
    kreplay_launch_named_fn launch_named;               /* CPU plugins only */
} kreplay_plugin_operands_t;

#ifdef __cplusplus
}
#endif

#endif
