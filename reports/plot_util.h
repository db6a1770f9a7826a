/* What the plot writers of reports/ share (plots.c, plot_relerr.c,
 * plot_trend.c, heatmap.c, plot_regressions.c): sorted string sets, gnuplot
 * text and numbers, the palette a kernel keeps in every plot of a report, the
 * M bands, and a plot's script built in memory.  Not for use outside
 * reports/. */
#ifndef KR_PLOT_UTIL_H
#define KR_PLOT_UTIL_H

#include <stdint.h>
#include <stdio.h>

#include "plots.h"

#define N_COLORS 12
#define N_POINTS 13
#define N_BAND_FILL 6
extern const char *const COLORS[N_COLORS];
extern const int POINT_TYPES[N_POINTS];
extern const char *const BAND_FILL[N_BAND_FILL];

/* A sorted set of strings (kernel names, references, bands). */
typedef struct {
    char **v;
    int n;
    int64_t cap;
} strset_t;

int strset_find(const strset_t *s, const char *x);   /* index, or -1 */
int strset_add(strset_t *s, const char *x);          /* 0, or -1 out of memory */
void strset_free(strset_t *s);

/* Text safe inside a double-quoted gnuplot string (noenhanced terminals):
 * quotes, backslashes and anything not printable ASCII become '_'. */
void gp_text(const char *s, char *out, size_t cap);
/* A file-name stem: [A-Za-z0-9._-], others '_'. */
void stem_text(const char *s, char *out, size_t cap);
/* A number for a data block: %.9g, or NaN (a gap). */
void gp_num(FILE *fp, double v);
/* The grid, border and key every plot shares. */
void gp_common(FILE *fp);
/* "lc rgb ... pt N": kernel k's colour and point, the same in every plot. */
void kernel_style(const strset_t *kernels, const char *k, char *out, size_t cap);

/* A GEMM kernel's row (not a quantizer's). */
int is_gemm_row(const result_t *r);
/* The smallest M of a band over all rows: bands sort by it. */
int64_t band_order(const result_list_t *rows, const char *band);
/* The production band's M range, or a custom band's from its rows; -1 none. */
int band_range(const result_list_t *rows, const char *band, double *lo, double *hi);

/* The GEMM kernels, the references and (bands not NULL) the bands of the
 * rows that compared something, added to the sets; bands in M order.
 * 0, or -1 out of memory. */
int plot_sets_collect(const result_list_t *rows, strset_t *kernels, strset_t *refs, strset_t *bands);

/* A plot's script, written to a memory stream. */
typedef struct {
    FILE *fp;
    char *buf;
    size_t len;
} script_t;

/* A new plot (its stem made unique in pl), not counted until script_finish. */
plot_t *plot_add(plot_list_t *pl, const char *kind, const char *name, int w, int h);
int script_open(script_t *s);
/* plot_add, its caption (printf-style), script_open and gp_common at once:
 * the new plot in *p and the stream of its script, or NULL when out of
 * memory. */
__attribute__((format(printf, 8, 9)))
FILE *plot_begin(plot_list_t *pl, plot_t **p, script_t *s, const char *kind, const char *name, int w, int h,
                 const char *title, ...);
/* Closes the stream into p->script and counts the plot; 0 or -1. */
int script_finish(plot_list_t *pl, plot_t *p, script_t *s);

/* The plots in files of their own, appended to pl (0, or -1 out of memory). */
int plot_relerr(plot_list_t *pl, const result_list_t *rows, const strset_t *kernels, const strset_t *bands,
                int64_t N, int64_t K);
int plot_regressions(plot_list_t *pl, const result_list_t *rows);
int plot_heatmap(plot_list_t *pl, const plot_cell_t *cells, int n_cells);
int plot_w4a8_vs_w4a4(plot_list_t *pl, const result_list_t *rows, const strset_t *kernels, const plot_cell_t *cells,
                      int n_cells);

#endif
