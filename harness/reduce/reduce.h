/* `kreplay reduce`: a failing row's case shrunk to a small case that fails
 * the same way.
 *
 * The property kept is the row's verdict and its diagnosis family
 * (diag_family.h): a candidate fails "the same way" when the replay of the
 * candidate through the same kernel, with the same options, gives the row
 * (kernel, reference) the same verdict and the same family -- so a crash or
 * a hang counts only when the original crashed or hung, and a place
 * diagnosis must name the same kind of place; an accumulation-precision
 * one the same model (the fit's own field, acc_fit.model).  A row without a diagnosis
 * keeps which side of its threshold rel_fro is on as well (a rounding bias
 * does not become a rel_fro failure).  A NONDETERMINISTIC row is kept only
 * by candidates that show it in REDUCE_CONFIRM_NONDET replays in a row (a
 * race shows less often on fewer outputs), and its family is not kept (the
 * diagnosis is of one run, whose wrong elements change from run to run).
 *
 * The search, each phase cutting the case the previous one left:
 *   rows     delta debugging over the activation rows, never below the
 *            kernel's M band minimum (a prefill kernel keeps M >= m_min);
 *   columns  delta debugging over the weight rows in units of the kernel's
 *            N multiple (16 when it declares none: the diagnosis's smallest
 *            tile and WPERM's fragment), a partial last unit being one item
 *            of its own, kept when the failure needs it;
 *   K        delta debugging over the 32-blocks in units of the kernel's K
 *            multiple, in x, x_fp8, the weight and its scales alike;
 *   (rows, columns and K again while one of them still shrinks);
 *   values   activation and weight blocks set to zero, weight scales to 127,
 *            x_scale to 1, what is left to one code (search_simplify), the
 *            NaN blocks kept only where the failure needs them.
 * Each candidate is a whole schema-v1 case (reduce_slice.h says how every
 * dataset is cut) replayed by replay_case, plugins isolated as always.
 *
 * A row of a recorded output (recorded.out, ...) is data, not a kernel: it
 * is cut by rows and columns only (the output is cut with them); K and the
 * values would change what the recorded output should have been.  A
 * kernel's row drops the recorded outputs from the start.
 *
 * For a given case, options and seed the reduction is deterministic when
 * the kernel is and the search is not cut short by --budget. */
#ifndef KR_REDUCE_H
#define KR_REDUCE_H

#include <stdint.h>
#include <stdio.h>

#include "case.h"
#include "diag_family.h"
#include "kr_error.h"
#include "replay.h"

/* What one replay says about the row. */
typedef struct {
    verdict_t verdict;                  /* VERDICT_COUNT: the replay has no such row */
    char family[DIAG_FAMILY_MAX];       /* "none" when not diagnosed */
    char diagnosis[384];
    char note[512];
    double rel_fro;
    int over_threshold;                 /* rel_fro > the row's threshold */
    char acc_model[24];                 /* the accumulation fit's best model (acc_fit_t) */
} reduce_outcome_t;

typedef struct {
    /* How every candidate is replayed: the extra kernels, numerics, policy,
     * isolation, reruns.  reduce sets kernel_patterns, refs,
     * include_recorded, diagnose and skip_identities itself. */
    replay_options_t replay;
    const char *kernel;         /* the row's kernel, or "recorded.out" / "recorded.out_rerun" /
                                   "recorded.aiter" / "recorded.ref" */
    const char *reference;      /* "R_exact", "R_source", "R_sanitized", "out_rerun" */
    double budget_s;            /* no candidate is started after this many seconds; <= 0: none */
    int64_t max_runs;           /* nor after this many replays; <= 0: none */
    uint64_t seed;              /* 0: chunks in order; else the order shuffled by it */
    const char *steps_dir;      /* each accepted candidate written there (step-NNN.h5), or NULL */
    FILE *log;                  /* the reduction's log, or NULL */
} reduce_options_t;

typedef struct {
    reduce_outcome_t before;            /* the original row */
    int64_t M0, N0, K0;                 /* the original's size */
    int64_t M, N, K;                    /* the reduced case's */
    int64_t runs;                       /* replays, the original's included */
    int64_t steps;                      /* candidates accepted */
    double seconds;
    int cut_short;                      /* --budget or --max-runs stopped the search */
    char stopped_by[64];                /* "--budget 300 s", "--max-runs 50" */
} reduce_report_t;

#define REDUCE_CONFIRM_NONDET 5

/* reduce_case's result when the row does not fail (nothing to keep). */
#define REDUCE_NOTHING_FAILS 1

/* Reduces c.  Returns 0 with *small the reduced case (owning its arrays),
 * REDUCE_NOTHING_FAILS with rep->before saying what the row was, or -1 with
 * err (the replay failed, the row is not in it, out of memory). */
int reduce_case(const case_t *c, const reduce_options_t *o, case_t *small, reduce_report_t *rep,
                kr_error_t *err);

/* One replay of c (o's options, its row only) and what it says of the row.
 * Returns 0, or -1 with err when the case cannot be replayed. */
int reduce_replay_row(const case_t *c, const reduce_options_t *o, reduce_outcome_t *out,
                      kr_error_t *err);

/* Does b fail the way a does: the same verdict and family (the verdict
 * alone for NONDETERMINISTIC), the same accumulation model for
 * acc_precision, and for a row without a diagnosis rel_fro on the same
 * side of its threshold? */
int reduce_same_way(const reduce_outcome_t *a, const reduce_outcome_t *b);

/* Is this row a recorded output's ("recorded.*")? */
int reduce_row_is_recorded(const char *kernel);

#endif
