/* What every hypothesis family of the diagnosis shares: the row being
 * diagnosed, how an alternative is compared with the output, and how a
 * match is recorded (harness/judge/diagnose.h describes the engine). */
#ifndef KR_DIAG_CTX_H
#define KR_DIAG_CTX_H

#include <math.h>
#include <stdint.h>

#include "diagnose.h"

/* out against an alternative: rel_fro over elements finite on both sides
 * (denominator: the alternative's norm), and how many elements are
 * non-finite on exactly one side. */
typedef struct {
    double rel;
    int64_t nf_mismatch;
    int64_t finite;
} cmp_t;

/* The running sums behind a cmp_t, element by element, for the comparisons
 * that walk their own elements (diag_compare, the misreads' samples). */
typedef struct {
    cmp_t c;
    double num, den;
} cmp_acc_t;

/* One element: out o against the alternative a. */
static inline void cmp_acc_add(cmp_acc_t *s, double o, double a)
{
    const int fo = isfinite(o), fa = isfinite(a);
    if (fo != fa) {
        s->c.nf_mismatch++;
    } else if (fo) {
        s->c.finite++;
        s->num += (o - a) * (o - a);
        s->den += a * a;
    }
}

static inline cmp_t cmp_acc_result(const cmp_acc_t *s)
{
    cmp_t c = s->c;
    c.rel = s->den > 0 ? sqrt(s->num / s->den) : (s->num > 0 ? INFINITY : 0.0);
    return c;
}

typedef struct {
    const diag_input_t *d;
    diag_result_t *r;
    kr_error_t *err;
    int64_t M, N, K;
    double thr;
    cmp_t base;                 /* out vs ref over the judged rows */
    int is_source;              /* the reference is R_source: its operand is x */
    const float *A;             /* the reference's own operand, or NULL */
    float *alt;                 /* [M, N] scratch for alternatives */
    /* Rows whose input is non-finite: judged apart (the poisoned part), left
     * out of every hypothesis about the kernel.  NULL when there are none. */
    unsigned char *poisoned_rows;
    int64_t poisoned_count;
    char prefix[320];           /* what was said about the poisoned part, put before the line */
    char tried[320];
    int budget_hit;
    int place_checked;          /* a place whose content reproduces the output there waits (diagnose) */
    int gemm_too_big;           /* a family that needs a whole GEMM stepped aside (DIAG_GEMM_MAX_MACS) */
    int any_place;              /* localisation may name a place whose content is only "wrong" */
    int grammar_prims;          /* the grammar's primitives on this case, 0 = not tried */
    int64_t grammar_tried;      /* compositions screened */
    char nearest[320];          /* readings the output cannot tell apart (NaN everywhere), when none is stated */
} dctx_t;

/* Whether v is the harness's poison (bf16 0x7FC1, decoded): an output
 * element a kernel never wrote. */
int diag_is_poison(float v);

/* skip_rows / skip_cols (may be NULL): elements of those rows / columns are
 * left out; alt is multiplied by scale. */
cmp_t diag_compare(const float *out, const float *alt, int64_t M, int64_t N, float scale,
                   const unsigned char *skip_rows, const unsigned char *skip_cols);

/* out vs alt over the judged rows (the poisoned ones left out). */
cmp_t diag_compare_judged(const dctx_t *x, const float *alt, float scale);

/* The alternative agrees with the output within the row's threshold. */
int diag_good(const dctx_t *x, cmp_t c);

/* The alternative agrees, and clearly better than the reference does. */
int diag_explains(const dctx_t *x, cmp_t c);

/* Records that hypothesis `name` was tried (for the "tried ..." list). */
void diag_tried(dctx_t *x, const char *name);

/* Records the match: hypothesis h, residual rel, the line.  Returns 1. */
int diag_matched(dctx_t *x, diag_hypothesis_t h, double rel, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* The largest M * N * K whose whole fp32 GEMM a family may spend on a
 * hypothesis: about a second of two cores. */
#define DIAG_GEMM_MAX_MACS 2e9

/* Whether a whole GEMM is over DIAG_GEMM_MAX_MACS on this case (and notes it). */
int diag_gemm_too_big(dctx_t *x);

/* x->alt = R(A, W).  Returns 0, 1 when the GEMM budget is spent or the case is
 * over DIAG_GEMM_MAX_MACS, -1 on error. */
int diag_alt_gemm(dctx_t *x, const float *A, const mxfp4_weight_t *W);

/* "R_exact", "R_source", or "the reference". */
const char *diag_ref_name(const dctx_t *x);

/* What the output holds in rows r0..r1 x columns c0..c1: "all NaN", "all
 * zero", "negated", or its rel there. */
void diag_region_content(const dctx_t *x, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                         char *buf, int cap);

/* Evenly spread indices: up to `want` of 0..n-1 with mask[i] == 0 (mask may
 * be NULL) into idx; returns how many. */
int64_t diag_sample(int64_t n, int64_t want, const unsigned char *mask, int64_t *idx);

/* The hypothesis families (one file each in harness/diagnosis), each returning 1 on a
 * match, 0 when it does not explain the row, -1 on error. */
int diag_try_magnitude(dctx_t *x);
int diag_try_localise(dctx_t *x);       /* only places whose content tells (NaN, zero, negated, a
                                           pattern); the rest waits for diag_try_localise_any */
int diag_try_localise_any(dctx_t *x);
int diag_try_k_blocks(dctx_t *x);
int diag_try_grammar(dctx_t *x);       /* hyp_search.c: the hypothesis grammar */

/* facts.c: the line of a failing row no hypothesis reproduces: where, how
 * much, and the fp32 summation bound.  Returns 0, or -1 (out of memory). */
int diag_facts(dctx_t *x, char *buf, int cap);
int diag_try_acc_precision(dctx_t *x);  /* acc_fit.c: partial sums rounded to bf16 / fp16 */

#endif
