/* The one judgement: every verdict that follows from metrics is decided here,
 * from a row's metrics and one rule, whoever asks (replay, compare, gate).
 *
 * The rule comes from the policy (cases/policies/, policy.h), else from the
 * derived rule of the kernel's formats, else -- the rule of last resort --
 * from the kernel descriptor's tolerance.
 *
 * Rows whose inputs are non-finite are judged apart (metrics_t.rows_apart):
 * the rows with finite inputs are judged by the same rule as a clean case and
 * fail when wrong; the rows apart are reported, never judged.  Order:
 *   - verdicts that are not about metrics (UNSUPPORTED, ERROR,
 *     NONDETERMINISTIC, MODEL_MISMATCH, OOB_WRITE, CRASHED, TIMEOUT,
 *     REGRESSED) stand, with their note;
 *   - no row with finite inputs: POISONED_INPUT;
 *   - a reference that is exactly zero: PASS when the output is exactly zero
 *     too, else WRONG with the absolute error (relative error is undefined);
 *   - rel_fro over (NaN counts as over), then worst_row_rel over: MAGNITUDE
 *     when |out|/|ref| is outside [1/2, 2], else WRONG;
 *   - more non-finite outputs than the reference has (rows apart excluded),
 *     under nonfinite: forbid: NONFINITE_OUT;
 *   - model: rows (--vs): an element NaN or Inf on one side only: WRONG;
 *   - R_exact and model: rows: a rounding bias over bias_z and bias_frac: WRONG;
 *   - max_ulp over, identical fraction under: WRONG;
 *   - else PASS, or POISONED_INPUT when rows were judged apart. */
#ifndef KR_JUDGE_H
#define KR_JUDGE_H

#include "kr_error.h"
#include "policy.h"
#include "registry.h"
#include "result.h"

/* Where a case's non-finite inputs are, for the notes of its rows judged
 * apart: "x: rows 0-16 x columns 128-255 (17 x 128 = 2176 NaN)"; "" when
 * none. */
typedef struct {
    char where[256];
} judge_poison_t;

/* Fills p from x [M, K] (x may be NULL: nothing to say).  Returns 0, or -1
 * with err set when out of memory. */
int judge_poison_locate(const float *x, int64_t M, int64_t K, judge_poison_t *p, kr_error_t *err);

/* The rule for a row: the policy's first match (an R_sanitized row without
 * its own rule takes R_source's), else the derived rule of k (or of the
 * kernel the row's name resolves to), else rel_fro <= fallback_tol (the
 * descriptor's tolerance, origin says so).  p and k may be NULL. */
void judge_rule_for(const policy_t *p, const kernel_desc_t *k, const result_t *row,
                    double fallback_tol, policy_rule_t *rule);

/* The verdict of row by rule, with a one-line note naming the metric, its
 * value, the threshold and the rule's origin; poison (may be NULL) adds where
 * the rows judged apart come from.  row->act_origin names the quantizer. */
verdict_t judge_row(const policy_rule_t *rule, const result_t *row, const judge_poison_t *poison,
                    char *note, int cap);

/* judge_row without poison: a row's metrics judged by a rule a policy gave
 * (policy.h produces the rules, this judges by them). */
verdict_t policy_apply(const policy_rule_t *rule, const result_t *row, char *note, int cap);

/* The calibrated default policy (cases/policies/default.yaml of the source
 * tree).  Returns 0, or -1 with err naming the file. */
int judge_default_policy(policy_t *p, kr_error_t *err);

#endif
