/* The parts of the summary, and the numbers of the shape x band tables, that
 * report.html and report_full.md both show, written once with the format's
 * escaper and words. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "array_grow.h"
#include "escape.h"
#include "plots.h"
#include "report_html.h"
#include "shape_order.h"
#include "verdict.h"

void report_worst_cell_line(FILE *fp, const result_list_t *rows, const report_line_style_t *st)
{
    plot_cell_t *cells = NULL;
    int nc = plots_cells(rows, &cells);
    if (nc > 0) {
        /* A failing row before any passing one: never a passing cell while one fails. */
        int w = 0;
        for (int c = 1; c < nc; c++)
            if (plots_row_worse(&rows->rows[cells[c].worst_index], &rows->rows[cells[w].worst_index]))
                w = c;
        const result_t *r = &rows->rows[cells[w].worst_index];
        fprintf(fp, "%s%lldx%lld ", st->lead, (long long)cells[w].N, (long long)cells[w].K);
        st->esc(fp, cells[w].band);
        fprintf(fp, "%s%.4g", st->after_band, cells[w].worst_rel);
        if (isfinite(cells[w].worst_ratio))
            fprintf(fp, " = %.3g x its threshold %.4g", cells[w].worst_ratio, r->threshold);
        fprintf(fp, ", %s (", verdict_name(r->verdict));
        esc_put(fp, st->esc, "", r->kernel, " vs ");
        esc_put(fp, st->esc, "", r->reference, st->before_case);
        esc_put(fp, st->esc, "", r->case_name, st->tail);
    }
    free(cells);
}

void report_group_numbers(const report_group_t *g, double v[REPORT_GROUP_NUMBERS])
{
    v[0] = g->worst_rel;
    v[1] = g->n_rel ? g->sum_rel / g->n_rel : NAN;
    v[2] = g->threshold;
    v[3] = g->worst_ratio;
    v[4] = g->min_identical;
}

void report_failing_sections(FILE *fp, const result_list_t *rows, const report_failing_writer_t *w)
{
    for (int pass = 0; pass < 2; pass++) {
        int64_t n = 0;
        for (int64_t i = 0; i < rows->count; i++) {
            const result_t *r = &rows->rows[i];
            int is_reg = r->verdict == VERDICT_REGRESSED;
            if (pass == 0 ? !is_reg : (is_reg || !verdict_is_failure(r->verdict)))
                continue;
            if (n == 0)
                w->head(fp, pass);
            if (n < REPORT_FAILING_SHOWN)
                (pass == 0 && w->regressed_row ? w->regressed_row : w->row)(fp, r);
            n++;
        }
        if (n)
            w->end(fp, n - REPORT_FAILING_SHOWN);
    }
}

int64_t report_verdict_counts(const result_list_t *rows, int64_t counts[VERDICT_COUNT])
{
    int64_t failing = 0;
    memset(counts, 0, VERDICT_COUNT * sizeof counts[0]);
    for (int64_t i = 0; i < rows->count; i++) {
        counts[rows->rows[i].verdict]++;
        failing += verdict_is_failure(rows->rows[i].verdict);
    }
    return failing;
}

void report_verdict_tally(const int64_t *counts, char *buf, int cap)
{
    int n = 0;
    buf[0] = '\0';
    for (int v = 0; v < VERDICT_COUNT && n < cap; v++)
        if (counts[v])
            n += snprintf(buf + n, (size_t)(cap - n), "%s%lld %s", n ? ", " : "", (long long)counts[v],
                          verdict_name((verdict_t)v));
    if (!buf[0] && cap > 8)
        snprintf(buf, (size_t)cap, "no rows");
}

typedef struct {
    double key1, key2;
    int64_t i;
} offender_t;

static int offender_cmp(const void *a, const void *b)
{
    const offender_t *x = a, *y = b;
    if (x->key1 != y->key1)
        return x->key1 > y->key1 ? -1 : 1;
    if (x->key2 != y->key2)
        return x->key2 > y->key2 ? -1 : 1;
    return x->i < y->i ? -1 : (x->i > y->i);
}

int report_worst_offenders(const result_list_t *rows, int64_t *idx, int cap)
{
    offender_t *v = malloc((size_t)(rows->count ? rows->count : 1) * sizeof *v);
    if (!v)
        return 0;
    int64_t n = 0;
    for (int64_t i = 0; i < rows->count; i++) {
        const result_t *r = &rows->rows[i];
        double rel = r->metrics.rel_fro;
        if (!strcmp(r->reference, "-") || !isfinite(rel) || r->verdict == VERDICT_UNSUPPORTED ||
            r->verdict == VERDICT_ERROR || r->verdict == VERDICT_POISONED_INPUT)
            continue;
        int has_thr = isfinite(r->threshold) && r->threshold > 0;
        /* key1: failing first, then by ratio (rows without a threshold last) */
        v[n].key1 = (verdict_is_failure(r->verdict) ? 4.0 : 0.0) + (has_thr ? 2.0 + atan(rel / r->threshold) / 2 : 0.0);
        v[n].key2 = rel;
        v[n].i = i;
        n++;
    }
    if (n > 1)
        qsort(v, (size_t)n, sizeof *v, offender_cmp);
    int out = 0;
    for (int64_t j = 0; j < n && out < cap; j++)
        idx[out++] = v[j].i;
    free(v);
    return out;
}

static int group_cmp(const void *a, const void *b)
{
    const report_group_t *x = a, *y = b;
    int c = shape_order_band(x->N, x->K, x->band_order, x->band, y->N, y->K, y->band_order,
                             y->band);
    if (c)
        return c;
    c = strcmp(x->kernel, y->kernel);
    return c ? c : strcmp(x->reference, y->reference);
}

int report_groups(const result_list_t *rows, report_group_t **groups)
{
    *groups = NULL;
    report_group_t *g = NULL;
    int n = 0;
    int64_t cap = 0;
    for (int64_t i = 0; i < rows->count; i++) {
        const result_t *r = &rows->rows[i];
        if (!strcmp(r->reference, "-"))
            continue;
        int j;
        for (j = n - 1; j >= 0; j--)
            if (g[j].N == r->N && g[j].K == r->K && !strcmp(g[j].band, r->band) && !strcmp(g[j].kernel, r->kernel) &&
                !strcmp(g[j].reference, r->reference))
                break;
        if (j < 0) {
            if ((g = array_reserve_one_or_free(g, n, &cap, sizeof *g, 64)) == NULL)
                return -1;
            j = n++;
            memset(&g[j], 0, sizeof g[j]);
            g[j].N = r->N;
            g[j].K = r->K;
            memcpy(g[j].band, r->band, sizeof g[j].band);
            memcpy(g[j].kernel, r->kernel, sizeof g[j].kernel);
            memcpy(g[j].reference, r->reference, sizeof g[j].reference);
            g[j].band_order = INT64_MAX;
            g[j].worst_rel = NAN;
            g[j].worst_ratio = NAN;
            g[j].threshold = NAN;
            g[j].min_identical = NAN;
        }
        report_group_t *q = &g[j];
        q->rows++;
        q->verdicts[r->verdict]++;
        double rel = r->metrics.rel_fro;
        if (isfinite(rel) && r->verdict != VERDICT_UNSUPPORTED && r->verdict != VERDICT_ERROR &&
            r->verdict != VERDICT_POISONED_INPUT) {
            q->worst_rel = isnan(q->worst_rel) ? rel : fmax(q->worst_rel, rel);
            q->sum_rel += rel;
            q->n_rel++;
            if (isfinite(r->threshold) && r->threshold > 0) {
                double ratio = rel / r->threshold;
                q->worst_ratio = isnan(q->worst_ratio) ? ratio : fmax(q->worst_ratio, ratio);
                q->threshold = isnan(q->threshold) ? r->threshold : fmax(q->threshold, r->threshold);
            }
        }
        if (r->ulp.count > 0) {
            q->min_identical = isnan(q->min_identical) ? r->ulp.identical_frac : fmin(q->min_identical, r->ulp.identical_frac);
            if (r->ulp.max_ulp > q->max_ulp)
                q->max_ulp = r->ulp.max_ulp;
        }
    }
    /* band order: the smallest M of the band over all rows */
    for (int j = 0; j < n; j++)
        for (int64_t i = 0; i < rows->count; i++)
            if (!strcmp(rows->rows[i].band, g[j].band) && rows->rows[i].M < g[j].band_order)
                g[j].band_order = rows->rows[i].M;
    if (n > 1)
        qsort(g, (size_t)n, sizeof *g, group_cmp);
    *groups = g;
    return n;
}

void report_regression_change(const result_t *r, char *buf, size_t cap)
{
    const double b = r->regressed_base, v = r->regressed_run;
    if (!isfinite(b) || !isfinite(v))
        snprintf(buf, cap, "%s", "");
    else if (b != 0)
        snprintf(buf, cap, "%+.4g (%+.2f%%)", v - b, 100.0 * (v - b) / fabs(b));
    else
        snprintf(buf, cap, "%+.4g", v - b);
}
