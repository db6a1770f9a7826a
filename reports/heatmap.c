/* heatmap_worst: shape x band, each cell coloured by its worst row's
 * rel_fro / threshold -- how close to failing, not how large the error is:
 * the expected quantization error of a kernel that passes is green however
 * large, and 1 (the threshold) is where the colours turn red.  A cell with a
 * failing row gets a red frame and FAIL in its label, also when its rel_fro
 * is under the threshold (another rule failed it). */
#include "plot_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* log10 of the ratio: the colour scale runs from 1/100 to 10 times the threshold. */
#define RATIO_LOG_MIN (-2.0)
#define RATIO_LOG_MAX 1.0

typedef struct {
    int64_t (*shapes)[2];
    const char **bands;
    int64_t *border;
    int ns, nb;
} axes_t;

/* The distinct shapes (y, in cell order) and bands (x, in band order). */
static int axes_build(const plot_cell_t *cells, int n_cells, axes_t *a)
{
    memset(a, 0, sizeof *a);
    a->shapes = calloc((size_t)n_cells, sizeof *a->shapes);
    a->bands = calloc((size_t)n_cells, sizeof *a->bands);
    a->border = calloc((size_t)n_cells, sizeof *a->border);
    if (!a->shapes || !a->bands || !a->border)
        return -1;
    for (int c = 0; c < n_cells; c++) {
        int j;
        for (j = 0; j < a->ns; j++)
            if (a->shapes[j][0] == cells[c].N && a->shapes[j][1] == cells[c].K)
                break;
        if (j == a->ns) {
            a->shapes[a->ns][0] = cells[c].N;
            a->shapes[a->ns][1] = cells[c].K;
            a->ns++;
        }
        for (j = 0; j < a->nb; j++)
            if (!strcmp(a->bands[j], cells[c].band))
                break;
        if (j == a->nb) {
            int at = a->nb;
            while (at > 0 && a->border[at - 1] > cells[c].band_order) {
                a->bands[at] = a->bands[at - 1];
                a->border[at] = a->border[at - 1];
                at--;
            }
            a->bands[at] = cells[c].band;
            a->border[at] = cells[c].band_order;
            a->nb++;
        }
    }
    return 0;
}

static void axes_free(axes_t *a)
{
    free(a->shapes);
    free(a->bands);
    free(a->border);
}

static void cell_xy(const axes_t *a, const plot_cell_t *c, int *x, int *y)
{
    *x = *y = 0;
    for (int j = 0; j < a->nb; j++)
        if (!strcmp(a->bands[j], c->band))
            *x = j;
    for (int j = 0; j < a->ns; j++)
        if (a->shapes[j][0] == c->N && a->shapes[j][1] == c->K)
            *y = j;
}

/* "x y colour label failing" per cell: the colour is log10 of the ratio,
 * clamped to the scale, and at least 0 (red) for a cell with a failing row:
 * red means fails.  NaN (no threshold) leaves the cell white. */
static void write_cells(FILE *fp, const axes_t *a, const plot_cell_t *cells, int n_cells)
{
    fputs("$h << EOD\n", fp);
    for (int c = 0; c < n_cells; c++) {
        int x, y;
        cell_xy(a, &cells[c], &x, &y);
        const double r = cells[c].worst_ratio;
        const int fails = cells[c].failing > 0;
        double colour = isfinite(r) && r > 0 ? fmin(fmax(log10(r), RATIO_LOG_MIN), RATIO_LOG_MAX) : NAN;
        if (fails && !(colour >= 0))
            colour = 0;
        fprintf(fp, "%d %d ", x, y);
        gp_num(fp, colour);
        /* what failed the cell: its rel_fro, a regression, or another rule of the judgement */
        const char *why = !fails                                            ? ""
                          : cells[c].worst_verdict == VERDICT_REGRESSED     ? " REGRESSED"
                          : !isfinite(r) || r >= 1                          ? " FAIL"
                                                                            : " FAIL (by another rule)";
        if (isfinite(r))
            fprintf(fp, " \"%.2g x thr%s\"", r, why);
        else
            fprintf(fp, " \"rel %.3g%s\"", cells[c].worst_rel, why);
        fprintf(fp, " %d\n", cells[c].failing > 0);
    }
    fputs("EOD\n", fp);
}

static void write_axes(FILE *fp, const axes_t *a)
{
    fprintf(fp, "set xrange [-0.5:%d.5]\nset yrange [-0.5:%d.5]\n", a->nb - 1, a->ns - 1);
    fputs("set xtics (", fp);
    for (int j = 0; j < a->nb; j++) {
        char bt[32];
        gp_text(a->bands[j], bt, sizeof bt);
        fprintf(fp, "%s\"%s\" %d", j ? ", " : "", bt, j);
    }
    fputs(")\nset ytics (", fp);
    for (int j = 0; j < a->ns; j++)
        fprintf(fp, "%s\"%lldx%lld\" %d", j ? ", " : "", (long long)a->shapes[j][0], (long long)a->shapes[j][1], j);
    fputs(")\nunset grid\nset ylabel \"shape (NxK)\"\n", fp);
}

int plot_heatmap(plot_list_t *pl, const plot_cell_t *cells, int n_cells)
{
    if (n_cells == 0)
        return 0;
    axes_t a;
    if (axes_build(cells, n_cells, &a)) {
        axes_free(&a);
        return -1;
    }
    int rc = 0, failing = 0;
    for (int c = 0; c < n_cells; c++)
        failing |= cells[c].failing > 0;
    const int h = 160 + 46 * a.ns;
    plot_t *p;
    script_t s;
    FILE *fp = plot_begin(pl, &p, &s, "heatmap", "heatmap_worst", 760, h < 320 ? 320 : h, "%s",
                          "Worst rel_fro / threshold over shape x band (any kernel, any reference, each row by its "
                          "own threshold): under 1 passes (green to yellow), 1 and over fails (red); failing cells "
                          "framed");
    if (!fp) {
        rc = -1;
    } else {
        write_cells(fp, &a, cells, n_cells);
        fputs("set title \"worst rel_fro / threshold per shape x band (1 = the threshold)\"\n", fp);
        write_axes(fp, &a);
        fputs("set key below\n", fp);
        fprintf(fp, "set cbrange [%g:%g]\nset cblabel \"rel_fro / threshold (log scale)\"\n", RATIO_LOG_MIN,
                RATIO_LOG_MAX);
        fputs("set cbtics (\"0.01\" -2, \"0.1\" -1, \"0.5\" -0.301, \"1\" 0, \"3\" 0.477, \"10\" 1)\n", fp);
        /* green -> yellow just under the threshold, red from it on */
        fputs("set palette defined (-2 \"#1a9850\", -1 \"#91cf60\", -0.301 \"#d9ef8b\", -0.001 \"#fee08b\", "
              "0 \"#f46d43\", 1 \"#a50026\")\n",
              fp);
        fputs("plot $h using 1:2:(0.5):(0.5):3 with boxxyerror fs solid 1.0 noborder fc palette notitle", fp);
        if (failing)
            fputs(", \\\n  '' using 1:2:($5 > 0 ? 0.47 : NaN):(0.45) with boxxyerror lw 3 lc rgb \"#67001f\" "
                  "fs empty border lc rgb \"#67001f\" title \"failing rows (framed)\"",
                  fp);
        fputs(", \\\n  '' using 1:2:4 with labels font \",10\" tc rgb \"black\" notitle\n", fp);
        rc = script_finish(pl, p, &s);
    }
    axes_free(&a);
    return rc;
}
