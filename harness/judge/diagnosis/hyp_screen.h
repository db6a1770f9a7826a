/* The screen of the grammar's compositions: every composition of at most
 * two primitives (grammar.h) that can move the output by more than a
 * rounding, evaluated in real arithmetic on a small sample of outputs and
 * kept when it comes close to the output there.
 *
 * The output is a sum over K of an activation term and a weight term, each
 * a product of codes and block scales, times a per-output factor, stored at
 * a position.  So a composition splits by where its primitives act, and the
 * screen evaluates each part once and combines them:
 *   x codes    (activation codes, their index and value maps)     rows x K
 *   x blocks   (W4A4 activation block scales)                     rows x K/32
 *   w codes    (weight codes, element K ranges)                   columns x K
 *   w blocks   (weight block scales, block K ranges)              columns x K/32
 *   factor     (W4A8 x_scale, the output's sign)                  per output
 *   target     (the output's index maps, its encoding, |out|)     per output
 * per-block partial sums of each (x codes, w codes) pair of depth <= 1 are
 * kept, so a composition with block scales costs K/32 multiply-adds an
 * output, and only the pairs of code maps cost K.  Primitives that move
 * the output by rounding-sized amounts only (grammar.h's `fine`) are left to
 * the bit-faithful stage (hyp_search.c). */
#ifndef KR_HYP_SCREEN_H
#define KR_HYP_SCREEN_H

#include <stdint.h>

#include "hyp_eval.h"

typedef struct {
    g_hyp_t h;
    double rel;             /* on the screen's sample */
} g_cand_t;

typedef struct {
    const g_ops_t *g;
    const float *out;               /* [M, N] the kernel's output */
    const int64_t *rows, *cols;     /* the sample: rows x columns */
    int r0, c0;
    double keep_rel;                /* keep a composition within this residual */
    g_cand_t *cands;                /* [cap] best first */
    int n_cands, cap;
    double base_rel;                /* the kernel as specified, on the sample */
    int64_t base_nf;
    int64_t screened;               /* compositions evaluated */
    int singles_only;               /* 1: the primitives alone, no pairs */
} g_screen_t;

/* Screens every coarse composition of depth <= 2 (and the empty one).
 * Returns 0, or -1 when out of memory. */
int g_screen_run(g_screen_t *s);

#endif
