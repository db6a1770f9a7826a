/* Per-token fp8 activation quantizers: the variants that exist in the
 * production dispatch files, each selectable by name.  See docs/NUMERICS.md,
 * "fp8 per-token". */
#ifndef KR_QUANT_FP8_H
#define KR_QUANT_FP8_H

#include <stdint.h>

typedef enum {
    FP8_TOKEN_VLLM = 0,   /* vLLM dynamic_per_token_scaled_fp8_quant: NaN-ignoring amax,
                             s = fmaxf(amax/Q, 1/(Q*512)), r = clamp(x/s) (NaN -> +Q), RNE */
    FP8_TOKEN_TRACED,     /* the dispatch's _traced_quant: torch amax propagates NaN,
                             s = max(amax * fp32(1/448), 1/(448*512)), clamp, cast */
    FP8_TOKEN_PURE,       /* RADIANCE_MXFP4_PUREQUANT: s = max(amax, 1e-12) / 448, no 1/(448*512) floor */
    FP8_TOKEN_RECIPROCAL, /* torch-native vLLM path: x * reciprocal(s) instead of x / s */
    FP8_TOKEN_VARIANT_COUNT
} fp8_token_variant_t;

typedef enum {
    FP8_E4M3FN = 0,       /* Q = 448 */
    FP8_E4M3FNUZ,         /* Q = 224 (vLLM's choice for gfx942) */
} fp8_format_t;

const char *fp8_token_variant_name(fp8_token_variant_t v);
/* Returns 0 and sets *out for a known name ("vllm", "traced", "pure", "reciprocal"), else -1. */
int fp8_token_variant_from_name(const char *name, fp8_token_variant_t *out);

/* Quantizes one row of K fp32 values: q[K] fp8 codes and the row's fp32 scale. */
void fp8_token_quant_row(const float *x, int64_t K, fp8_token_variant_t v,
                         fp8_format_t fmt, uint8_t *q, float *scale);

/* Whole [M, K] matrix, row by row. */
void fp8_token_quant(const float *x, int64_t M, int64_t K, fp8_token_variant_t v,
                     fp8_format_t fmt, uint8_t *q, float *scale);

/* fp32 value the kernel's operand stands for: decode(q) * scale, rounded to fp32
 * (what the dispatch's _exact_ref builds as x_fp8.float() * x_scale). */
void fp8_token_dequant(const uint8_t *q, const float *scale, int64_t M, int64_t K,
                       fp8_format_t fmt, float *out);

#endif
