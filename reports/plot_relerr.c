/* relerr_NxK: rel_fro against M per kernel, one panel per reference, with
 * what judged each point: the threshold of the row drawn (dashed, in the
 * kernel's colour), the failing rows (a red cross) and the regressed rows (a
 * purple circle) at their own rel_fro.  Kernels whose series are the same
 * numbers (bit-identical outputs give the same metrics) are drawn once, the
 * kernels named together in the key. */
#include "plot_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "verdict.h"

/* One kernel's series in one panel: the worst rel_fro at each M and the
 * threshold of the row that gave it. */
typedef struct {
    int64_t *M;
    double *rel, *thr;
    const char **band;  /* the band of the row drawn: a threshold steps at a band's edge */
    int n;
    int kernel;         /* index in the kernel set */
    int same_as;        /* -1, or the series drawn in its place */
} series_t;

static int in_panel(const result_t *r, int64_t N, int64_t K, const char *ref)
{
    return r->N == N && r->K == K && plots_is_error_row(r, ref);
}

static int series_build(series_t *s, const result_list_t *rows, int64_t N, int64_t K, const char *k,
                        const char *ref)
{
    memset(s, 0, sizeof *s);
    s->same_as = -1;
    int64_t cap = 0;
    for (int64_t i = 0; i < rows->count; i++)
        cap += in_panel(&rows->rows[i], N, K, ref) && !strcmp(rows->rows[i].kernel, k);
    if (!cap)
        return 0;
    s->M = malloc((size_t)cap * sizeof *s->M);
    s->rel = malloc((size_t)cap * sizeof *s->rel);
    s->thr = malloc((size_t)cap * sizeof *s->thr);
    s->band = malloc((size_t)cap * sizeof *s->band);
    if (!s->M || !s->rel || !s->thr || !s->band)
        return -1;
    for (int64_t last = 0;;) {
        int64_t m = INT64_MAX;
        for (int64_t i = 0; i < rows->count; i++) {
            const result_t *r = &rows->rows[i];
            if (in_panel(r, N, K, ref) && !strcmp(r->kernel, k) && r->M > last && r->M < m)
                m = r->M;
        }
        if (m == INT64_MAX)
            break;
        double worst = -1, thr = NAN;
        const char *band = "";
        for (int64_t i = 0; i < rows->count; i++) {
            const result_t *r = &rows->rows[i];
            if (in_panel(r, N, K, ref) && !strcmp(r->kernel, k) && r->M == m && r->metrics.rel_fro > worst) {
                worst = r->metrics.rel_fro;
                thr = r->threshold;
                band = r->band;
            }
        }
        s->band[s->n] = band;
        s->M[s->n] = m;
        s->rel[s->n] = worst;
        s->thr[s->n] = isfinite(thr) && thr > 0 ? thr : NAN;
        s->n++;
        last = m;
    }
    return 0;
}

static void series_free(series_t *s)
{
    free(s->band);
    free(s->M);
    free(s->rel);
    free(s->thr);
}

static int same_numbers(const series_t *a, const series_t *b)
{
    if (a->n != b->n)
        return 0;
    for (int i = 0; i < a->n; i++)
        if (a->M[i] != b->M[i] || a->rel[i] != b->rel[i] ||
            !(a->thr[i] == b->thr[i] || (isnan(a->thr[i]) && isnan(b->thr[i]))))
            return 0;
    return 1;
}

/* The panel's rows of one kind (failing, or regressed) as "M rel" lines;
 * returns how many. */
static int marks(FILE *fp, const result_list_t *rows, int64_t N, int64_t K, const char *ref, int regressed)
{
    int n = 0;
    for (int64_t i = 0; i < rows->count; i++) {
        const result_t *r = &rows->rows[i];
        if (!in_panel(r, N, K, ref) || !verdict_is_failure(r->verdict) ||
            (r->verdict == VERDICT_REGRESSED) != regressed)
            continue;
        if (fp)
            fprintf(fp, "%lld %.9g\n", (long long)r->M, r->metrics.rel_fro);
        n++;
    }
    return n;
}

typedef struct {
    const result_list_t *rows;
    const strset_t *kernels;
    int64_t N, K;
    series_t *s[2];       /* [panel][kernel] */
} relerr_t;

/* The kernels drawn with series j (the same numbers), one key line each
 * under its own: a key entry without a sample. */
static void same_kernels_keys(FILE *fp, const relerr_t *x, int panel, int j)
{
    const series_t *s = x->s[panel];
    for (int q = 0; q < x->kernels->n; q++)
        if (s[q].same_as == j) {
            char kt[80];
            gp_text(x->kernels->v[s[q].kernel], kt, sizeof kt);
            fprintf(fp, ", \\\n  keyentry with lines lc rgb \"#ffffff\" title \"= %s (identical)\"", kt);
        }
}

static void plot_panel(FILE *fp, const relerr_t *x, int panel, const char *ref, int *blk)
{
    const series_t *s = x->s[panel];
    fputs("plot ", fp);
    int first = 1, first_thr = 1;
    for (int j = 0; j < x->kernels->n; j++) {
        if (!s[j].n || s[j].same_as >= 0)
            continue;
        char style[96], kt[80];
        kernel_style(x->kernels, x->kernels->v[s[j].kernel], style, sizeof style);
        gp_text(x->kernels->v[s[j].kernel], kt, sizeof kt);
        fprintf(fp, "%s$s%d using 1:2 with linespoints lw 1.5 ps 0.9 %s title \"%s\"", first ? "" : ", \\\n  ", *blk,
                style, kt);
        same_kernels_keys(fp, x, panel, j);
        /* the threshold of the row drawn at each M; one key entry for them all */
        fprintf(fp, ", \\\n  $t%d using 1:2 with lines dt 2 lw 1.3 lc rgb \"%s\" %s", *blk,
                COLORS[s[j].kernel % N_COLORS], first_thr ? "title \"threshold (dashed)\"" : "notitle");
        first = first_thr = 0;
        (*blk)++;
    }
    if (marks(NULL, x->rows, x->N, x->K, ref, 0))
        fprintf(fp, ", \\\n  $f%d using 1:2 with points pt 2 ps 2.2 lw 2.5 lc rgb \"#d62728\" title \"failing rows\"",
                panel);
    if (marks(NULL, x->rows, x->N, x->K, ref, 1))
        fprintf(fp, ", \\\n  $g%d using 1:2 with points pt 6 ps 2.4 lw 2.5 lc rgb \"#7a1fa2\" title \"regressed "
                    "rows\"", panel);
    fputc('\n', fp);
}

static void band_shading(FILE *fp, const result_list_t *rows, const strset_t *bands, double xlo, double xhi)
{
    int obj = 1;
    for (int b = 0; b < bands->n; b++) {
        double lo, hi;
        if (band_range(rows, bands->v[b], &lo, &hi))
            continue;
        lo = fmax(lo, xlo);
        hi = fmin(hi, xhi);
        if (!(hi > lo))
            continue;
        char bt[32];
        gp_text(bands->v[b], bt, sizeof bt);
        fprintf(fp,
                "set object %d rect from %g, graph 0 to %g, graph 1 fc rgb \"%s\" fs transparent solid 0.12 "
                "noborder behind\n",
                obj++, lo, hi, BAND_FILL[b % N_BAND_FILL]);
        fprintf(fp, "set label %d \"%s\" at %g, graph 0.96 center tc rgb \"#555555\" front\n", b + 1, bt,
                sqrt(lo * hi));
    }
}

/* The thresholds as a step line: one level across each band that has a
 * point (a policy's rules are per band), a gap over a band without one. */
static void threshold_steps(FILE *fp, const result_list_t *rows, const series_t *s)
{
    for (int i = 0; i < s->n; i++) {
        double lo, hi;
        const int has_range = band_range(rows, s->band[i], &lo, &hi) == 0;
        const int starts = i == 0 || strcmp(s->band[i], s->band[i - 1]);
        const int ends = i == s->n - 1 || strcmp(s->band[i], s->band[i + 1]);
        if (starts && has_range) {
            fprintf(fp, "%.9g ", lo);
            gp_num(fp, s->thr[i]);
            fputc('\n', fp);
        }
        fprintf(fp, "%lld ", (long long)s->M[i]);
        gp_num(fp, s->thr[i]);
        fputc('\n', fp);
        if (ends && has_range) {
            fprintf(fp, "%.9g ", hi);
            gp_num(fp, s->thr[i]);
            fputs("\n\n", fp);
        }
    }
}

static void write_data(FILE *fp, const relerr_t *x, const int *have, const char *const *refs)
{
    int blk = 0;
    for (int j = 0; j < 2; j++) {
        for (int k = 0; have[j] && k < x->kernels->n; k++) {
            const series_t *s = &x->s[j][k];
            if (!s->n || s->same_as >= 0)
                continue;
            fprintf(fp, "$s%d << EOD\n", blk);
            for (int i = 0; i < s->n; i++)
                fprintf(fp, "%lld %.9g\n", (long long)s->M[i], s->rel[i]);
            fprintf(fp, "EOD\n$t%d << EOD\n", blk++);
            threshold_steps(fp, x->rows, s);
            fputs("EOD\n", fp);
        }
        for (int reg = 0; have[j] && reg < 2; reg++)
            if (marks(NULL, x->rows, x->N, x->K, refs[j], reg)) {
                fprintf(fp, "$%c%d << EOD\n", reg ? 'g' : 'f', j);
                marks(fp, x->rows, x->N, x->K, refs[j], reg);
                fputs("EOD\n", fp);
            }
    }
}

static int write_script(plot_list_t *pl, const relerr_t *x, const strset_t *bands, const int *have)
{
    static const char *const refs[] = {"R_exact", "R_source"};
    static const char *const ref_what[] = {"the kernel's arithmetic", "total error, quantization included"};
    const int panels = have[0] + have[1];
    double mmin = INFINITY, mmax = 0;
    for (int64_t i = 0; i < x->rows->count; i++) {
        mmin = fmin(mmin, (double)x->rows->rows[i].M);
        mmax = fmax(mmax, (double)x->rows->rows[i].M);
    }
    const double xlo = fmax(mmin / 1.6, 0.5), xhi = mmax * 1.6;
    char name[96];
    snprintf(name, sizeof name, "relerr_%lldx%lld", (long long)x->N, (long long)x->K);
    plot_t *p;
    script_t s;
    FILE *fp = plot_begin(pl, &p, &s, "relerr", name, 960, panels == 2 ? 820 : 440,
                          "Relative error (rel_fro) vs M, N=%lld K=%lld: worst case at each M per kernel, its "
                          "threshold dashed, failing rows crossed",
                          (long long)x->N, (long long)x->K);
    if (!fp)
        return -1;
    write_data(fp, x, have, refs);
    fprintf(fp, "set logscale xy\nset xrange [%g:%g]\nset format y \"%%.0e\"\n", xlo, xhi);
    fputs("set xlabel \"M (tokens)\"\nset ylabel \"rel_fro\"\nset key outside right top vertical\n", fp);
    band_shading(fp, x->rows, bands, xlo, xhi);
    fputs("set lmargin at screen 0.09\nset rmargin at screen 0.74\n", fp);
    if (panels == 2)
        fprintf(fp, "set multiplot layout 2,1 title \"N=%lld K=%lld\"\n", (long long)x->N, (long long)x->K);
    int blk = 0;
    for (int j = 0; j < 2; j++) {
        if (!have[j])
            continue;
        fprintf(fp, "set title \"vs %s (%s)\"\n", refs[j], ref_what[j]);
        plot_panel(fp, x, j, refs[j], &blk);
    }
    if (panels == 2)
        fputs("unset multiplot\n", fp);
    return script_finish(pl, p, &s);
}

int plot_relerr(plot_list_t *pl, const result_list_t *rows, const strset_t *kernels, const strset_t *bands,
                int64_t N, int64_t K)
{
    static const char *const refs[] = {"R_exact", "R_source"};
    relerr_t x = {.rows = rows, .kernels = kernels, .N = N, .K = K};
    int have[2] = {0, 0}, rc = 0;
    for (int j = 0; j < 2 && rc == 0; j++) {
        x.s[j] = calloc((size_t)(kernels->n ? kernels->n : 1), sizeof *x.s[j]);
        if (!x.s[j]) {
            rc = -1;
            break;
        }
        for (int k = 0; k < kernels->n && rc == 0; k++) {
            rc = series_build(&x.s[j][k], rows, N, K, kernels->v[k], refs[j]);
            x.s[j][k].kernel = k;
            have[j] |= x.s[j][k].n > 0;
            for (int q = 0; q < k && x.s[j][k].n; q++)
                if (x.s[j][q].n && x.s[j][q].same_as < 0 && same_numbers(&x.s[j][q], &x.s[j][k])) {
                    x.s[j][k].same_as = q;
                    break;
                }
        }
    }
    if (rc == 0 && (have[0] || have[1]))
        rc = write_script(pl, &x, bands, have);
    for (int j = 0; j < 2; j++) {
        for (int k = 0; x.s[j] && k < kernels->n; k++)
            series_free(&x.s[j][k]);
        free(x.s[j]);
    }
    return rc;
}
