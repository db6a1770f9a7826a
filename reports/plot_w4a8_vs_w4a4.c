/* w4a8_vs_w4a4: per shape and band, the mean rel_fro against R_source of
 * the W4A8 kernel beside the W4A4 kernel's, each bar with its threshold (a
 * dashed tick across it) and a red cross on it when a row of that kernel in
 * the cell fails. */
#include "plot_util.h"

#include <math.h>
#include <string.h>

#include "row_kernel.h"
#include "verdict.h"

/* A kernel's R_source rows in a cell: the mean rel_fro, the largest
 * threshold, whether any fails. */
typedef struct {
    double mean, thr;
    int failing;
} cell_stat_t;

static cell_stat_t cell_stat(const result_list_t *rows, const plot_cell_t *c, const char *kernel)
{
    cell_stat_t st = {NAN, NAN, 0};
    double sum = 0;
    int n = 0;
    for (int64_t i = 0; i < rows->count; i++) {
        const result_t *r = &rows->rows[i];
        if (r->N != c->N || r->K != c->K || strcmp(r->band, c->band) || strcmp(r->kernel, kernel) ||
            !plots_is_error_row(r, "R_source"))
            continue;
        sum += r->metrics.rel_fro;
        n++;
        if (isfinite(r->threshold) && r->threshold > 0)
            st.thr = isnan(st.thr) ? r->threshold : fmax(st.thr, r->threshold);
        st.failing |= verdict_is_failure(r->verdict);
    }
    if (n)
        st.mean = sum / n;
    return st;
}

static void write_data(FILE *fp, const result_list_t *rows, const plot_cell_t *cells, int n_cells, const char *a8,
                       const char *a4)
{
    fputs("$w << EOD\n", fp);
    int x = 0;
    for (int c = 0; c < n_cells; c++) {
        const cell_stat_t a = cell_stat(rows, &cells[c], a8), b = cell_stat(rows, &cells[c], a4);
        if (!isfinite(a.mean) || !isfinite(b.mean))
            continue;
        char bt[32];
        gp_text(cells[c].band, bt, sizeof bt);
        fprintf(fp, "%d \"%lldx%lld %s (x%.2f)\" %.9g %.9g ", x++, (long long)cells[c].N, (long long)cells[c].K, bt,
                b.mean / a.mean, a.mean, b.mean);
        gp_num(fp, a.thr);
        fputc(' ', fp);
        gp_num(fp, b.thr);
        fprintf(fp, " %d %d\n", a.failing, b.failing);
    }
    fputs("EOD\n", fp);
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

int plot_w4a8_vs_w4a4(plot_list_t *pl, const result_list_t *rows, const strset_t *kernels, const plot_cell_t *cells,
                      int n_cells)
{
    const char *a8 = plots_w4a8_kernel(rows), *a4 = plots_w4a4_kernel();
    if (!a8 || !a4)
        return 0;
    int groups = 0, failing = 0;
    for (int c = 0; c < n_cells; c++) {
        const cell_stat_t a = cell_stat(rows, &cells[c], a8), b = cell_stat(rows, &cells[c], a4);
        const int both = isfinite(a.mean) && isfinite(b.mean);
        groups += both;
        failing |= both && (a.failing || b.failing);
    }
    if (!groups)
        return 0;
    plot_t *p;
    script_t s;
    FILE *fp = plot_begin(pl, &p, &s, "w4a8_vs_w4a4", "w4a8_vs_w4a4", 960, 480,
                          "W4A8 (%s) vs W4A4 (%s): mean rel_fro against R_source per shape and band, thresholds "
                          "dashed",
                          a8, a4);
    if (!fp)
        return -1;
    write_data(fp, rows, cells, n_cells, a8, a4);
    /* the kernels' colours, without the point types boxes do not take */
    char sa[96], sb[96], ka[80], kb[80];
    kernel_style(kernels, a8, sa, sizeof sa);
    kernel_style(kernels, a4, sb, sizeof sb);
    *strstr(sa, " pt ") = '\0';
    *strstr(sb, " pt ") = '\0';
    gp_text(a8, ka, sizeof ka);
    gp_text(a4, kb, sizeof kb);
    fputs("set title \"W4A8 vs W4A4 (label: W4A4 / W4A8 error ratio)\"\n", fp);
    fprintf(fp, "set style fill solid 0.85 border rgb \"#333333\"\nset boxwidth 0.36\nset xrange [-0.6:%d.6]\n",
            groups - 1);
    fputs("set logscale y\nset format y \"%.0e\"\nset ylabel \"mean rel_fro vs R_source\"\n", fp);
    fputs("set xtics rotate by -30 font \",9\"\nset key outside right top vertical\nset rmargin at screen 0.80\n", fp);
    fprintf(fp, "plot $w using ($1-0.19):3:xtic(2) with boxes %s title \"%s\", \\\n"
                "  '' using ($1+0.19):4 with boxes %s title \"%s\", \\\n"
                "  '' using ($1-0.38):5:(0.38):(0) with vectors nohead dt 2 lw 2 lc rgb \"#111111\" "
                "title \"threshold (dashed)\", \\\n"
                "  '' using ($1):6:(0.38):(0) with vectors nohead dt 2 lw 2 lc rgb \"#111111\" notitle",
            sa, ka, sb, kb);
    if (failing)
        fputs(", \\\n  '' using ($1-0.19):($7 > 0 ? $3 : NaN) with points pt 2 ps 2.2 lw 2.5 lc rgb \"#d62728\" "
              "title \"failing rows\", \\\n"
              "  '' using ($1+0.19):($8 > 0 ? $4 : NaN) with points pt 2 ps 2.2 lw 2.5 lc rgb \"#d62728\" notitle",
              fp);
    fputc('\n', fp);
    return script_finish(pl, p, &s);
}
