/* The report's plots, as gnuplot scripts built from a run's rows alone (and,
 * for the non-finite map, a case's x).  Each script carries its data inline
 * (`$name << EOD` blocks) and no terminal: gnuplot.c adds that, so one
 * script gives the SVG of the HTML page and the PNG of the Markdown report.
 *
 * Which rows enter which plot:
 *  - error rows: a GEMM kernel (not quant.*) against R_exact / R_source /
 *    R_sanitized, verdict not UNSUPPORTED, ERROR or POISONED_INPUT (whose
 *    rel_fro covers the finite part only), rel_fro finite and > 0 (log axes);
 *  - relerr_<N>x<K>: per shape, rel_fro against M for each kernel (the worst
 *    case at each M), one panel per reference (R_exact: the kernel's
 *    arithmetic; R_source: total error), the M bands shaded, each series'
 *    threshold dashed (the threshold of the row drawn, stepping at band
 *    edges), the failing rows crossed and the regressed rows circled at
 *    their own rel_fro; kernels with the same numbers (bit-identical
 *    outputs) drawn once, the others named under it in the key;
 *  - ulp_<reference>: per reference (R_exact, R_source, out_rerun, model:K,
 *    ...), each kernel's bf16 ULP-distance histogram summed over its rows,
 *    as the fraction of elements per bin (recorded.* outputs are kernels;
 *    poisoned rows count here: R_sanitized shows where they land); equal
 *    histograms drawn once, the kernels named together;
 *  - w4a8_vs_w4a4: per shape and band, the mean rel_fro against R_source of
 *    the W4A8 kernel (the registry's COMPARE_ROLE_W4A8_PRODUCTION kernel,
 *    else its COMPARE_ROLE_W4A8_MODEL, else the first other W4A8 kernel by
 *    name) and of the COMPARE_ROLE_W4A4_EMULATION kernel, each bar with its
 *    threshold (the largest in the cell) and a cross when a row fails;
 *  - heatmap_worst: over shape x band, the worst row's rel_fro / threshold
 *    against any R_* reference (each row by its own threshold), coloured so
 *    that 1 (the threshold) is where green turns red, failing cells framed;
 *  - regressions: the regressed rows' metric (result_t.regressed_*), its
 *    baseline value against this run's, one panel per metric, the diagonal
 *    drawn (only when a regressed row has numbers);
 *  - trend: per run (baseline, history, this run; in time order) the worst
 *    rel_fro / threshold against R_source of each kernel (1 = the
 *    threshold, a cross where the kernel failed), and the failing rows;
 *  - nfmap_<case>: the non-finite elements of a case's x (rows x columns),
 *    binned to at most 64 x 256 cells, with the blocks of its input_map_t. */
#ifndef KR_PLOTS_H
#define KR_PLOTS_H

#include <stdint.h>

#include "input_health.h"
#include "kr_error.h"
#include "result.h"

typedef struct {
    char name[96];        /* file stem: [A-Za-z0-9._-] */
    char title[192];      /* caption (plain text) */
    char kind[24];        /* "relerr", "ulp", "w4a8_vs_w4a4", "heatmap", "trend", "nfmap" */
    char case_path[512];  /* nfmap: the case it maps */
    int width, height;    /* pixels */
    char *script;         /* gnuplot commands, data inline (owned) */
} plot_t;

typedef struct {
    plot_t *items;
    int count;
    int64_t cap;
} plot_list_t;

/* One run of the history, for the trend. */
typedef struct {
    const char *label;            /* "baseline", "2024-05-01 03:00 abc1234", "this run" */
    const result_list_t *rows;
} plot_run_t;

/* The error rows of one shape x band, and its worst row: a failing row
 * before any passing one, then the larger rel_fro / threshold (1 = the
 * threshold; rows without one last, by rel_fro). */
typedef struct {
    int64_t N, K;
    char band[16];
    int64_t band_order;           /* smallest M seen in the band: bands sort by it */
    double worst_rel;             /* the worst row's rel_fro */
    double worst_ratio;           /* the worst row's rel_fro / threshold (NaN: no threshold) */
    int64_t worst_index;          /* the worst row's index in the list */
    verdict_t worst_verdict;      /* and its verdict */
    int n_rows;
    int failing;                  /* rows whose verdict fails */
} plot_cell_t;

/* Is row a worse than row b, by the order above? */
int plots_row_worse(const result_t *a, const result_t *b);

/* Is this row an error row (see above)?  When reference is not NULL it must
 * also be that reference. */
int plots_is_error_row(const result_t *r, const char *reference);

/* The shape x band cells of the error rows against any R_* reference,
 * sorted by N, K, then band order.  *cells is malloc'd (free it).  Returns
 * the count, or -1 when out of memory. */
int plots_cells(const result_list_t *rows, plot_cell_t **cells);

/* The W4A8 kernel the comparison with W4A4 uses, or NULL when the rows
 * hold no W4A4 kernel or no W4A8 kernel against R_source. */
const char *plots_w4a8_kernel(const result_list_t *rows);
/* The W4A4 side: the registry's COMPARE_ROLE_W4A4_EMULATION kernel (or NULL). */
const char *plots_w4a4_kernel(void);

/* Appends relerr_*, ulp_*, w4a8_vs_w4a4 and heatmap_worst (each only when
 * its rows exist). */
int plots_from_rows(plot_list_t *pl, const result_list_t *rows, kr_error_t *err);
/* Appends the trend over runs (n >= 2, oldest first). */
int plots_trend(plot_list_t *pl, const plot_run_t *runs, int n, kr_error_t *err);
/* Appends the non-finite map of x[M, K] (m: its input_map_compute). */
int plots_nfmap(plot_list_t *pl, const char *case_name, const char *case_path, const float *x,
                int64_t M, int64_t K, const input_map_t *m, kr_error_t *err);

void plot_list_free(plot_list_t *pl);

#endif
