/* The kernel registry: one kernel_desc_t per production kernel variant.
 *
 * This table is the single source of truth for what kreplay can run: the
 * CLI's --kernels filter, the run plan, the report columns and
 * `kreplay list kernels` all read it, and so do the GPU runner, the derived
 * thresholds, compare and the report: no code outside a kernel's own file
 * names it.  Adding a kernel is one descriptor (in its own file under cpu/)
 * plus one line in registry.c. */
#ifndef KR_REGISTRY_H
#define KR_REGISTRY_H

#include <stdint.h>

#include "formats.h"
#include "gemm_ref.h"
#include "kr_error.h"
#include "quant_fp8.h"
#include "quant_mxfp4.h"

/* References a kernel can be compared against (bit mask). */
typedef enum {
    REF_EXACT = 1u << 0,    /* fp32 OpenBLAS on the kernel's OWN quantized operands */
    REF_SOURCE = 1u << 1,   /* fp32 OpenBLAS on the unquantized activations x */
} ref_kind_t;

const char *ref_kind_name(ref_kind_t r);   /* "R_exact", "R_source" */

/* What a case offers a kernel: the operands in their stored formats.  The
 * weight is always in checkpoint order here (the harness undoes WPERM); a
 * kernel that reads fragment order permutes it itself, as production does
 * at load time. */
typedef struct {
    int64_t M, N, K;
    const float *x;             /* [M, K] source activations, or NULL */
    const uint8_t *x_fp8;       /* [M, K] recorded fp8 activations, or NULL */
    const float *x_scale;       /* [M], with x_fp8 */
    fp8_format_t x_fp8_format;
    mxfp4_weight_t weight;      /* packed == NULL when the case has no MXFP4 weight */
    const uint8_t *weight_ref;  /* the case's weight_ref (per-row reference exponents when
                                   weight_ref_len == N), or NULL */
    int64_t weight_ref_len;
    const uint16_t *weight_bf16;        /* [N, K] bf16 weight of an unquantized layer, or NULL */
    /* Partitioned activations (mxfp4_linear_pqp): P copies [P, M, K] and
     * scales [P, M]; NULL when the case holds one copy. */
    const uint8_t *x_fp8_parts;
    const float *x_scale_parts;
    int parts;
    /* The M the dispatch picks its configuration for (split-K, tiles), when
     * these inputs are a block of a case's rows: the block must be computed
     * as the whole case's rows are.  0 = M. */
    int64_t dispatch_M;
} kernel_inputs_t;

/* Where the activations a kernel consumes come from. */
typedef enum {
    ACT_SOURCE_AUTO = 0,        /* the recorded fp8 operands if the kernel takes fp8 and they exist, else quantize x */
    ACT_SOURCE_RECORDED,        /* insist on recorded x_fp8/x_scale */
    ACT_SOURCE_QUANTIZE,        /* always quantize x the kernel's way */
} act_source_t;

typedef struct {
    act_source_t act_source;
    fp8_token_variant_t fp8_variant;    /* how to quantize x for fp8 kernels */
    mxfp4_variant_t mxfp4_variant;      /* how to quantize x for W4A4 kernels */
    int threads;                        /* 0 = all cores */
    int decode_splits;                  /* split-K of w4a8.decode (default 4) and bf16.skinny
                                           (default: the dispatch's table); 0 = default */
    int64_t partition_bounds[2];        /* w4a8.partitioned column bounds pb1, pb2; 0 = N/3, 2N/3 */
} kernel_options_t;

void kernel_options_default(kernel_options_t *o);

typedef enum {
    ACT_FP8_PER_TOKEN = 0,      /* fp8 codes [M, K] + fp32 scale per row */
    ACT_MXFP4_PER_BLOCK,        /* e2m1 codes [M, K] (one per byte) + e8m0 per 32-block [M, K/32] */
} act_kind_t;

/* The activations exactly as one kernel consumes them. */
typedef struct {
    act_kind_t kind;
    int64_t M, K;
    uint8_t *codes;             /* [M, K] */
    float *token_scale;         /* [M]        (ACT_FP8_PER_TOKEN) */
    uint8_t *block_scale;       /* [M, K/32]  (ACT_MXFP4_PER_BLOCK) */
    fp8_format_t fp8_format;
    float *dequant;             /* [M, K] fp32 value of each operand: R_exact's A */
    char origin[96];            /* e.g. "recorded x_fp8/x_scale", "x quantized (vllm)" */
} kernel_act_t;

void kernel_act_free(kernel_act_t *a);

/* What a kernel computes. */
typedef enum {
    KERNEL_OP_GEMM = 0,         /* out[M, N] bf16 = A[M, K] @ W[N, K]^T */
    KERNEL_OP_QUANT,            /* activation quantizer: prepare_act is the kernel */
} kernel_op_t;

/* Which weight of a case a GEMM kernel reads. */
typedef enum {
    WEIGHT_KIND_MXFP4 = 0,      /* weight + weight_scale (kernel_inputs_t.weight) */
    WEIGHT_KIND_BF16,           /* weight_bf16 */
} weight_kind_t;

/* The element format of an operand: the values the kernel multiplies. */
typedef enum {
    ELEM_NONE = 0,              /* no such operand (a quantizer has no weight) */
    ELEM_E2M1,
    ELEM_E4M3FN,
    ELEM_E4M3FNUZ,
    ELEM_E5M2,
    ELEM_BF16,
    ELEM_FP32,
} elem_format_t;

/* How an operand is scaled. */
typedef enum {
    SCALE_NONE = 0,             /* the elements are the values */
    SCALE_PER_TOKEN,            /* one fp32 scale per activation row */
    SCALE_PER_ROW,              /* one scale per weight row (output column) */
    SCALE_E8M0_PER_BLOCK,       /* one e8m0 exponent per `block` elements along K */
    SCALE_FP32,                 /* one fp32 scale for the whole tensor */
} scale_kind_t;

/* An operand as the kernel consumes it; the CPU model, the GPU runner and
 * the derived thresholds read these, never the free text. */
typedef struct {
    elem_format_t elem;
    int mantissa_bits;          /* explicit mantissa bits of elem (e2m1 1, e4m3 3, bf16 7) */
    int block;                  /* elements per scale along K; 0 = not block-scaled */
    scale_kind_t scale;
} operand_format_t;

/* Initialisers for the operand formats the kernels use, so a descriptor
 * cannot give an element format the wrong mantissa. */
#define OPERAND_NONE {.elem = ELEM_NONE, .mantissa_bits = -1, .block = 0, .scale = SCALE_NONE}
#define OPERAND_E4M3FN_PER_TOKEN                                                              \
    {.elem = ELEM_E4M3FN, .mantissa_bits = 3, .block = 0, .scale = SCALE_PER_TOKEN}
#define OPERAND_MXFP4                                                                         \
    {.elem = ELEM_E2M1, .mantissa_bits = 1, .block = 32, .scale = SCALE_E8M0_PER_BLOCK}
#define OPERAND_BF16 {.elem = ELEM_BF16, .mantissa_bits = 7, .block = 0, .scale = SCALE_NONE}

const char *elem_format_name(elem_format_t f);      /* "e2m1", "e4m3fn", ... "none" */
const char *scale_kind_name(scale_kind_t s);        /* "per-token", "e8m0-per-block", ... */

/* The GPU kernel (kernels/gpu/kr_gpu.h) a descriptor runs as on the device;
 * kernels/gpu/kr_gpu_entry.c maps each to its launch.  Several descriptors may share one. */
typedef enum {
    KERNEL_GPU_NONE = 0,        /* CPU model only */
    KERNEL_GPU_W4A8_PERBLOCK,   /* kr_gpu_w4a8_perblock */
    KERNEL_GPU_W4A8_FOLDED,     /* kr_gpu_w4a8_folded; the matrix-unit variants and the
                                   fault kernels run on its operands */
    KERNEL_GPU_W4A8_DECODE,     /* kr_gpu_w4a8_decode: split-K with scratch and counters */
    KERNEL_GPU_W4A4_AITER,      /* kr_gpu_w4a4_aiter */
    KERNEL_GPU_BF16_SPLITK,     /* kr_gpu_bf16_skinny with the descriptor's split_k */
    KERNEL_GPU_QUANT_FP8_TOKEN, /* kr_gpu_quant_fp8_token */
    KERNEL_GPU_QUANT_MXFP4,     /* kr_gpu_quant_mxfp4 */
} kernel_gpu_entry_t;

/* A kernel's part in the W4A8-vs-W4A4 comparison (kreplay compare, the
 * report's plot and summary) and in judging recorded outputs. */
typedef enum {
    COMPARE_ROLE_NONE = 0,
    COMPARE_ROLE_W4A8_PRODUCTION,   /* the production W4A8 path: compare's side A */
    COMPARE_ROLE_W4A8_MODEL,        /* the plain W4A8 model: side A when no production kernel
                                       ran; recorded W4A8-route outputs are judged as it */
    COMPARE_ROLE_W4A4_EMULATION,    /* the W4A4 path: side B; recorded W4A4-route outputs */
    COMPARE_ROLE_BF16_LAYER,        /* recorded outputs of an unquantized layer are judged as it */
} compare_role_t;

/* Per-kernel text the model leaves for the report, e.g. the folded path's
 * underflow statistic.  Filled by run_cpu; may stay empty. */
typedef struct {
    char note[256];
} kernel_run_info_t;

typedef struct kernel_desc {
    const char *name;           /* family.variant, e.g. w4a8.perblock */
    const char *family;         /* "w4a8", "w4a4", "bf16", "quant" */
    const char *summary;        /* one line */
    const char *act_format;     /* operand formats in words, for docs and `list kernels` only:
                                   code reads act and weight */
    const char *weight_format;
    operand_format_t act;       /* the activations the kernel multiplies */
    operand_format_t weight;    /* the weight as the case stores it */
    const char *accumulation;   /* the accumulation order the model reproduces */
    int k_multiple;             /* K % k_multiple == 0 required */
    int n_multiple;             /* N % n_multiple == 0 required (a plugin's declared tile);
                                   0 = any N */
    int64_t m_min, m_max;       /* M band the kernel serves; m_max 0 = unbounded */
    unsigned refs;              /* ref_kind_t mask */
    double rel_tol_exact;       /* default threshold on rel_fro vs R_exact */
    double rel_tol_source;      /* default threshold on rel_fro vs R_source */
    kernel_op_t op;
    weight_kind_t weight_kind;  /* GEMM kernels: the weight they read */
    int config;                 /* a variant selector the entry points read (e.g. a quantizer
                                   variant, or a weight layout); meaning is the kernel's own */
    kernel_gpu_entry_t gpu_entry;   /* its GPU twin, or KERNEL_GPU_NONE */
    int gpu_matrix;             /* 1: the twin also runs on the matrix units (--gpu-variant) */
    compare_role_t compare_role;
    /* An external kernel (a plugin, a Python kernel): the registry model of
     * its family, whose rules it is judged by (judge.h); NULL in the registry. */
    const struct kernel_desc *rules_of;

    /* Builds the activations the kernel consumes. */
    int (*prepare_act)(const struct kernel_desc *k, const kernel_inputs_t *in,
                       const kernel_options_t *opt, kernel_act_t *act, kr_error_t *err);
    /* The bit-faithful CPU model: out[M, N] bf16 bits.  NULL for KERNEL_OP_QUANT.
     * Returns 0; KERNEL_RUN_UNSUPPORTED with err saying why when the kernel
     * cannot take the case (a shape or option it does not serve: an
     * UNSUPPORTED row); any other nonzero value is a failure (an ERROR row). */
    int (*run_cpu)(const struct kernel_desc *k, const kernel_inputs_t *in,
                   const kernel_act_t *act, const kernel_options_t *opt, uint16_t *out,
                   kernel_run_info_t *info, kr_error_t *err);
    /* The split-K count SK the kernel uses for this shape and these
     * options, read by its CPU model and by its GPU twin alike; 0 with err
     * filled when the kernel declines the shape.  NULL: no split-K. */
    int (*split_k)(const struct kernel_desc *k, int64_t M, int64_t N, int64_t K,
                   const kernel_options_t *opt, kr_error_t *err);
} kernel_desc_t;

/* Descriptor fields more than one model states alike, for their designated
 * initialisers, so the models that share a fact cannot drift apart on it. */
/* Every M, K in whole 32-element MX blocks: ref_linear, w4a4.aiter,
 * bf16.sequential. */
#define KERNEL_ANY_M_K32 .k_multiple = 32, .m_min = 1, .m_max = 0
/* x rounded to bf16 (act_prepare_bf16_values): the bf16 models, ref_linear. */
#define KERNEL_BF16_ACT .act = OPERAND_BF16, .act_format = "bf16 (x rounded to bf16)"

/* run_cpu's answer for a case the kernel cannot take (see run_cpu). */
#define KERNEL_RUN_UNSUPPORTED (-2)

/* The registry, in a stable order. */
int kernel_count(void);
const kernel_desc_t *kernel_at(int i);
const kernel_desc_t *kernel_find(const char *name);

/* The first registry kernel with this role, or NULL. */
const kernel_desc_t *kernel_for_role(compare_role_t role);

/* A W4A8 GEMM: fp8 activations against an MXFP4 (e2m1) weight. */
int kernel_is_w4a8(const kernel_desc_t *k);

/* Does `name` match a comma-separated list of shell-style patterns
 * ("w4a8.*,w4a4.aiter")?  NULL or "" matches everything. */
int kernel_name_matches(const char *name, const char *patterns);

/* Why a kernel cannot run a shape, or NULL if it can. */
const char *kernel_unsupported_reason(const kernel_desc_t *k, int64_t M, int64_t N, int64_t K,
                                      char *buf, int cap);

#endif
