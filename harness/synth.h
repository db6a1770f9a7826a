/* Synthetic schema-v1 cases with realistic operands: heavy-tailed
 * activations with outlier channels and per-token scale spread (optionally a
 * NaN head block and zero rows), and MXFP4 weights quantized from Gaussian
 * weights whose block magnitudes spread over many binades within a row, so
 * the folded W4A8 path's underflow is exercised.  Seeded and reproducible:
 * the same parameters give the same bytes. */
#ifndef KR_SYNTH_H
#define KR_SYNTH_H

#include <stdint.h>

#include "case.h"

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
    const char *layer;          /* provenance */
    const char *model;
} synth_params_t;

void synth_params_default(synth_params_t *p);

/* Fills c (owned arrays) from p.  Returns 0, or -1 with err set. */
int synth_case(const synth_params_t *p, case_t *c, kr_error_t *err);

#endif
