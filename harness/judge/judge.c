#include "judge.h"

#include "act_prepare.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "diagnosis/acc_fit.h"
#include "diagnosis/fp32_bound.h"
#include "input_health.h"
#include "kr_string.h"
#include "verdict.h"
#include "row_reference.h"

#ifndef KREPLAY_SOURCE_DIR
#define KREPLAY_SOURCE_DIR "."
#endif

int judge_default_policy(policy_t *p, kr_error_t *err)
{
    return policy_load(KREPLAY_SOURCE_DIR "/cases/policies/default.yaml", p, err);
}

int judge_poison_locate(const float *x, int64_t M, int64_t K, judge_poison_t *p, kr_error_t *err)
{
    p->where[0] = '\0';
    if (!x || M <= 0 || K <= 0)
        return 0;
    input_map_t map;
    if (input_map_compute(x, M, K, &map, err))
        return -1;
    if (map.block_count > 0) {
        char block[160];
        nf_block_describe(&map.blocks[0], block, sizeof block);
        if (map.block_count == 1)
            snprintf(p->where, sizeof p->where, "x: %s", block);
        else
            snprintf(p->where, sizeof p->where, "x: %lld blocks, first %s", (long long)map.block_count,
                     block);
    }
    input_map_free(&map);
    return 0;
}

/* An external kernel (a plugin, a Python kernel) is judged as the registry
 * model of its family is: that model's policy rule (worst_row_rel, the
 * bias limits, the non-finite rule) when the policy has one. */
static const policy_rule_t *family_rule(const policy_t *p, const kernel_desc_t *k, const result_t *row)
{
    if (!k || !k->rules_of || kernel_find(row->kernel))
        return NULL;
    const policy_rule_t *m = policy_match(p, k->rules_of->name, row->reference, row->band);
    if (!m && !strcmp(row->reference, ROW_REF_SANITIZED))
        m = policy_match(p, k->rules_of->name, "R_source", row->band);
    return m;
}

void judge_rule_for(const policy_t *p, const kernel_desc_t *k, const result_t *row,
                    double fallback_tol, policy_rule_t *rule)
{
    const policy_rule_t *m = policy_match(p, row->kernel, row->reference, row->band);
    if (!m && !strcmp(row->reference, ROW_REF_SANITIZED))
        m = policy_match(p, row->kernel, "R_source", row->band);
    if (m) {
        *rule = *m;
        return;
    }
    const policy_rule_t *fam = family_rule(p, k, row);
    if (fam) {
        *rule = *fam;
        /* identical_min and max_ulp measure the model's own summation order
         * against R_exact's; another correct order may differ more in the
         * last bit (the fp32 bound checks any order instead). */
        rule->identical_min = NAN;
        rule->max_ulp = -1;
        kr_strlcpy(rule->kernel, row->kernel, sizeof rule->kernel);
        char origin[sizeof rule->origin + 96];
        snprintf(origin, sizeof origin, "%.63s's rule, its family's model: %s", k->rules_of->name, fam->origin);
        kr_strlcpy(rule->origin, origin, sizeof rule->origin);
        return;
    }
    if (k && policy_derived_rule(k, row->reference, row->K, rule) == 0) {
        /* An external kernel the policy has no rule for gets the worst-row
         * rule too: the derived bound holds row by row as it does for the
         * whole output. */
        if (k->rules_of && !kernel_find(row->kernel) && isnan(rule->worst_row_rel))
            rule->worst_row_rel = rule->rel_fro;
        kr_strlcpy(rule->kernel, row->kernel, sizeof rule->kernel);
        return;
    }
    if (policy_rule_for(NULL, row->kernel, row->reference, row->band, row->K, rule) == 0)
        return;
    policy_rule_init(rule, row->kernel, row->reference);
    rule->rel_fro = fallback_tol;
    snprintf(rule->origin, sizeof rule->origin, "the kernel descriptor's tolerance");
}

static int keeps_verdict(verdict_t v)
{
    switch (v) {
    case VERDICT_UNSUPPORTED:
    case VERDICT_ERROR:
    case VERDICT_NONDETERMINISTIC:
    case VERDICT_MODEL_MISMATCH:
    case VERDICT_OOB_WRITE:
    case VERDICT_CRASHED:
    case VERDICT_TIMEOUT:
    case VERDICT_REGRESSED:
        return 1;
    default:
        return 0;
    }
}

static int64_t nf_minus(const nonfinite_t *all, const nonfinite_t *apart)
{
    return nonfinite_total(all) - nonfinite_total(apart);
}

/* The rounding-bias check of R_exact and model: rows: how far the
 * differing elements lean to one side, and which rounding they fit. */
static int biased(const policy_rule_t *rule, const result_t *row, char *note, int cap)
{
    if (strcmp(row->reference, "R_exact") && strncmp(row->reference, ROW_REF_MODEL_PREFIX, strlen(ROW_REF_MODEL_PREFIX)))
        return 0;
    const ulp_stats_t *u = &row->ulp;
    const int64_t t = u->toward_zero, a = u->away_zero, n = t + a;
    if (n <= 0 || isnan(rule->bias_z) || isnan(rule->bias_frac))
        return 0;
    const double lean = fabs((double)(t - a)) / (double)n;
    const double z = fabs((double)(t - a)) / sqrt((double)n);
    if (!(z > rule->bias_z && lean > rule->bias_frac))
        return 0;
    /* Significant is not yet material: a lean over a tiny share of the
     * outputs from a kernel that rounds to nearest even is arithmetic inside
     * the matrix unit, not a rounding bug. */
    const int fit = ulp_round_fit(u);
    const double share = u->count ? fabs((double)(t - a)) / (double)u->count : 0.0;
    const int odd_rounding = fit >= 0 && fit != ROUND_NEAREST_EVEN;
    if (!odd_rounding && !(isnan(rule->bias_share) || share > rule->bias_share))
        return 0;
    const double mean = u->count ? (double)u->signed_ulp_sum / (double)u->count : 0.0;
    int len = snprintf(note, (size_t)cap,
                       "biased rounding: %lld of %lld differing outputs %s zero (z %.1f > %g, lean %.3f > %g), "
                       "mean signed ULP %+.3f, net %.3g of the outputs",
                       (long long)(t > a ? t : a), (long long)n, t > a ? "toward" : "away from", z,
                       rule->bias_z, lean, rule->bias_frac, mean, share);
    if (fit >= 0 && len > 0 && len < cap)
        len += snprintf(note + len, (size_t)(cap - len),
                        "; the outputs fit %s rounding of the reference (%lld of %lld deciding elements; "
                        "nearest-even %lld)",
                        round_mode_name((round_mode_t)fit), (long long)u->round_match[fit],
                        (long long)u->round_decided, (long long)u->round_match[ROUND_NEAREST_EVEN]);
    if (len > 0 && len < cap)
        snprintf(note + len, (size_t)(cap - len), " (%s)", rule->origin);
    return 1;
}

/* The verdict of the rows with finite inputs. */
static verdict_t judge_finite_part(const policy_rule_t *rule, const result_t *row, char *note, int cap)
{
    const metrics_t *m = &row->metrics;
    const char *origin = rule->origin;
    const int64_t out_bad = nf_minus(&m->out_nf, &m->out_nf_apart);
    const int64_t ref_bad = nf_minus(&m->ref_nf, &m->ref_nf_apart);
    /* MAGNITUDE only when one factor explains the output: the best factor s
     * leaves out - s ref with relative size sqrt(1 - cosine^2), and that must
     * be within the rule; a ratio alone is not a scale error. */
    const double factor_resid = isnan(m->cosine) ? INFINITY : sqrt(fmax(0.0, 1.0 - m->cosine * m->cosine));
    const int magnitude = (m->mag_ratio < 1.0 / MAGNITUDE_FACTOR || m->mag_ratio > MAGNITUDE_FACTOR) &&
                          factor_resid <= rule->rel_fro;
    const int forbid = rule->nonfinite == POLICY_NONFINITE_FORBID;

    if (m->finite_count == 0) {
        if (forbid && out_bad > ref_bad) {
            snprintf(note, (size_t)cap, "%lld non-finite outputs (%lld NaN, %lld +Inf, %lld -Inf) from finite input (%s)",
                     (long long)out_bad, (long long)(m->out_nf.nan - m->out_nf_apart.nan),
                     (long long)(m->out_nf.pos_inf - m->out_nf_apart.pos_inf),
                     (long long)(m->out_nf.neg_inf - m->out_nf_apart.neg_inf), origin);
            return VERDICT_NONFINITE_OUT;
        }
        snprintf(note, (size_t)cap, "no finite element to compare (%s)", origin);
        return VERDICT_WRONG;
    }
    if (isnan(m->rel_fro)) {
        /* ||ref|| = 0 over the finite pairs: relative error is undefined,
         * the absolute error decides. */
        if (m->max_abs == 0.0 && !(forbid && out_bad > ref_bad)) {
            snprintf(note, (size_t)cap, "the reference is exactly zero and so is the output (absolute error 0; %s)",
                     origin);
            return VERDICT_PASS;
        }
        if (m->max_abs > 0.0) {
            const int64_t N = row->N > 0 ? row->N : 1;
            snprintf(note, (size_t)cap,
                     "the reference is exactly zero, the output is not: relative error undefined; absolute "
                     "||out - ref||_F %.4g, max |out - ref| %.4g at row %lld column %lld (%s)",
                     m->abs_fro, m->max_abs, (long long)(m->max_abs_index / N),
                     (long long)(m->max_abs_index % N), origin);
            return VERDICT_WRONG;
        }
    }
    const double rel = m->rel_fro;
    if (!isnan(rel) && !(rel <= rule->rel_fro)) {
        if (magnitude) {
            snprintf(note, (size_t)cap, "rel_fro %.4g > %.4g and |out|/|ref| = %.4g: a scale or layout error (%s)",
                     rel, rule->rel_fro, m->mag_ratio, origin);
            return VERDICT_MAGNITUDE;
        }
        snprintf(note, (size_t)cap, "rel_fro %.4g > %.4g (%s)", rel, rule->rel_fro, origin);
        return VERDICT_WRONG;
    }
    if (!isnan(rule->worst_row_rel) && !isnan(m->worst_row_rel) && !(m->worst_row_rel <= rule->worst_row_rel)) {
        if (magnitude) {
            snprintf(note, (size_t)cap,
                     "worst_row_rel %.4g > %.4g (row %lld) and |out|/|ref| = %.4g: a scale or layout error (%s)",
                     m->worst_row_rel, rule->worst_row_rel, (long long)m->worst_row, m->mag_ratio, origin);
            return VERDICT_MAGNITUDE;
        }
        snprintf(note, (size_t)cap, "worst_row_rel %.4g > %.4g (row %lld) (%s)", m->worst_row_rel,
                 rule->worst_row_rel, (long long)m->worst_row, origin);
        return VERDICT_WRONG;
    }
    if (forbid && out_bad > ref_bad) {
        snprintf(note, (size_t)cap,
                 "%lld non-finite outputs (%lld NaN, %lld +Inf, %lld -Inf) from finite input; reference has %lld (%s)",
                 (long long)out_bad, (long long)(m->out_nf.nan - m->out_nf_apart.nan),
                 (long long)(m->out_nf.pos_inf - m->out_nf_apart.pos_inf),
                 (long long)(m->out_nf.neg_inf - m->out_nf_apart.neg_inf), (long long)ref_bad, origin);
        return VERDICT_NONFINITE_OUT;
    }
    if (!strncmp(row->reference, ROW_REF_MODEL_PREFIX, strlen(ROW_REF_MODEL_PREFIX)) && row->ulp.bins[ULP_BIN_NONFINITE] > 0) {
        /* Two models on the same operands: NaN (or Inf) on one side only is
         * a disagreement, whichever side. */
        snprintf(note, (size_t)cap, "%lld elements are NaN or Inf on one side only (%s)",
                 (long long)row->ulp.bins[ULP_BIN_NONFINITE], origin);
        return VERDICT_WRONG;
    }
    if (!strcmp(row->reference, "R_exact") && acc_fit_reduced(&row->acc_fit)) {
        char fit[320];
        acc_fit_describe(&row->acc_fit, fit, sizeof fit);
        snprintf(note, (size_t)cap, "reduced-precision accumulation: %s (%s)", fit, origin);
        return VERDICT_WRONG;
    }
    if (biased(rule, row, note, cap))
        return VERDICT_WRONG;
    if (fp32_bound_exceeded(&row->acc_fit)) {
        char lost[320];
        fp32_bound_describe(&row->acc_fit, 1, lost, sizeof lost);
        snprintf(note, (size_t)cap, "%s (%s)", lost, origin);
        return VERDICT_WRONG;
    }
    if (rule->max_ulp >= 0 && row->ulp.max_ulp > (uint64_t)rule->max_ulp) {
        snprintf(note, (size_t)cap, "max_ulp %llu > %lld (%s)", (unsigned long long)row->ulp.max_ulp,
                 (long long)rule->max_ulp, origin);
        return VERDICT_WRONG;
    }
    if (!isnan(rule->identical_min) && !isnan(row->ulp.identical_frac) &&
        row->ulp.identical_frac < rule->identical_min) {
        snprintf(note, (size_t)cap, "identical %.6g < %.6g (%s)", row->ulp.identical_frac, rule->identical_min,
                 origin);
        return VERDICT_WRONG;
    }
    snprintf(note, (size_t)cap, "rel_fro %.4g <= %.4g (%s)", rel, rule->rel_fro, origin);
    return VERDICT_PASS;
}

/* "17 rows judged apart (x: rows 0-16 x columns 128-255 (17 x 128 = 2176 NaN);
 * x quantized per token (traced) gave them NaN operands; output there: 8704 NaN)". */
static void describe_apart(const result_t *row, const judge_poison_t *poison, char *buf, int cap)
{
    const metrics_t *m = &row->metrics;
    const nonfinite_t *in = &row->input_nf;
    const int exact = !strcmp(row->reference, "R_exact");
    int len = snprintf(buf, (size_t)cap, "%lld of %lld rows judged apart: their %s hold %lld non-finite "
                       "(%lld NaN, %lld +Inf, %lld -Inf)",
                       (long long)m->rows_apart, (long long)row->M, exact ? "operands" : "activations x",
                       (long long)nonfinite_total(in), (long long)in->nan, (long long)in->pos_inf,
                       (long long)in->neg_inf);
#define JUDGE_APPEND(...)                                                                \
    do {                                                                                 \
        if (len > 0 && len < cap)                                                        \
            len += snprintf(buf + len, (size_t)(cap - len), __VA_ARGS__);                \
    } while (0)
    if (poison && poison->where[0])
        JUDGE_APPEND(" (%s)", poison->where);
    if (exact && row->act_origin[0])
        JUDGE_APPEND("; the kernel's activations: %s, which left them non-finite", row->act_origin);
    const int64_t out_apart = nonfinite_total(&m->out_nf_apart);
    if (out_apart)
        JUDGE_APPEND("; output there: %lld NaN, %lld +Inf, %lld -Inf", (long long)m->out_nf_apart.nan,
                     (long long)m->out_nf_apart.pos_inf, (long long)m->out_nf_apart.neg_inf);
    else
        JUDGE_APPEND("; output there: finite");
#undef JUDGE_APPEND
}

/* Rows judged apart against a reference built from the kernel's own operands
 * (R_exact, model:, and R_source for a kernel whose activations are x itself,
 * a bf16 GEMM): where those operands give NaN/Inf the reference is
 * non-finite, and a kernel that writes finite values there masks the poison
 * instead of propagating it.  A reference on other operands (R_source of a
 * quantized kernel, whose quantizer may legitimately map NaN to a finite
 * code; R_sanitized) says nothing.  Returns the elements masked (at least:
 * counts, not positions), 0 when none. */
static int64_t poison_masked(const result_t *row)
{
    const int own_operands =
        !strcmp(row->reference, ref_kind_name(REF_EXACT)) ||
        !strncmp(row->reference, ROW_REF_MODEL_PREFIX, strlen(ROW_REF_MODEL_PREFIX)) ||
        (!strcmp(row->reference, ref_kind_name(REF_SOURCE)) &&
         !strncmp(row->act_origin, ACT_ORIGIN_X_BF16, strlen(ACT_ORIGIN_X_BF16)));
    if (!own_operands)
        return 0;
    const int64_t masked =
        nonfinite_total(&row->metrics.ref_nf_apart) - nonfinite_total(&row->metrics.out_nf_apart);
    return masked > 0 ? masked : 0;
}

verdict_t judge_row(const policy_rule_t *rule, const result_t *row, const judge_poison_t *poison,
                    char *note, int cap)
{
    char scratch[8];
    if (!note || cap <= 0) {
        note = scratch;
        cap = (int)sizeof scratch;
    }
    if (keeps_verdict(row->verdict)) {
        kr_strlcpy(note, row->note, (size_t)cap);
        return row->verdict;
    }
    const metrics_t *m = &row->metrics;
    const int poisoned = nonfinite_total(&row->input_nf) > 0;
    if (!poisoned)
        return judge_finite_part(rule, row, note, cap);

    char apart[448] = "";
    if (m->rows_apart > 0)
        describe_apart(row, poison, apart, sizeof apart);
    char part[384];
    const verdict_t v = judge_finite_part(rule, row, part, sizeof part);
    const int64_t masked = poison_masked(row);
    if (masked > 0) {
        /* The poisoned part fails on its own: the kernel hid the poison. */
        char hid[256];
        snprintf(hid, sizeof hid,
                 "poison masked: the kernel's operands give %lld non-finite %s values in the rows judged "
                 "apart, the output %lld (%lld written finite)",
                 (long long)nonfinite_total(&m->ref_nf_apart), row->reference,
                 (long long)nonfinite_total(&m->out_nf_apart), (long long)masked);
        if (verdict_is_failure(v) && m->finite_count > 0) {
            snprintf(note, (size_t)cap, "on the rows with finite inputs: %s; %s; %s", part, hid, apart);
            return v;
        }
        snprintf(note, (size_t)cap, "%s; %s; %s", hid, apart,
                 m->finite_count > 0 ? part : "no row with finite inputs");
        return VERDICT_WRONG;
    }
    if (m->finite_count == 0 && m->rows_apart > 0 && v != VERDICT_NONFINITE_OUT) {
        snprintf(note, (size_t)cap, "no row with finite inputs left to judge: %s", apart);
        return VERDICT_POISONED_INPUT;
    }
    if (v == VERDICT_PASS) {
        if (apart[0])
            snprintf(note, (size_t)cap, "%s; the rows with finite inputs pass: %s", apart, part);
        else
            snprintf(note, (size_t)cap, "input has %lld non-finite; every row judged, %s",
                     (long long)nonfinite_total(&row->input_nf), part);
        return VERDICT_POISONED_INPUT;
    }
    if (apart[0])
        snprintf(note, (size_t)cap, "on the rows with finite inputs: %s; %s", part, apart);
    else
        kr_strlcpy(note, part, (size_t)cap);
    return v;
}

verdict_t policy_apply(const policy_rule_t *rule, const result_t *row, char *note, int cap)
{
    return judge_row(rule, row, NULL, note, cap);
}
