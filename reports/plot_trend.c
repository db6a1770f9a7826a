/* trend: per run of the history (baseline, earlier runs, this run; oldest
 * first), each kernel's worst rel_fro / threshold against R_source -- so the
 * threshold is one line for every kernel, at 1 -- with a red cross where the
 * kernel had failing rows in that run; below, the failing and regressed rows
 * per run.  Kernels with the same numbers in every run are drawn once, named
 * together in the key.  The x labels are the runs' own (report_bundle.c makes
 * them distinct). */
#include "plot_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "verdict.h"

/* The worst rel_fro / threshold of kernel k against R_source in a run (NaN:
 * no such row with a threshold), and whether k has a failing row there. */
static double run_worst_ratio(const result_list_t *rows, const char *k, int *failing)
{
    double w = NAN;
    *failing = 0;
    for (int64_t i = 0; i < rows->count; i++) {
        const result_t *r = &rows->rows[i];
        if (strcmp(r->kernel, k))
            continue;
        *failing |= verdict_is_failure(r->verdict) && strcmp(r->reference, "-");
        if (plots_is_error_row(r, "R_source") && isfinite(r->threshold) && r->threshold > 0)
            w = isnan(w) ? r->metrics.rel_fro / r->threshold : fmax(w, r->metrics.rel_fro / r->threshold);
    }
    return w;
}

typedef struct {
    double *ratio;      /* [runs] */
    int *failing;       /* [runs] */
    int any;            /* a finite ratio in some run */
    int same_as;        /* -1, or the kernel drawn in its place */
} kernel_trend_t;

static int same_trend(const kernel_trend_t *a, const kernel_trend_t *b, int n)
{
    for (int i = 0; i < n; i++)
        if (!(a->ratio[i] == b->ratio[i] || (isnan(a->ratio[i]) && isnan(b->ratio[i]))) ||
            a->failing[i] != b->failing[i])
            return 0;
    return 1;
}

/* "set xtics (" and one tick per run, labelled with the run or blank (the top
 * panel keeps the positions only); the caller ends the line. */
static void trend_xtics(FILE *fp, const plot_run_t *runs, int n, int labelled)
{
    fputs("set xtics (", fp);
    for (int i = 0; i < n; i++) {
        char lt[96] = "";
        if (labelled)
            gp_text(runs[i].label, lt, sizeof lt);
        fprintf(fp, "%s\"%s\" %d", i ? ", " : "", lt, i);
    }
}

static void write_data(FILE *fp, const plot_run_t *runs, int n, const strset_t *kernels, const kernel_trend_t *t)
{
    int blk = 0, marks = 0;
    for (int k = 0; k < kernels->n; k++) {
        if (!t[k].any || t[k].same_as >= 0)
            continue;
        fprintf(fp, "$t%d << EOD\n", blk++);
        for (int i = 0; i < n; i++) {
            fprintf(fp, "%d ", i);
            gp_num(fp, t[k].ratio[i]);
            fputc('\n', fp);
        }
        fputs("EOD\n", fp);
    }
    fputs("$x << EOD\n", fp);
    for (int k = 0; k < kernels->n; k++)
        for (int i = 0; t[k].any && t[k].same_as < 0 && i < n; i++)
            if (t[k].failing[i] && isfinite(t[k].ratio[i])) {
                fprintf(fp, "%d %.9g\n", i, t[k].ratio[i]);
                marks++;
            }
    if (!marks)
        fputs("0 NaN\n", fp);
    fputs("EOD\n$f << EOD\n", fp);
    for (int i = 0; i < n; i++) {
        int64_t failing = 0, regressed = 0;
        for (int64_t j = 0; j < runs[i].rows->count; j++) {
            failing += verdict_is_failure(runs[i].rows->rows[j].verdict);
            regressed += runs[i].rows->rows[j].verdict == VERDICT_REGRESSED;
        }
        fprintf(fp, "%d %lld %lld\n", i, (long long)failing, (long long)regressed);
    }
    fputs("EOD\n", fp);
}

static void write_top_panel(FILE *fp, const plot_run_t *runs, int n, const strset_t *kernels,
                            const kernel_trend_t *t, int marks)
{
    fputs("set title \"worst rel_fro / threshold vs R_source per kernel (1 = the threshold)\"\nset logscale y\n"
          "set format y \"%g\"\nset ylabel \"rel_fro / threshold\"\nset key outside right top vertical\n",
          fp);
    trend_xtics(fp, runs, n, 0);
    fputs(")\nplot 1 with lines dt 2 lw 2 lc rgb \"#d62728\" title \"threshold (ratio 1)\"", fp);
    int blk = 0;
    for (int k = 0; k < kernels->n; k++) {
        if (!t[k].any || t[k].same_as >= 0)
            continue;
        char style[96], kt[80];
        kernel_style(kernels, kernels->v[k], style, sizeof style);
        gp_text(kernels->v[k], kt, sizeof kt);
        fprintf(fp, ", \\\n  $t%d using 1:2 with linespoints lw 1.5 ps 0.9 %s title \"%s\"", blk++, style, kt);
        for (int q = k + 1; q < kernels->n; q++)
            if (t[q].same_as == k) {
                gp_text(kernels->v[q], kt, sizeof kt);
                fprintf(fp, ", \\\n  keyentry with lines lc rgb \"#ffffff\" title \"= %s (identical)\"", kt);
            }
    }
    if (marks)
        fputs(", \\\n  $x using 1:2 with points pt 2 ps 2.2 lw 2.5 lc rgb \"#d62728\" title \"failing rows\"", fp);
    fputc('\n', fp);
}

static int write_script(plot_list_t *pl, const plot_run_t *runs, int n, const strset_t *kernels,
                        const kernel_trend_t *t)
{
    plot_t *p;
    script_t s;
    FILE *fp = plot_begin(pl, &p, &s, "trend", "trend", 960, 760,
                          "Error trend over %d runs (in time order): worst rel_fro / threshold vs R_source per "
                          "kernel (1 = the threshold, failing runs crossed), and failing rows",
                          n);
    if (!fp)
        return -1;
    write_data(fp, runs, n, kernels, t);
    int marks = 0;
    for (int k = 0; k < kernels->n; k++)
        for (int i = 0; t[k].any && t[k].same_as < 0 && i < n; i++)
            marks += t[k].failing[i] && isfinite(t[k].ratio[i]);
    fprintf(fp, "set xrange [-0.5:%d.5]\n", n - 1);
    fputs("set lmargin at screen 0.09\nset rmargin at screen 0.74\nset multiplot layout 2,1\n", fp);
    write_top_panel(fp, runs, n, kernels, t, marks);
    fputs("set title \"failing and regressed rows per run\"\nunset logscale y\nset format y \"%g\"\n"
          "set yrange [0:*]\nset ylabel \"rows\"\nset style fill solid 0.8 border rgb \"#333333\"\n"
          "set boxwidth 0.35\n",
          fp);
    trend_xtics(fp, runs, n, 1);
    fputs(") rotate by -20 font \",9\"\n", fp);
    fputs("plot $f using ($1-0.18):2 with boxes lc rgb \"#e15759\" title \"failing\", \\\n"
          "  $f using ($1+0.18):3 with boxes lc rgb \"#b07aa1\" title \"regressed\"\n"
          "unset multiplot\n",
          fp);
    return script_finish(pl, p, &s);
}

int plots_trend(plot_list_t *pl, const plot_run_t *runs, int n, kr_error_t *err)
{
    if (n < 2)
        return 0;
    strset_t kernels = {0}, refs = {0};
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++)
        rc = plot_sets_collect(runs[i].rows, &kernels, &refs, NULL);
    kernel_trend_t *t = rc ? NULL : calloc((size_t)(kernels.n ? kernels.n : 1), sizeof *t);
    int series = 0;
    for (int k = 0; t && k < kernels.n && rc == 0; k++) {
        t[k].ratio = malloc((size_t)n * sizeof *t[k].ratio);
        t[k].failing = malloc((size_t)n * sizeof *t[k].failing);
        t[k].same_as = -1;
        if (!t[k].ratio || !t[k].failing) {
            rc = -1;
            break;
        }
        for (int i = 0; i < n; i++) {
            t[k].ratio[i] = run_worst_ratio(runs[i].rows, kernels.v[k], &t[k].failing[i]);
            t[k].any |= isfinite(t[k].ratio[i]);
        }
        for (int q = 0; q < k && t[k].any; q++)
            if (t[q].any && t[q].same_as < 0 && same_trend(&t[q], &t[k], n)) {
                t[k].same_as = q;
                break;
            }
        series += t[k].any;
    }
    if (!t)
        rc = -1;
    if (rc == 0 && series)
        rc = write_script(pl, runs, n, &kernels, t);
    for (int k = 0; t && k < kernels.n; k++) {
        free(t[k].ratio);
        free(t[k].failing);
    }
    free(t);
    strset_free(&kernels);
    strset_free(&refs);
    if (rc)
        return kr_fail(err, "plots: out of memory");
    return 0;
}
