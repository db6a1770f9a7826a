/* Diagnosis of a failing row: which alternative explanation the output
 * matches (DESIGN.md, "Verdicts").  The hypothesis families live in
 * harness/judge/diagnosis/, one file each.
 *
 * An alternative "matches" when the output agrees with it within the row's
 * threshold (rel_fro over elements finite on both sides, and the same
 * elements non-finite on both sides) while it does not agree with the
 * reference.  A row that already agrees with its reference gets no
 * diagnosis ("no hypothesis needed").  Rows whose input is non-finite are
 * judged apart: what the kernel did with them is said first, and every
 * other hypothesis is tested on the finite rows only.
 *
 * Families, in the order tried.  The first match wins, except that a place
 * (rows, columns, a set of tiles) says only where: it is kept aside while
 * the later families run, and reported only when none of them explains
 * every element.  Against a reference not built from the kernel's operands
 * (R_sanitized) only the poisoned rows are discussed.  Each family that
 * rebuilds the reference checks first that its as-is model gives the
 * reference back on its sample.
 *   rows-poisoned   non-finite output rows are exactly the rows with non-finite
 *                   input (and whether the 'traced' quantizer explains them); or
 *                   the reference's non-finite rows are
 *   scale-pow2/const out = s ref, s fitted by Huber-weighted least squares; 2^k when
 *                   2^k fits as well as s (diagnosis/magnitude.c)
 *   rows/columns/tiles  error maps over rows, columns and 16x16 / 64x64 tiles, each
 *                   judged by its own rel: one run (a partial M or N tile), parity,
 *                   a stride (the first/last line of every tile), several runs, a
 *                   set of tiles, every tile transposed (diagnosis/localise.c)
 *   k-blocks        out fitted as sum_b c_b P_b over the 32-block partial products
 *                   of the reference: blocks missing, x 2^k, x c (diagnosis/k_blocks.c)
 *   wperm-undone    out = R(A, unpermute_w(W))            (1 GEMM; N, K % 16)
 *   wperm-applied   out = R(A, permute_w(W))              (1 GEMM; N, K % 16)
 *   scale-layout    out = R(A, W with its scales read in the other layout) (1 GEMM)
 *   grammar         every composition of at most two primitives of the hypothesis grammar
 *                   (diagnosis/grammar.c) the shape allows, screened on a small sample,
 *                   re-evaluated bit for bit and ranked on a larger one, the best confirmed
 *                   on a larger one still and stated only when it reproduces the output
 *                   (diagnosis/hyp_search.c); the runner-up named when close
 *   acc-precision   out = the kernel's operands summed with partial sums rounded to bf16
 *                   or fp16 (every element, every 32/64/128-K block, split-K partials),
 *                   on a sample, against fp32 accumulation (diagnosis/acc_fit.c); also
 *                   tried on a row whose rel passes (the judgement fails such a fit)
 *   sanitized       out = R(Q(nan_to_num(x)), W)          (1 GEMM; x non-finite)
 *   unsanitized     out = R(Q(x), W) where the reference's A differs from Q(x) (1 GEMM)
 *   quant-variant   out = R(Q_v(x), W) for each other quantizer variant v
 * A is the reference's own operand: act->dequant for R_exact, x for R_source.
 * Q is the kernel's quantizer (act->kind; kopt's variant). */
#ifndef KR_DIAGNOSE_H
#define KR_DIAGNOSE_H

#include <stdint.h>

#include "case.h"
#include "kr_error.h"
#include "registry.h"
#include "result.h"

typedef struct {
    const case_t *c;               /* provenance (weight_order, env_flags); may be NULL */
    const kernel_inputs_t *in;     /* operands as the harness gave the kernel: checkpoint-order weight */
    const kernel_act_t *act;       /* the activations R_exact was built from; may be NULL */
    const acc_fit_t *fit;          /* the row's accumulation fit and fp32 bound; may be NULL */
    const char *kernel;            /* the row's kernel ("recorded.*" = a production output); may be NULL */
    const float *out;              /* [M, N] the output being diagnosed, fp32 (decoded bf16) */
    const float *ref;              /* [M, N] the reference it failed against */
    const char *ref_name;          /* "R_exact" / "R_source" */
    double threshold;              /* rel_fro threshold of the row */
    const kernel_options_t *kopt;  /* the quantizer variants in use; NULL = defaults */
    int max_gemms;                 /* extra fp32 GEMMs allowed; 0 = no limit */
    int failed;                    /* the row failed its judgement: a line is always written (an
                                      explanation, or what is known for certain), never "none
                                      needed" */
    int64_t row_offset;            /* out/ref are rows row_offset.. of the case's output
                                      (a row-block replay): row numbers are reported as
                                      the case's */
} diag_input_t;

typedef enum {
    DIAG_NONE = 0,          /* nothing matched */
    DIAG_CLEAN,             /* the output already matches the reference */
    DIAG_ROWS_POISONED,
    DIAG_REF_ROWS_POISONED,
    DIAG_SCALE_POW2,
    DIAG_SCALE_CONST,
    DIAG_COLUMNS,
    DIAG_WPERM_UNDONE,
    DIAG_WPERM_APPLIED,
    DIAG_SCALE_LAYOUT,
    DIAG_SANITIZED,
    DIAG_UNSANITIZED,
    DIAG_QUANT_VARIANT,
    DIAG_ROWS,
    DIAG_TILES,
    DIAG_K_BLOCKS,
    DIAG_MISREAD,
    DIAG_ACC_PRECISION,
    DIAG_GRAMMAR,
    DIAG_COUNT
} diag_hypothesis_t;

typedef struct {
    int matched;                   /* 1 when a hypothesis explains the row */
    diag_hypothesis_t hypothesis;
    char line[384];                /* one line: the match, or what is known for certain */
    int checked;                   /* 1: the line states an explanation checked to reproduce the
                                      output (bit-identical on the sampled outputs, or within the
                                      row's threshold), or a measured fact that fails the row */
    double rel;                    /* rel_fro(out, alternative) of the match; else rel_fro(out, ref) */
    double base_rel;               /* rel_fro(out, ref) over elements finite on both sides */
    int64_t base_nonfinite_mismatch; /* elements non-finite on exactly one side */
    int gemms;                     /* extra fp32 GEMMs spent */
    verdict_t verdict_hint;        /* what the explanation makes a WRONG / MAGNITUDE row:
                                      MAGNITUDE for a factor, WRONG for anything else that
                                      explains it; VERDICT_COUNT = no opinion */
} diag_result_t;

/* "rows-poisoned", "scale-pow2", ... */
const char *diag_hypothesis_name(diag_hypothesis_t h);

/* Verdicts that get a diagnosis by default: WRONG, MAGNITUDE, NONFINITE_OUT,
 * POISONED_INPUT (the last two only say something when the output's
 * non-finite elements differ from the reference's). */
int diag_wanted(verdict_t v);

/* Fills r.  Returns 0 (matched or not), or -1 with err set (allocation
 * failure, or a GEMM failing). */
int diagnose(const diag_input_t *d, diag_result_t *r, kr_error_t *err);

/* The line of a row whose verdict has no output to diagnose (CRASHED,
 * TIMEOUT, OOB_WRITE, NONDETERMINISTIC, ERROR, ...): what that verdict
 * establishes, the note having the particulars; "" for a verdict that is
 * not a failure. */
void diag_no_output_line(verdict_t v, char *buf, int cap);

/* r's verdict_hint (see there). */
verdict_t diag_verdict_hint(const diag_result_t *r);

/* Applies r's hint to a WRONG or MAGNITUDE verdict (other verdicts are left
 * alone): MAGNITUDE vs WRONG is the fit's decision, not |out|/|ref|'s. */
verdict_t diag_refine_verdict(const diag_result_t *r, verdict_t v);

#endif
