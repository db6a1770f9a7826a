#include "calibrate.h"
#include "array_grow.h"
#include "policy.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kr_string.h"
#include "row_reference.h"

static int metric_row(const result_t *r)
{
    if (!strcmp(r->reference, ROW_REF_NONE) || !strcmp(r->reference, ROW_REF_RERUN) ||
        !strncmp(r->reference, ROW_REF_MODEL_PREFIX, strlen(ROW_REF_MODEL_PREFIX)))
        return 0;
    if (r->input_nf.nan + r->input_nf.pos_inf + r->input_nf.neg_inf > 0)
        return 0;
    return r->verdict == VERDICT_PASS || r->verdict == VERDICT_WRONG ||
           r->verdict == VERDICT_MAGNITUDE || r->verdict == VERDICT_NONFINITE_OUT;
}

static calib_group_t *group_for(calibration_t *cal, const result_t *r)
{
    for (int i = 0; i < cal->count; i++) {
        calib_group_t *g = &cal->groups[i];
        if (!strcmp(g->kernel, r->kernel) && !strcmp(g->reference, r->reference) &&
            !strcmp(g->band, r->band))
            return g;
    }
    calib_group_t *g = ARRAY_APPEND_ZEROED(cal->groups, cal->count, cal->cap, 32);
    if (!g)
        return NULL;
    kr_strlcpy(g->kernel, r->kernel, sizeof g->kernel);
    kr_strlcpy(g->reference, r->reference, sizeof g->reference);
    kr_strlcpy(g->band, r->band, sizeof g->band);
    return g;
}

int calibration_add_rows(calibration_t *cal, const result_t *rows, int64_t n, kr_error_t *err)
{
    for (int64_t i = 0; i < n; i++) {
        const result_t *r = &rows[i];
        if (!metric_row(r))
            continue;
        calib_group_t *g = group_for(cal, r);
        if (!g)
            return kr_fail(err, "out of memory");
        if (g->n == g->cap) {
            int64_t cap = g->cap ? g->cap * 2 : 64;
            double *a = realloc(g->rel, (size_t)cap * sizeof *a);
            double *b = a ? realloc(g->worst, (size_t)cap * sizeof *b) : NULL;
            double *c = b ? realloc(g->identical, (size_t)cap * sizeof *c) : NULL;
            if (a)
                g->rel = a;
            if (b)
                g->worst = b;
            if (!a || !b || !c)
                return kr_fail(err, "out of memory");
            g->identical = c;
            g->cap = cap;
        }
        g->rel[g->n] = r->metrics.rel_fro;
        g->worst[g->n] = r->metrics.worst_row_rel;
        g->identical[g->n] = r->ulp.identical_frac;
        if (g->min_count == 0 || r->ulp.count < g->min_count)
            g->min_count = r->ulp.count;
        g->n++;
    }
    return 0;
}

void calibration_free(calibration_t *cal)
{
    for (int i = 0; i < cal->count; i++) {
        free(cal->groups[i].rel);
        free(cal->groups[i].worst);
        free(cal->groups[i].identical);
    }
    free(cal->groups);
    memset(cal, 0, sizeof *cal);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Quantile q of n values (sorted copy; nearest rank). */
static double quantile(const double *v, int64_t n, double q)
{
    if (n == 0)
        return NAN;
    double *s = malloc((size_t)n * sizeof *s);
    if (!s)
        return NAN;
    memcpy(s, v, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    int64_t k = (int64_t)ceil(q * (double)n) - 1;
    if (k < 0)
        k = 0;
    if (k >= n)
        k = n - 1;
    double r = s[k];
    free(s);
    return r;
}

static int group_order(const void *a, const void *b)
{
    const calib_group_t *x = a, *y = b;
    int c = strcmp(x->kernel, y->kernel);
    if (!c)
        c = strcmp(x->reference, y->reference);
    if (!c)
        c = strcmp(x->band, y->band);
    return c;
}

static double identical_min_of(const calib_group_t *g, double margin)
{
    double lo = quantile(g->identical, g->n, 0.0);
    double v = 1.0 - margin * (1.0 - lo) - (g->min_count > 0 ? 1.0 / (double)g->min_count : 0.0);
    v = floor(v * 1e4) / 1e4;
    return v < 0 ? 0 : v;
}

void calibration_write_table(FILE *fp, const calibration_t *cal, double margin, const char *how)
{
    qsort(cal->groups, (size_t)cal->count, sizeof *cal->groups, group_order);
    fprintf(fp, "# Calibration\n\n%s\n\nThresholds: rel_fro and worst_row_rel = %.3g x the largest value seen; "
                "identical_min (R_exact rows) = 1 - %.3g x (1 - the smallest identical fraction seen) - 1/n "
                "(n: the fewest elements one row compared), rounded down to 1e-4.\n\n",
            how, margin, margin);
    fprintf(fp, "| kernel | reference | band | rows | rel_fro p50 | p99 | max | threshold | worst_row p50 | max | threshold | min identical | identical_min |\n");
    fprintf(fp, "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (int i = 0; i < cal->count; i++) {
        const calib_group_t *g = &cal->groups[i];
        double rmax = quantile(g->rel, g->n, 1.0), wmax = quantile(g->worst, g->n, 1.0);
        char imin[32] = "-";
        if (!strcmp(g->reference, "R_exact"))
            snprintf(imin, sizeof imin, "%.4f", identical_min_of(g, margin));
        fprintf(fp, "| %s | %s | %s | %lld | %.4g | %.4g | %.4g | %.4g | %.4g | %.4g | %.4g | %.4f | %s |\n",
                g->kernel, g->reference, g->band, (long long)g->n, quantile(g->rel, g->n, 0.5),
                quantile(g->rel, g->n, 0.99), rmax, margin * rmax, quantile(g->worst, g->n, 0.5), wmax,
                margin * wmax, quantile(g->identical, g->n, 0.0), imin);
    }
}

void calibration_write_policy(FILE *fp, const calibration_t *cal, double margin, const char *name,
                              const char *how)
{
    qsort(cal->groups, (size_t)cal->count, sizeof *cal->groups, group_order);
    fprintf(fp, "# Written by 'kreplay calibrate': %s\n", how);
    fprintf(fp, "# Each threshold is %.3g x the largest value seen on clean models; shapes and\n"
                "# kernels not seen here fall back to derived thresholds.\n", margin);
    fprintf(fp, "policy: %s\nmargin: %.3g\n", name, margin);
    /* The rounding-bias limits are a-priori (a fair split of the differing
     * elements is binomial), written so the policy states every threshold. */
    fprintf(fp, "bias_z: %g\nbias_frac: %g\nbias_share: %g\nrules:\n", POLICY_BIAS_Z_DEFAULT,
            POLICY_BIAS_FRAC_DEFAULT, POLICY_BIAS_SHARE_DEFAULT);
    for (int i = 0; i < cal->count; i++) {
        const calib_group_t *g = &cal->groups[i];
        double rmax = quantile(g->rel, g->n, 1.0), wmax = quantile(g->worst, g->n, 1.0);
        if (!isfinite(rmax) || !isfinite(wmax))
            continue;
        fprintf(fp, "  - kernel: \"%s\"\n    reference: \"%s\"\n    band: %s\n", g->kernel,
                g->reference, g->band);
        fprintf(fp, "    rel_fro: %.6g\n    worst_row_rel: %.6g\n", margin * rmax, margin * wmax);
        if (!strcmp(g->reference, "R_exact"))
            fprintf(fp, "    identical_min: %.4f\n", identical_min_of(g, margin));
    }
}
