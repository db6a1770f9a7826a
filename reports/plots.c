#include "plots.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "array_grow.h"
#include "kr_string.h"
#include "row_kernel.h"
#include "shape_order.h"
#include "verdict.h"

/* ------------------------------------------------------------------ helpers */

static const char *const COLORS[] = {"#4e79a7", "#f28e2b", "#e15759", "#59a14f", "#b07aa1", "#76b7b2",
                                     "#edc948", "#9c755f", "#ff9da7", "#1f77b4", "#8c564b", "#7f7f7f"};
#define N_COLORS ((int)(sizeof COLORS / sizeof COLORS[0]))
static const int POINT_TYPES[] = {7, 5, 9, 11, 13, 4, 6, 8, 10, 12, 1, 2, 3};
#define N_POINTS ((int)(sizeof POINT_TYPES / sizeof POINT_TYPES[0]))

/* A sorted set of strings (kernel names, references, bands). */
typedef struct {
    char **v;
    int n;
    int64_t cap;
} strset_t;

static int strset_find(const strset_t *s, const char *x)
{
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->v[i], x))
            return i;
    return -1;
}

static int strset_add(strset_t *s, const char *x)
{
    if (strset_find(s, x) >= 0)
        return 0;
    char *d = array_append_strdup(&s->v, &s->n, &s->cap, 16, x);
    if (!d)
        return -1;
    /* Into its place from the end: the set stays sorted. */
    int i = s->n - 1;
    while (i > 0 && strcmp(s->v[i - 1], x) > 0) {
        s->v[i] = s->v[i - 1];
        i--;
    }
    s->v[i] = d;
    return 0;
}

static void strset_free(strset_t *s)
{
    for (int i = 0; i < s->n; i++)
        free(s->v[i]);
    free(s->v);
    memset(s, 0, sizeof *s);
}

/* Text safe inside a double-quoted gnuplot string (noenhanced terminals):
 * quotes, backslashes and anything not printable ASCII become '_'. */
static void gp_text(const char *s, char *out, size_t cap)
{
    size_t n = 0;
    for (; s && *s && n + 1 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        out[n++] = (c < 32 || c > 126 || c == '"' || c == '\\' || c == '@' || c == '`') ? '_' : (char)c;
    }
    if (cap)
        out[n] = '\0';
}

/* A file-name stem: [A-Za-z0-9._-], others '_'. */
static void stem_text(const char *s, char *out, size_t cap)
{
    size_t n = 0;
    for (; s && *s && n + 1 < cap; s++) {
        char c = *s;
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                 c == '-' || c == '_';
        out[n++] = ok ? c : '_';
    }
    if (cap)
        out[n] = '\0';
}

static int is_gemm_row(const result_t *r)
{
    return !row_kernel_is_quantizer(r->kernel);
}

int plots_is_error_row(const result_t *r, const char *reference)
{
    if (strncmp(r->reference, "R_", 2) != 0)
        return 0;
    if (reference && strcmp(r->reference, reference) != 0)
        return 0;
    /* A poisoned input's rel_fro is over the finite part only: no error of the kernel's. */
    if (r->verdict == VERDICT_UNSUPPORTED || r->verdict == VERDICT_ERROR || r->verdict == VERDICT_POISONED_INPUT)
        return 0;
    if (!is_gemm_row(r))
        return 0;
    double v = r->metrics.rel_fro;
    return isfinite(v) && v > 0;
}

/* Smallest M of each band name over all rows: bands sort by it. */
static int64_t band_order(const result_list_t *rows, const char *band)
{
    int64_t best = INT64_MAX;
    for (int64_t i = 0; i < rows->count; i++)
        if (!strcmp(rows->rows[i].band, band) && rows->rows[i].M < best)
            best = rows->rows[i].M;
    return best;
}

/* The production bands' M ranges; custom band names get theirs from the rows. */
static int band_range(const result_list_t *rows, const char *band, double *lo, double *hi)
{
    static const struct { const char *name; double lo, hi; } std[] = {
        {"decode", 0.5, 64.5}, {"mid", 64.5, 255.5}, {"prefill", 255.5, 2047.5}, {"tiled", 2047.5, 1e12}};
    for (size_t i = 0; i < sizeof std / sizeof std[0]; i++)
        if (!strcmp(band, std[i].name)) {
            *lo = std[i].lo;
            *hi = std[i].hi;
            return 0;
        }
    double mn = INFINITY, mx = 0;
    for (int64_t i = 0; i < rows->count; i++)
        if (!strcmp(rows->rows[i].band, band)) {
            mn = fmin(mn, (double)rows->rows[i].M);
            mx = fmax(mx, (double)rows->rows[i].M);
        }
    if (!(mx > 0))
        return -1;
    *lo = mn / 1.15;
    *hi = mx * 1.15;
    return 0;
}

static const char *BAND_FILL[] = {"#4e79a7", "#59a14f", "#f28e2b", "#b07aa1", "#e15759", "#76b7b2"};

static plot_t *plot_add(plot_list_t *pl, const char *kind, const char *name, int w, int h)
{
    plot_t *v = array_reserve_one(pl->items, pl->count, &pl->cap, sizeof *v, 16);
    if (!v)
        return NULL;
    pl->items = v;
    plot_t *p = &pl->items[pl->count];
    memset(p, 0, sizeof *p);
    kr_strlcpy(p->kind, kind, sizeof p->kind);
    char stem[96];
    stem_text(name, stem, sizeof stem);
    /* Unique stems: a second plot of the same name gets a suffix. */
    kr_strlcpy(p->name, stem, sizeof p->name);
    for (int k = 2;; k++) {
        int clash = 0;
        for (int i = 0; i < pl->count; i++)
            clash |= !strcmp(pl->items[i].name, p->name);
        if (!clash)
            break;
        snprintf(p->name, sizeof p->name, "%.80s-%d", stem, k);
    }
    p->width = w;
    p->height = h;
    return p; /* not counted until its script is set */
}

/* Opens a memory stream for a script. */
typedef struct {
    FILE *fp;
    char *buf;
    size_t len;
} script_t;

static int script_open(script_t *s)
{
    s->buf = NULL;
    s->len = 0;
    s->fp = open_memstream(&s->buf, &s->len);
    return s->fp ? 0 : -1;
}

/* Closes the stream into p->script and counts the plot. */
static int script_finish(plot_list_t *pl, plot_t *p, script_t *s)
{
    if (fclose(s->fp) != 0 || !s->buf) {
        free(s->buf);
        return -1;
    }
    p->script = s->buf;
    pl->count++;
    return 0;
}

static void gp_common(FILE *fp)
{
    fputs("set grid lc rgb \"#dddddd\"\n"
          "set border lc rgb \"#444444\"\n"
          "set key font \",9\" noautotitle\n",
          fp);
}

static void num(FILE *fp, double v)
{
    if (isfinite(v))
        fprintf(fp, "%.9g", v);
    else
        fputs("NaN", fp);
}

/* Colour / point of a kernel, stable over all plots of a report. */
static void kernel_style(const strset_t *kernels, const char *k, char *out, size_t cap)
{
    int i = strset_find(kernels, k);
    if (i < 0)
        i = 0;
    snprintf(out, cap, "lc rgb \"%s\" pt %d", COLORS[i % N_COLORS], POINT_TYPES[(i / N_COLORS + i) % N_POINTS]);
}

/* ------------------------------------------------------- relative error vs M */

/* The worst rel_fro of kernel k against ref for shape (N, K) at each M:
 * writes "M rel" lines, returns how many. */
static int relerr_series(FILE *fp, const result_list_t *rows, int64_t N, int64_t K, const char *k,
                         const char *ref)
{
    int64_t last = 0;
    int n = 0;
    for (;;) {
        /* next larger M */
        int64_t m = INT64_MAX;
        for (int64_t i = 0; i < rows->count; i++) {
            const result_t *r = &rows->rows[i];
            if (r->N == N && r->K == K && r->M > last && r->M < m && !strcmp(r->kernel, k) &&
                plots_is_error_row(r, ref))
                m = r->M;
        }
        if (m == INT64_MAX)
            break;
        double worst = 0;
        for (int64_t i = 0; i < rows->count; i++) {
            const result_t *r = &rows->rows[i];
            if (r->N == N && r->K == K && r->M == m && !strcmp(r->kernel, k) && plots_is_error_row(r, ref))
                worst = fmax(worst, r->metrics.rel_fro);
        }
        if (fp)
            fprintf(fp, "%lld %.9g\n", (long long)m, worst);
        n++;
        last = m;
    }
    return n;
}

static int plot_relerr(plot_list_t *pl, const result_list_t *rows, const strset_t *kernels,
                       const strset_t *bands, int64_t N, int64_t K)
{
    static const char *const refs[] = {"R_exact", "R_source"};
    static const char *const ref_what[] = {"the kernel's arithmetic", "total error, quantization included"};
    int have[2] = {0, 0};
    for (int j = 0; j < 2; j++)
        for (int k = 0; k < kernels->n; k++)
            have[j] |= relerr_series(NULL, rows, N, K, kernels->v[k], refs[j]) > 0;
    int panels = have[0] + have[1];
    if (!panels)
        return 0;
    double mmin = INFINITY, mmax = 0;
    for (int64_t i = 0; i < rows->count; i++) {
        mmin = fmin(mmin, (double)rows->rows[i].M);
        mmax = fmax(mmax, (double)rows->rows[i].M);
    }
    double xlo = mmin / 1.6, xhi = mmax * 1.6;
    if (xlo < 0.5)
        xlo = 0.5;
    char name[96];
    snprintf(name, sizeof name, "relerr_%lldx%lld", (long long)N, (long long)K);
    plot_t *p = plot_add(pl, "relerr", name, 960, panels == 2 ? 820 : 440);
    if (!p)
        return -1;
    snprintf(p->title, sizeof p->title, "Relative error (rel_fro) vs M, N=%lld K=%lld: worst case at each M, per kernel",
             (long long)N, (long long)K);
    script_t s;
    if (script_open(&s))
        return -1;
    FILE *fp = s.fp;
    gp_common(fp);
    int blk = 0;
    for (int j = 0; j < 2; j++)
        for (int k = 0; k < kernels->n; k++) {
            if (!relerr_series(NULL, rows, N, K, kernels->v[k], refs[j]))
                continue;
            fprintf(fp, "$s%d << EOD\n", blk++);
            relerr_series(fp, rows, N, K, kernels->v[k], refs[j]);
            fputs("EOD\n", fp);
        }
    fprintf(fp, "set logscale xy\nset xrange [%g:%g]\nset format y \"%%.0e\"\n", xlo, xhi);
    fputs("set xlabel \"M (tokens)\"\nset ylabel \"rel_fro\"\n", fp);
    fputs("set key outside right top vertical\n", fp);
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
                obj++, lo, hi, BAND_FILL[b % 6]);
        fprintf(fp, "set label %d \"%s\" at %g, graph 0.96 center tc rgb \"#555555\" front\n", b + 1, bt,
                sqrt(lo * hi));
    }
    fputs("set lmargin at screen 0.09\nset rmargin at screen 0.76\n", fp);
    if (panels == 2)
        fprintf(fp, "set multiplot layout 2,1 title \"N=%lld K=%lld\"\n", (long long)N, (long long)K);
    blk = 0;
    for (int j = 0; j < 2; j++) {
        if (!have[j])
            continue;
        fprintf(fp, "set title \"vs %s (%s)\"\n", refs[j], ref_what[j]);
        fputs("plot ", fp);
        int first = 1;
        for (int k = 0; k < kernels->n; k++) {
            if (!relerr_series(NULL, rows, N, K, kernels->v[k], refs[j]))
                continue;
            char style[96], kt[80];
            kernel_style(kernels, kernels->v[k], style, sizeof style);
            gp_text(kernels->v[k], kt, sizeof kt);
            fprintf(fp, "%s$s%d using 1:2 with linespoints lw 1.5 ps 0.9 %s title \"%s\"", first ? "" : ", \\\n  ",
                    blk++, style, kt);
            first = 0;
        }
        fputc('\n', fp);
    }
    if (panels == 2)
        fputs("unset multiplot\n", fp);
    return script_finish(pl, p, &s);
}

/* ------------------------------------------------------------ ULP histograms */

static int plot_ulp(plot_list_t *pl, const result_list_t *rows, const strset_t *kernels, const char *ref)
{
    /* Per kernel: summed bins and count. */
    int nk = kernels->n;
    double (*bins)[ULP_BIN_COUNT] = calloc((size_t)(nk ? nk : 1), sizeof *bins);
    double *count = calloc((size_t)(nk ? nk : 1), sizeof *count);
    if (!bins || !count) {
        free(bins);
        free(count);
        return -1;
    }
    for (int64_t i = 0; i < rows->count; i++) {
        const result_t *r = &rows->rows[i];
        if (strcmp(r->reference, ref) || r->ulp.count <= 0 || r->verdict == VERDICT_UNSUPPORTED ||
            r->verdict == VERDICT_ERROR)
            continue;
        int k = strset_find(kernels, r->kernel);
        if (k < 0)
            continue;
        for (int b = 0; b < ULP_BIN_COUNT; b++)
            bins[k][b] += (double)r->ulp.bins[b];
        count[k] += (double)r->ulp.count;
    }
    int series = 0, maxbin = 1;
    for (int k = 0; k < nk; k++) {
        double tot = 0;
        for (int b = 0; b < ULP_BIN_COUNT; b++) {
            tot += bins[k][b];
            if (bins[k][b] > 0 && b > maxbin)
                maxbin = b;
        }
        if (count[k] > 0 && tot > 0)
            series++;
        else
            count[k] = 0;
    }
    int rc = 0;
    if (series) {
        char name[96], rt[64];
        snprintf(name, sizeof name, "ulp_%s", ref);
        gp_text(ref, rt, sizeof rt);
        plot_t *p = plot_add(pl, "ulp", name, 960, 460);
        script_t s;
        if (!p || script_open(&s)) {
            rc = -1;
        } else {
            snprintf(p->title, sizeof p->title,
                     "bf16 ULP distance to %s: fraction of output elements per bin, per kernel (summed over cases)", ref);
            FILE *fp = s.fp;
            gp_common(fp);
            int blk = 0;
            for (int k = 0; k < nk; k++) {
                if (count[k] <= 0)
                    continue;
                fprintf(fp, "$u%d << EOD\n", blk++);
                for (int b = 0; b < ULP_BIN_COUNT; b++) {
                    fprintf(fp, "%d ", b);
                    num(fp, bins[k][b] > 0 ? bins[k][b] / count[k] : NAN);
                    fputc('\n', fp);
                }
                fputs("EOD\n", fp);
            }
            fprintf(fp, "set title \"ULP distance to %s\"\n", rt);
            fputs("set logscale y\nset format y \"%.0e\"\nset ylabel \"fraction of elements\"\n", fp);
            fputs("set xlabel \"bf16 ULP distance\"\nset key outside right top vertical\n", fp);
            fputs("set lmargin at screen 0.09\nset rmargin at screen 0.76\n", fp);
            /* Always show 0..2; beyond that up to the last bin any kernel filled. */
            int last = maxbin < 4 ? 4 : maxbin;
            fprintf(fp, "set xrange [-0.5:%d.5]\nset xtics rotate by -45 (", last);
            for (int b = 0; b <= last; b++)
                fprintf(fp, "%s\"%s\" %d", b ? ", " : "", ulp_bin_label(b), b);
            fputs(")\n", fp);
            fputs("plot ", fp);
            blk = 0;
            for (int k = 0; k < nk; k++) {
                if (count[k] <= 0)
                    continue;
                char style[96], kt[80];
                kernel_style(kernels, kernels->v[k], style, sizeof style);
                gp_text(kernels->v[k], kt, sizeof kt);
                fprintf(fp, "%s$u%d using 1:2 with linespoints lw 1.5 ps 0.9 %s title \"%s\"", blk ? ", \\\n  " : "",
                        blk, style, kt);
                blk++;
            }
            fputc('\n', fp);
            rc = script_finish(pl, p, &s);
        }
    }
    free(bins);
    free(count);
    return rc;
}

/* ------------------------------------------------------------- shape x band */

static int cell_cmp(const void *a, const void *b)
{
    const plot_cell_t *x = a, *y = b;
    return shape_order_band(x->N, x->K, x->band_order, x->band, y->N, y->K, y->band_order,
                            y->band);
}

/* The error rows against ref (NULL: any R_*) grouped by shape, and by band
 * too when by_band: the shape x band cells, and the shapes the relative-error
 * plots are drawn for.  Returns the count, or -1 when out of memory. */
static int collect_cells(const result_list_t *rows, const char *ref, int by_band, plot_cell_t **cells)
{
    *cells = NULL;
    plot_cell_t *v = NULL;
    int n = 0;
    int64_t cap = 0;
    for (int64_t i = 0; i < rows->count; i++) {
        const result_t *r = &rows->rows[i];
        if (!plots_is_error_row(r, ref))
            continue;
        int j;
        for (j = 0; j < n; j++)
            if (v[j].N == r->N && v[j].K == r->K && (!by_band || !strcmp(v[j].band, r->band)))
                break;
        if (j == n) {
            if ((v = array_reserve_one_or_free(v, n, &cap, sizeof *v, 16)) == NULL)
                return -1;
            memset(&v[n], 0, sizeof v[n]);
            v[n].N = r->N;
            v[n].K = r->K;
            kr_strlcpy(v[n].band, r->band, sizeof v[n].band);
            v[n].band_order = band_order(rows, r->band);
            v[n].worst_rel = -1;
            v[n].worst_index = -1;
            n++;
        }
        v[j].n_rows++;
        if (r->metrics.rel_fro > v[j].worst_rel) {
            v[j].worst_rel = r->metrics.rel_fro;
            v[j].worst_index = i;
        }
    }
    /* Without bands the shapes are distinct, so this is their (N, K) order. */
    if (n > 1)
        qsort(v, (size_t)n, sizeof *v, cell_cmp);
    *cells = v;
    return n;
}

int plots_cells(const result_list_t *rows, plot_cell_t **cells)
{
    const char *ref = "R_source";
    int any = 0;
    for (int64_t i = 0; i < rows->count && !any; i++)
        any = plots_is_error_row(&rows->rows[i], ref);
    return collect_cells(rows, any ? ref : NULL, 1, cells);
}

const char *plots_w4a4_kernel(void)
{
    return row_kernel_w4a4();
}

static int is_kernel(const char *name, const char *kernel)
{
    return kernel && !strcmp(name, kernel);
}

const char *plots_w4a8_kernel(const result_list_t *rows)
{
    const char *a4 = row_kernel_w4a4(), *production = row_kernel_w4a8_production();
    const char *model = row_kernel_w4a8_model();
    int have_a4 = 0, have_production = 0, have_model = 0;
    const char *first = NULL;
    for (int64_t i = 0; i < rows->count; i++) {
        const result_t *r = &rows->rows[i];
        if (!plots_is_error_row(r, "R_source"))
            continue;
        if (is_kernel(r->kernel, a4))
            have_a4 = 1;
        else if (is_kernel(r->kernel, production))
            have_production = 1;
        else if (is_kernel(r->kernel, model))
            have_model = 1;
        else if (row_kernel_is_w4a8(r->kernel) && (!first || strcmp(r->kernel, first) < 0))
            first = r->kernel;
    }
    if (!have_a4)
        return NULL;
    if (have_production)
        return production;
    if (have_model)
        return model;
    return first;
}

/* Mean rel_fro of a kernel against R_source over the rows of a cell. */
static double cell_mean(const result_list_t *rows, const plot_cell_t *c, const char *kernel)
{
    double sum = 0;
    int n = 0;
    for (int64_t i = 0; i < rows->count; i++) {
        const result_t *r = &rows->rows[i];
        if (r->N == c->N && r->K == c->K && !strcmp(r->band, c->band) && !strcmp(r->kernel, kernel) &&
            plots_is_error_row(r, "R_source")) {
            sum += r->metrics.rel_fro;
            n++;
        }
    }
    return n ? sum / n : NAN;
}

static int plot_w4a8_vs_w4a4(plot_list_t *pl, const result_list_t *rows, const strset_t *kernels,
                             const plot_cell_t *cells, int n_cells)
{
    const char *a8 = plots_w4a8_kernel(rows), *a4 = plots_w4a4_kernel();
    if (!a8 || !a4)
        return 0;
    int groups = 0;
    for (int c = 0; c < n_cells; c++)
        groups += isfinite(cell_mean(rows, &cells[c], a8)) && isfinite(cell_mean(rows, &cells[c], a4));
    if (!groups)
        return 0;
    plot_t *p = plot_add(pl, "w4a8_vs_w4a4", "w4a8_vs_w4a4", 960, 480);
    script_t s;
    if (!p || script_open(&s))
        return -1;
    snprintf(p->title, sizeof p->title,
             "W4A8 (%s) vs W4A4 (%s): mean rel_fro against R_source per shape and band", a8, a4);
    FILE *fp = s.fp;
    gp_common(fp);
    fputs("$w << EOD\n", fp);
    for (int c = 0; c < n_cells; c++) {
        double a = cell_mean(rows, &cells[c], a8), b = cell_mean(rows, &cells[c], a4);
        if (!isfinite(a) || !isfinite(b))
            continue;
        char bt[32];
        gp_text(cells[c].band, bt, sizeof bt);
        fprintf(fp, "\"%lldx%lld %s (x%.2f)\" %.9g %.9g\n", (long long)cells[c].N, (long long)cells[c].K, bt,
                b / a, a, b);
    }
    fputs("EOD\n", fp);
    char sa[96], sb[96], ka[80], kb[80];
    kernel_style(kernels, a8, sa, sizeof sa);
    kernel_style(kernels, a4, sb, sizeof sb);
    gp_text(a8, ka, sizeof ka);
    gp_text(a4, kb, sizeof kb);
    fputs("set title \"W4A8 vs W4A4 (label: W4A4 / W4A8 error ratio)\"\n", fp);
    fputs("set style data histograms\nset style histogram clustered gap 1\n"
          "set style fill solid 0.85 border rgb \"#333333\"\nset boxwidth 0.9\n",
          fp);
    fputs("set logscale y\nset format y \"%.0e\"\nset ylabel \"mean rel_fro vs R_source\"\n", fp);
    fputs("set xtics rotate by -30 font \",9\"\nset key top left\n", fp);
    fprintf(fp, "plot $w using 2:xtic(1) %s title \"%s\", '' using 3 %s title \"%s\"\n", sa, ka, sb, kb);
    return script_finish(pl, p, &s);
}

static int plot_heatmap(plot_list_t *pl, const result_list_t *rows, const plot_cell_t *cells, int n_cells)
{
    if (n_cells == 0)
        return 0;
    /* Axes: distinct shapes (y) and bands (x), in cell order. */
    int64_t (*shapes)[2] = calloc((size_t)n_cells, sizeof *shapes);
    const char **bands = calloc((size_t)n_cells, sizeof *bands);
    int64_t *border = calloc((size_t)n_cells, sizeof *border);
    if (!shapes || !bands || !border) {
        free(shapes);
        free(bands);
        free(border);
        return -1;
    }
    int ns = 0, nb = 0;
    for (int c = 0; c < n_cells; c++) {
        int j;
        for (j = 0; j < ns; j++)
            if (shapes[j][0] == cells[c].N && shapes[j][1] == cells[c].K)
                break;
        if (j == ns) {
            shapes[ns][0] = cells[c].N;
            shapes[ns][1] = cells[c].K;
            ns++;
        }
        for (j = 0; j < nb; j++)
            if (!strcmp(bands[j], cells[c].band))
                break;
        if (j == nb) {
            /* insert in band order */
            int at = nb;
            while (at > 0 && border[at - 1] > cells[c].band_order) {
                bands[at] = bands[at - 1];
                border[at] = border[at - 1];
                at--;
            }
            bands[at] = cells[c].band;
            border[at] = cells[c].band_order;
            nb++;
        }
    }
    double lmin = INFINITY, lmax = -INFINITY;
    for (int c = 0; c < n_cells; c++) {
        double l = log10(cells[c].worst_rel);
        lmin = fmin(lmin, l);
        lmax = fmax(lmax, l);
    }
    if (!(lmax - lmin > 0.2)) {
        lmin -= 0.5;
        lmax += 0.5;
    }
    int rc = 0;
    int h = 160 + 46 * ns;
    plot_t *p = plot_add(pl, "heatmap", "heatmap_worst", 760, h < 320 ? 320 : h);
    script_t s;
    if (!p || script_open(&s)) {
        rc = -1;
    } else {
        const result_t *any = &rows->rows[cells[0].worst_index];
        snprintf(p->title, sizeof p->title, "Worst relative error (rel_fro vs %s) over shape x band",
                 strcmp(any->reference, "R_source") ? "R_*" : "R_source");
        FILE *fp = s.fp;
        gp_common(fp);
        fputs("$h << EOD\n", fp);
        for (int c = 0; c < n_cells; c++) {
            int x = 0, y = 0;
            for (int j = 0; j < nb; j++)
                if (!strcmp(bands[j], cells[c].band))
                    x = j;
            for (int j = 0; j < ns; j++)
                if (shapes[j][0] == cells[c].N && shapes[j][1] == cells[c].K)
                    y = j;
            fprintf(fp, "%d %d %.6f \"%.3g\"\n", x, y, log10(cells[c].worst_rel), cells[c].worst_rel);
        }
        fputs("EOD\n", fp);
        fputs("set title \"worst rel_fro per shape x band (any kernel)\"\n", fp);
        fprintf(fp, "set xrange [-0.5:%d.5]\nset yrange [-0.5:%d.5]\n", nb - 1, ns - 1);
        fputs("set xtics (", fp);
        for (int j = 0; j < nb; j++) {
            char bt[32];
            gp_text(bands[j], bt, sizeof bt);
            fprintf(fp, "%s\"%s\" %d", j ? ", " : "", bt, j);
        }
        fputs(")\nset ytics (", fp);
        for (int j = 0; j < ns; j++)
            fprintf(fp, "%s\"%lldx%lld\" %d", j ? ", " : "", (long long)shapes[j][0], (long long)shapes[j][1], j);
        fputs(")\nunset grid\nset xlabel \"M band\"\nset ylabel \"shape (NxK)\"\n", fp);
        fprintf(fp, "set cbrange [%g:%g]\nset cblabel \"log10 worst rel_fro\"\n", lmin, lmax);
        fputs("set palette defined (0 \"#ffffcc\", 0.5 \"#fd8d3c\", 1 \"#b10026\")\n", fp);
        fputs("plot $h using 1:2:(0.5):(0.5):3 with boxxyerror fs solid 1.0 noborder fc palette, \\\n"
              "  '' using 1:2:4 with labels font \",11\" tc rgb \"black\"\n",
              fp);
        rc = script_finish(pl, p, &s);
    }
    free(shapes);
    free(bands);
    free(border);
    return rc;
}

/* --------------------------------------------------------------- public API */

static int collect_sets(const result_list_t *rows, strset_t *kernels, strset_t *refs, strset_t *bands)
{
    for (int64_t i = 0; i < rows->count; i++) {
        const result_t *r = &rows->rows[i];
        if (!is_gemm_row(r) || !strcmp(r->reference, "-") || !strcmp(r->reference, "x"))
            continue;
        if (strset_add(kernels, r->kernel) || strset_add(refs, r->reference))
            return -1;
        if (bands && r->band[0] && strset_add(bands, r->band))
            return -1;
    }
    if (bands) /* bands in M order */
        for (int i = 1; i < bands->n; i++)
            for (int j = i; j > 0 && band_order(rows, bands->v[j - 1]) > band_order(rows, bands->v[j]); j--) {
                char *t = bands->v[j];
                bands->v[j] = bands->v[j - 1];
                bands->v[j - 1] = t;
            }
    return 0;
}

int plots_from_rows(plot_list_t *pl, const result_list_t *rows, kr_error_t *err)
{
    strset_t kernels = {0}, refs = {0}, bands = {0};
    plot_cell_t *shapes = NULL, *cells = NULL;
    int n_shapes = 0, rc = 0;
    if (collect_sets(rows, &kernels, &refs, &bands) ||
        (n_shapes = collect_cells(rows, NULL, 0, &shapes)) < 0) {
        rc = -1;
        goto done;
    }
    for (int i = 0; i < n_shapes && rc == 0; i++)
        rc = plot_relerr(pl, rows, &kernels, &bands, shapes[i].N, shapes[i].K);
    /* ULP histograms: the references in a fixed order, then the others. */
    static const char *const first_refs[] = {"R_exact", "R_source", "R_sanitized", "out_rerun"};
    for (size_t j = 0; j < sizeof first_refs / sizeof first_refs[0] && rc == 0; j++)
        if (strset_find(&refs, first_refs[j]) >= 0)
            rc = plot_ulp(pl, rows, &kernels, first_refs[j]);
    for (int j = 0; j < refs.n && rc == 0; j++) {
        int known = 0;
        for (size_t q = 0; q < sizeof first_refs / sizeof first_refs[0]; q++)
            known |= !strcmp(refs.v[j], first_refs[q]);
        if (!known)
            rc = plot_ulp(pl, rows, &kernels, refs.v[j]);
    }
    int n_cells = rc == 0 ? plots_cells(rows, &cells) : 0;
    if (n_cells < 0)
        rc = -1;
    if (rc == 0)
        rc = plot_w4a8_vs_w4a4(pl, rows, &kernels, cells, n_cells);
    if (rc == 0)
        rc = plot_heatmap(pl, rows, cells, n_cells);
done:
    free(cells);
    free(shapes);
    strset_free(&kernels);
    strset_free(&refs);
    strset_free(&bands);
    if (rc)
        return kr_fail(err, "plots: out of memory");
    return 0;
}

/* The worst rel_fro of kernel k against R_source in a run, or NaN. */
static double run_worst(const result_list_t *rows, const char *k)
{
    double w = NAN;
    for (int64_t i = 0; i < rows->count; i++) {
        const result_t *r = &rows->rows[i];
        if (!strcmp(r->kernel, k) && plots_is_error_row(r, "R_source"))
            w = isnan(w) ? r->metrics.rel_fro : fmax(w, r->metrics.rel_fro);
    }
    return w;
}

/* Does kernel k have a finite worst rel_fro in any run?  Its data block and
 * its line exist only then, so both loops over the kernels ask the same. */
static int trend_has_kernel(const plot_run_t *runs, int n, const char *k)
{
    int any = 0;
    for (int i = 0; i < n; i++)
        any |= isfinite(run_worst(runs[i].rows, k));
    return any;
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

int plots_trend(plot_list_t *pl, const plot_run_t *runs, int n, kr_error_t *err)
{
    if (n < 2)
        return 0;
    strset_t kernels = {0}, refs = {0};
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++)
        rc = collect_sets(runs[i].rows, &kernels, &refs, NULL);
    int series = 0;
    for (int k = 0; k < kernels.n && rc == 0; k++)
        for (int i = 0; i < n; i++)
            if (isfinite(run_worst(runs[i].rows, kernels.v[k]))) {
                series++;
                break;
            }
    plot_t *p = NULL;
    script_t s;
    if (rc == 0 && series) {
        p = plot_add(pl, "trend", "trend", 960, 760);
        if (!p || script_open(&s))
            rc = -1;
    }
    if (rc == 0 && p) {
        snprintf(p->title, sizeof p->title,
                 "Error trend over %d runs (oldest first): worst rel_fro vs R_source per kernel, and failing rows", n);
        FILE *fp = s.fp;
        gp_common(fp);
        int blk = 0;
        for (int k = 0; k < kernels.n; k++) {
            if (!trend_has_kernel(runs, n, kernels.v[k]))
                continue;
            fprintf(fp, "$t%d << EOD\n", blk++);
            for (int i = 0; i < n; i++) {
                fprintf(fp, "%d ", i);
                num(fp, run_worst(runs[i].rows, kernels.v[k]));
                fputc('\n', fp);
            }
            fputs("EOD\n", fp);
        }
        fputs("$f << EOD\n", fp);
        for (int i = 0; i < n; i++) {
            int64_t failing = 0, regressed = 0;
            for (int64_t j = 0; j < runs[i].rows->count; j++) {
                failing += verdict_is_failure(runs[i].rows->rows[j].verdict);
                regressed += runs[i].rows->rows[j].verdict == VERDICT_REGRESSED;
            }
            fprintf(fp, "%d %lld %lld\n", i, (long long)failing, (long long)regressed);
        }
        fputs("EOD\n", fp);
        fprintf(fp, "set xrange [-0.5:%d.5]\n", n - 1);
        trend_xtics(fp, runs, n, 1);
        fputs(")\n", fp);
        fputs("set lmargin at screen 0.09\nset rmargin at screen 0.76\nset multiplot layout 2,1\n", fp);
        fputs("set title \"worst rel_fro vs R_source per kernel\"\nset logscale y\nset format y \"%.0e\"\n"
              "set key outside right top vertical\n",
              fp);
        trend_xtics(fp, runs, n, 0);
        fputs(")\n", fp);
        fputs("plot ", fp);
        blk = 0;
        for (int k = 0; k < kernels.n; k++) {
            if (!trend_has_kernel(runs, n, kernels.v[k]))
                continue;
            char style[96], kt[80];
            kernel_style(&kernels, kernels.v[k], style, sizeof style);
            gp_text(kernels.v[k], kt, sizeof kt);
            fprintf(fp, "%s$t%d using 1:2 with linespoints lw 1.5 ps 0.9 %s title \"%s\"", blk ? ", \\\n  " : "",
                    blk, style, kt);
            blk++;
        }
        fputc('\n', fp);
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
        rc = script_finish(pl, p, &s);
    }
    strset_free(&kernels);
    strset_free(&refs);
    if (rc)
        return kr_fail(err, "plots: out of memory");
    return 0;
}

int plots_nfmap(plot_list_t *pl, const char *case_name, const char *case_path, const float *x,
                int64_t M, int64_t K, const input_map_t *m, kr_error_t *err)
{
    if (!x || M <= 0 || K <= 0 || nonfinite_total(&m->nf) == 0)
        return 0;
    int64_t rb = M < 64 ? M : 64, cb = K < 256 ? K : 256;
    int64_t rstep = (M + rb - 1) / rb, cstep = (K + cb - 1) / cb;
    rb = (M + rstep - 1) / rstep;
    cb = (K + cstep - 1) / cstep;
    int64_t *cnt = calloc((size_t)(rb * cb), sizeof *cnt);
    if (!cnt)
        return kr_fail(err, "plots: out of memory");
    for (int64_t r = 0; r < M; r++)
        if (!m->row_count || m->row_count[r] > 0)
            for (int64_t c = 0; c < K; c++)
                if (!isfinite(x[r * K + c]))
                    cnt[(r / rstep) * cb + c / cstep]++;
    char name[96];
    snprintf(name, sizeof name, "nfmap_%s", case_name);
    plot_t *p = plot_add(pl, "nfmap", name, 960, M > 48 ? 620 : 420);
    script_t s;
    if (!p || script_open(&s)) {
        free(cnt);
        return kr_fail(err, "plots: out of memory");
    }
    kr_strlcpy(p->case_path, case_path ? case_path : "", sizeof p->case_path);
    snprintf(p->title, sizeof p->title, "Non-finite map of x (%lld rows x %lld columns): %s", (long long)M,
             (long long)K, case_name);
    FILE *fp = s.fp;
    gp_common(fp);
    fputs("$c << EOD\n", fp);
    for (int64_t i = 0; i < rb; i++)
        for (int64_t j = 0; j < cb; j++) {
            int64_t n = cnt[i * cb + j];
            if (!n)
                continue;
            int64_t r0 = i * rstep, r1 = (i + 1) * rstep < M ? (i + 1) * rstep : M;
            int64_t c0 = j * cstep, c1 = (j + 1) * cstep < K ? (j + 1) * cstep : K;
            fprintf(fp, "%.3f %.3f %.3f %.3f %.6f\n", (c0 + c1) / 2.0, (r0 + r1) / 2.0, (c1 - c0) / 2.0,
                    (r1 - r0) / 2.0, (double)n / (double)((r1 - r0) * (c1 - c0)));
        }
    fputs("EOD\n", fp);
    char ct[140];
    gp_text(case_name, ct, sizeof ct);
    fprintf(fp, "set title \"non-finite elements of x: %s\"\n", ct);
    fprintf(fp, "set xrange [0:%lld]\nset yrange [%lld:0]\n", (long long)K, (long long)M);
    fputs("set xlabel \"column (k)\"\nset ylabel \"row (token)\"\nset grid front\n", fp);
    fputs("set cbrange [0:1]\nset cblabel \"non-finite fraction of the cell\"\n"
          "set palette defined (0 \"#fcbba1\", 1 \"#a50f15\")\n",
          fp);
    for (int64_t b = 0; b < m->blocks_stored; b++) {
        const nf_block_t *blk = &m->blocks[b];
        fprintf(fp, "set object %lld rect from %lld,%lld to %lld,%lld fs empty border lc rgb \"#08519c\" lw 1.5 front\n",
                (long long)b + 1, (long long)blk->c0, (long long)blk->r0, (long long)blk->c1 + 1,
                (long long)blk->r1 + 1);
    }
    fprintf(fp, "plot $c using 1:2:3:4:5 with boxxyerror fs solid 1.0 noborder fc palette title \"%s\"\n",
            m->blocks_stored ? "non-finite cells (blue: blocks)" : "non-finite cells");
    free(cnt);
    if (script_finish(pl, p, &s))
        return kr_fail(err, "plots: out of memory");
    return 0;
}

void plot_list_free(plot_list_t *pl)
{
    for (int i = 0; i < pl->count; i++)
        free(pl->items[i].script);
    free(pl->items);
    memset(pl, 0, sizeof *pl);
}
