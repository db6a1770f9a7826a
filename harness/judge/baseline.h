/* baseline: compare a run with a stored baseline run (results_store.h).
 *
 * Rows are matched by identity (case_name, case_id, kernel, reference): the
 * case's name and the digest of its operands, never its path, so a run from
 * another working directory or with absolute paths matches the same rows;
 * equal identities pair up in order.  Each run row is then
 *   REGRESSED  any of the rules below fires;
 *   IMPROVED   none fires and some metric is better beyond the same tolerance
 *              (the rule applied with baseline and run swapped), or a failing
 *              verdict stopped failing, or a row the baseline could not
 *              measure (UNSUPPORTED) now is;
 *   UNCHANGED  otherwise;
 *   NEW        no baseline row has its key;
 * and each unmatched baseline row is MISSING.
 *
 * Regression rules (tol = baseline_tol_t; defaults rel 0.10, abs 1e-6, ulp 0):
 *   - rel_fro, worst_row_rel: new > base * (1 + tol.rel) + tol.abs.  NaN counts
 *     as worse than any number (a metric that could be computed no longer can).
 *   - identical_frac: its complement, the differing fraction 1 - frac, by the
 *     same rule: (1 - new) > (1 - base) * (1 + tol.rel) + tol.abs.
 *   - bit-identical: base had ulp.identical == ulp.count > 0 and the run does
 *     not: "was bit-identical, now N elements differ", whatever the tolerance.
 *   - max_ulp: new > base + tol.ulp.
 *   - non-finite outputs (NaN + Inf of metrics.out_nf): any increase.
 *   - verdict: base not failing, run failing (verdict_is_failure).
 *   - coverage: base compared elements (ulp.count or metrics.count > 0), run
 *     compared none.
 * Every finding is one clause of the entry's note naming the metric, the run's
 * value, the baseline's and the tolerance, e.g.
 *   "rel_fro worse: 0.0013 vs baseline 0.001 (allowed 0.001101 = base x 1.1 + 1e-06)".
 *
 * baseline_compare also marks the run: a REGRESSED row whose verdict does not
 * already fail becomes VERDICT_REGRESSED with note "baseline: <findings> | <old
 * note>"; a row that already fails (WRONG, MAGNITUDE, ...) keeps that more
 * specific verdict and gets " | baseline: <findings>" appended.  Either way the
 * row's regressed_metric, regressed_base and regressed_run name the first
 * finding that has numbers ("identical_frac", 0.934, 0.924), else the first
 * finding ("verdict", "out_digest": NaN values), for the report's columns. */
#ifndef KR_BASELINE_H
#define KR_BASELINE_H

#include <stdint.h>
#include <stdio.h>

#include "kr_error.h"
#include "result.h"
#include "results_store.h"

#define BASELINE_TOL_REL_DEFAULT 0.10
#define BASELINE_TOL_ABS_DEFAULT 1e-6

typedef struct {
    double rel;     /* relative slack on error metrics (0.10: 10% worse is still unchanged) */
    double abs;     /* absolute slack, so a zero baseline does not flag 1e-12 noise */
    uint64_t ulp;   /* slack on max_ulp, in ULPs (0: any increase regresses) */
} baseline_tol_t;

void baseline_tol_default(baseline_tol_t *t);

typedef enum {
    BASELINE_UNCHANGED = 0,
    BASELINE_REGRESSED,
    BASELINE_IMPROVED,
    BASELINE_NEW,
    BASELINE_MISSING,
    BASELINE_CLASS_COUNT
} baseline_class_t;

const char *baseline_class_name(baseline_class_t c);   /* "UNCHANGED", "REGRESSED", ... */

typedef struct {
    baseline_class_t cls;
    int64_t run_index;      /* row of run, -1 for MISSING */
    int64_t base_index;     /* row of base, -1 for NEW */
    char note[768];
} baseline_entry_t;

typedef struct {
    baseline_entry_t *entries;  /* one per run row in run order, then MISSING in base order */
    int64_t count;
    int64_t n[BASELINE_CLASS_COUNT];
} baseline_report_t;

/* Fills *rep (free with baseline_report_free) and marks regressed run rows.
 * tol NULL: the defaults.  Returns 0, or -1 if out of memory (*rep empty and
 * run untouched). */
int baseline_compare(result_list_t *run, const result_list_t *base, const baseline_tol_t *tol,
                     baseline_report_t *rep);

void baseline_report_free(baseline_report_t *rep);

/* Did anything regress? */
int baseline_report_failed(const baseline_report_t *rep);

/* Does the run fail the gate against the baseline: anything REGRESSED, or
 * any baseline row MISSING unless allow_missing (a sharded or filtered run
 * lacks rows legitimately)?  NEW rows never fail. */
int baseline_gate_failed(const baseline_report_t *rep, int allow_missing);

/* Refuses (-1, err says how to re-create it) a baseline whose rows lack
 * case_id: written before rows carried their case's content digest. */
int baseline_check_identity(const result_list_t *base, const char *path, kr_error_t *err);

/* Refuses a baseline that cannot tell a run anything: one of 0 rows (every
 * row of any run would be NEW, and NEW rows never fail), one with a row
 * twice (results_validate.h), and -- unless allow_other_suite -- one of
 * another suite than suite_name (by the provenance's suite_name; every row
 * would be MISSING or NEW).  base_meta: the baseline file's provenance. */
int baseline_check_usable(const result_list_t *base, const results_meta_t *base_meta,
                          const char *path, const char *suite_name, int allow_other_suite,
                          kr_error_t *err);

/* Counts line, then one line per REGRESSED, IMPROVED, NEW and MISSING entry:
 * "REGRESSED  case:kernel/reference  note". */
void baseline_report_print(FILE *fp, const baseline_report_t *rep, const result_list_t *run,
                           const result_list_t *base);

#endif
