/* regressions: the metric each regressed row regressed on, its baseline
 * value against this run's, one panel per metric, with the diagonal where
 * nothing changed: an error metric regressed above it, identical_frac below
 * it.  From the rows alone (result_t.regressed_*, set by the baseline
 * comparison); drawn only when a regressed row has numbers. */
#include "plot_util.h"

#include <math.h>
#include <string.h>

#define MAX_PANELS 4

static int has_numbers(const result_t *r)
{
    return r->regressed_metric[0] && isfinite(r->regressed_base) && isfinite(r->regressed_run);
}

/* Lower is better for every metric but identical_frac. */
static int higher_is_better(const char *metric)
{
    return !strcmp(metric, "identical_frac");
}

/* The distinct metrics with numbers, in first-seen order. */
static int metrics_of(const result_list_t *rows, const char *names[MAX_PANELS])
{
    int n = 0;
    for (int64_t i = 0; i < rows->count; i++) {
        const result_t *r = &rows->rows[i];
        if (!has_numbers(r))
            continue;
        int seen = 0;
        for (int j = 0; j < n; j++)
            seen |= !strcmp(names[j], r->regressed_metric);
        if (!seen && n < MAX_PANELS)
            names[n++] = r->regressed_metric;
    }
    return n;
}

static void panel(FILE *fp, const result_list_t *rows, const char *metric, int j)
{
    double lo = INFINITY, hi = -INFINITY;
    int positive = 1;
    fprintf(fp, "$r%d << EOD\n", j);
    for (int64_t i = 0; i < rows->count; i++) {
        const result_t *r = &rows->rows[i];
        if (!has_numbers(r) || strcmp(r->regressed_metric, metric))
            continue;
        fprintf(fp, "%.9g %.9g\n", r->regressed_base, r->regressed_run);
        lo = fmin(lo, fmin(r->regressed_base, r->regressed_run));
        hi = fmax(hi, fmax(r->regressed_base, r->regressed_run));
        positive &= r->regressed_base > 0 && r->regressed_run > 0;
    }
    fputs("EOD\n", fp);
    char mt[32];
    gp_text(metric, mt, sizeof mt);
    const int log_axes = positive && !higher_is_better(metric) && hi / lo > 20;
    double pad = log_axes ? 0 : (hi - lo) * 0.1 + fabs(hi) * 1e-3 + 1e-9;
    fprintf(fp, "set title \"%s: baseline vs this run (%s the diagonal = worse)\"\n", mt,
            higher_is_better(metric) ? "below" : "above");
    fprintf(fp, "%s\nset key %s\n", log_axes ? "set logscale xy" : "unset logscale",
            higher_is_better(metric) ? "top left" : "bottom right");
    if (log_axes)
        fprintf(fp, "set xrange [%.9g:%.9g]\nset yrange [%.9g:%.9g]\n", lo / 1.5, hi * 1.5, lo / 1.5, hi * 1.5);
    else
        fprintf(fp, "set xrange [%.9g:%.9g]\nset yrange [%.9g:%.9g]\n", lo - pad, hi + pad, lo - pad, hi + pad);
    fprintf(fp, "set xlabel \"%s in the baseline\"\nset ylabel \"%s in this run\"\n", mt, mt);
    fprintf(fp, "plot x with lines dt 2 lw 1.5 lc rgb \"#777777\" title \"unchanged (diagonal)\", \\\n"
                "  $r%d using 1:2 with points pt 2 ps 2 lw 2.5 lc rgb \"#7a1fa2\" title \"regressed rows\"\n",
            j);
}

int plot_regressions(plot_list_t *pl, const result_list_t *rows)
{
    const char *names[MAX_PANELS];
    const int n = metrics_of(rows, names);
    if (!n)
        return 0;
    plot_t *p;
    script_t s;
    int64_t count = 0;
    for (int64_t i = 0; i < rows->count; i++)
        count += has_numbers(&rows->rows[i]);
    FILE *fp = plot_begin(pl, &p, &s, "regressions", "regressions", 960, n > 1 ? 440 * ((n + 1) / 2) : 480,
                          "Regressions against the baseline: the metric each of %lld regressed rows regressed on, "
                          "baseline vs this run",
                          (long long)count);
    if (!fp)
        return -1;
    fputs("set format x \"%g\"\nset format y \"%g\"\n", fp);
    if (n > 1)
        fprintf(fp, "set multiplot layout %d,%d\n", (n + 1) / 2, n > 1 ? 2 : 1);
    for (int j = 0; j < n; j++)
        panel(fp, rows, names[j], j);
    if (n > 1)
        fputs("unset multiplot\n", fp);
    return script_finish(pl, p, &s);
}
