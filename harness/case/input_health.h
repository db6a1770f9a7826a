/* Health of a case's activations: where the non-finite values are, which
 * blocks they form, and what each activation quantizer makes of them. */
#ifndef KR_INPUT_HEALTH_H
#define KR_INPUT_HEALTH_H

#include <stdint.h>

#include "case.h"
#include "metrics.h"

typedef struct {
    nonfinite_t x_nf;        /* of x (if present) */
    int64_t x_fp8_nan;       /* NaN codes in the recorded x_fp8 (if present) */
    int64_t x_scale_nonfinite;
    int64_t rows_hit, cols_hit;     /* rows / columns of x with any non-finite element */
} input_health_t;

void input_health_compute(const case_t *c, input_health_t *h);

/* One line, e.g. "x: 2176 non-finite (2176 NaN, 0 +Inf, 0 -Inf) in 17 rows x 128 columns". */
void input_health_describe(const input_health_t *h, char *buf, int cap);

/* ---- Maps: per-row and per-column counts, blocks, propagation ---- */

/* A maximal rectangle of non-finite elements: rows r0..r1 x columns c0..c1
 * (inclusive), every element of it non-finite. */
typedef struct {
    int64_t r0, r1, c0, c1;
    nonfinite_t nf;          /* what the block holds */
} nf_block_t;

/* Blocks kept in an input_map_t; more are counted but not stored. */
#define INPUT_MAP_MAX_BLOCKS 64

/* What the activation quantizers make of the non-finite elements, found by
 * running them on the hit rows (docs/NUMERICS.md, "Activation quantizers"). */
typedef struct {
    /* fp8 per-token, vLLM (NaN-ignoring amax; clamp sends NaN to +Q) */
    int64_t vllm_to_pos_max;        /* non-finite elements whose code is +Q (448 on e4m3fn) */
    int64_t vllm_to_neg_max;        /* ... -Q */
    int64_t vllm_to_nan;            /* ... a NaN code */
    int64_t vllm_to_other;          /* ... any other finite code */
    int64_t vllm_from_nan_to_pos_max; /* the NaN elements among vllm_to_pos_max */
    int64_t vllm_scale_nonfinite;   /* rows whose scale is not finite (an Inf in the row) */
    /* fp8 per-token, traced (_traced_quant: torch amax propagates NaN) */
    int64_t traced_rows_all_nan;    /* hit rows whose every code is NaN */
    int64_t traced_rows_some_nan;   /* hit rows with some, not all, NaN codes */
    int64_t traced_nan_codes;       /* NaN codes over all rows */
    /* MXFP4 aiter-even, per 32-block along K (codes are always finite) */
    int64_t mx_blocks_hit;          /* blocks with any non-finite element */
    int64_t mx_blocks_all_nan;      /* blocks entirely NaN */
    int64_t mx_all_nan_scale_254;   /* of those, how many got scale byte 254 (2^127) */
    int64_t mx_blocks_inf;          /* blocks holding an Inf */
    int64_t mx_inf_scale_254;       /* of those, how many got scale byte 254 */
    int64_t mx_blocks_partial_nan;  /* NaN but no Inf and not all NaN: the scale stays finite */
    /* MXFP4 ocp / ceil: a non-finite block gets the e8m0 NaN scale 0xFF */
    int64_t ocp_nan_scale_blocks;
} input_propagation_t;

typedef struct {
    int64_t M, K;
    nonfinite_t nf;
    int64_t *row_count;         /* [M] non-finite elements per row */
    int64_t *col_count;         /* [K] non-finite elements per column */
    int64_t rows_hit, cols_hit;
    nf_block_t *blocks;         /* blocks_stored of them, ordered by first row then column */
    int64_t block_count;        /* every block found (may exceed blocks_stored) */
    int64_t blocks_stored;
    int propagation_done;       /* K % 32 == 0 and the quantizers were run */
    input_propagation_t prop;
} input_map_t;

/* Maps x[M, K].  Blocks are the maximal rectangles that rows with identical
 * runs of non-finite columns form: a run [c0, c1] in row r continues a block
 * whose last row r-1 had exactly that run; any other run starts a new
 * block.  A solid rectangle is therefore one block, two disjoint ones are two.
 * Propagation runs the quantizers on the hit rows only.  Returns 0, or -1
 * with err set (allocation failure).  Free with input_map_free. */
int input_map_compute(const float *x, int64_t M, int64_t K, input_map_t *m, kr_error_t *err);
void input_map_free(input_map_t *m);

/* Several '\n'-separated lines, e.g.
 *   x: 2176 non-finite (2176 NaN, 0 +Inf, 0 -Inf) in 17 rows x 128 columns
 *   block: rows 0-16 x columns 1024-1151 (17 x 128 = 2176 NaN): one 128-wide block, a whole GDN head if heads are 128 wide
 *   rows hit: 0-16 (all 17); columns hit: 1024-1151
 *   propagation: fp8 vllm: 2176 NaN -> +448 (finite); fp8 traced: 17 of 17 rows entirely NaN; mxfp4 aiter-even: finite codes, 68 all-NaN blocks got scale 2^127
 * or "x: all finite".  Returns the length written (snprintf-style, cut at cap). */
int input_map_describe(const input_map_t *m, char *buf, int cap);

/* One block as "rows 0-16 x columns 1024-1151 (17 x 128 = 2176 NaN)". */
int nf_block_describe(const nf_block_t *b, char *buf, int cap);

/* The set bits of mask[0..n) as index ranges, "0-16, 20, 31-32"; at most
 * max_ranges ranges are written, then ", ... (N ranges)".  Returns the number
 * of ranges. */
int64_t index_ranges_format(const unsigned char *mask, int64_t n, int max_ranges, char *buf,
                            int cap);
/* Same, with every index written as first + i (mask covers indices first.. of a
 * larger range). */
int64_t index_ranges_format_from(const unsigned char *mask, int64_t n, int64_t first,
                                 int max_ranges, char *buf, int cap);

#endif
