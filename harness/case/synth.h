/* Synthetic schema-v1 cases with realistic operands: heavy-tailed
 * activations with outlier channels and per-token scale spread (optionally a
 * NaN head block and zero rows), and MXFP4 weights quantized from Gaussian
 * weights whose block magnitudes spread over many binades within a row, so
 * the folded W4A8 path's underflow is exercised.  Seeded and reproducible:
 * the same parameters give the same bytes.
 *
 * The weight format: MXFP4 (the default), bf16 (weight_bf16: the same
 * Gaussian weights rounded to bf16, for the unquantized-layer kernels), or
 * both (the MXFP4 weight is the OCP quantization of the very weights the
 * bf16 one rounds).  The random stream does not depend on the format, so x
 * and the MXFP4 weight are the same bytes whichever is asked for. */
#ifndef KR_SYNTH_H
#define KR_SYNTH_H

#include <stdint.h>

#include "case.h"

typedef enum {
    SYNTH_WEIGHT_MXFP4 = 0,     /* weight + weight_scale (+ weight_ref, x_fp8/x_scale) */
    SYNTH_WEIGHT_BF16,          /* weight_bf16 only (no x_fp8/x_scale, no weight_ref) */
    SYNTH_WEIGHT_BOTH,          /* both, from the same Gaussian weights */
} synth_weight_format_t;

/* "mxfp4" / "bf16" / "both"; *_from_name returns 0 and sets *out, or -1. */
const char *synth_weight_format_name(synth_weight_format_t f);
int synth_weight_format_from_name(const char *s, synth_weight_format_t *out);

typedef struct {
    int64_t M, N, K;
    uint64_t seed;
    int outlier_channels;       /* channels scaled by outlier_gain (default 4) */
    double outlier_gain;        /* default 100 */
    double token_spread;        /* sigma of log2 of the per-token scale (default 1.5) */
    double weight_exp_spread;   /* mean binades a block sits below its row's largest (default 3) */
    int64_t nan_rows, nan_cols; /* a NaN block of nan_rows x nan_cols (0 = none) */
    int64_t nan_col0;           /* its first column */
    int64_t zero_rows;          /* the last zero_rows rows of x are all zero */
    scale_layout_t scale_layout;
    weight_order_t weight_order;
    synth_weight_format_t weight_format;    /* default SYNTH_WEIGHT_MXFP4 */
    const char *layer;          /* provenance */
    const char *model;
} synth_params_t;

void synth_params_default(synth_params_t *p);

/* Fills c (owned arrays) from p.  Returns 0, or -1 with err set. */
int synth_case(const synth_params_t *p, case_t *c, kr_error_t *err);

#endif
