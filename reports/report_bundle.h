/* A report directory, regenerated from a run's rows alone:
 *
 *   DIR/report.html       one self-contained page, plots inline (report_html.h)
 *   DIR/report_full.md    the Markdown beside it, plots referenced as PNG
 *   DIR/plots/NAME.svg    every plot (plots.h), and NAME.png for the Markdown
 *   DIR/results.json, results.csv, report.md   with write_tables (report_write_dir)
 *
 * The files are written into a fresh staging directory and moved into DIR
 * together (harness/common/out_stage.h): an interrupted report leaves the
 * earlier report whole, never a mix of two; DIR/plots holds this report's
 * plots alone, and whatever a planted link in DIR points to is never touched.
 * Without gnuplot on PATH the report has no plots: one warning on stderr,
 * the page says why, and report_generate still succeeds. */
#ifndef KR_REPORT_BUNDLE_H
#define KR_REPORT_BUNDLE_H

#include "kr_error.h"
#include "result.h"
#include "results_store.h"

typedef struct {
    int plots_drawn;        /* plots written (SVG) */
    int plots_failed;       /* plots gnuplot refused (each warned about) */
    int gnuplot_found;
    int history_runs;       /* runs in the trend, this one included (0: no trend) */
    int nfmaps;             /* non-finite maps made */
} report_outcome_t;

typedef struct {
    const results_meta_t *meta;   /* provenance of the rows (NULL: none) */
    const char *baseline_path;    /* a results file: the first run of the trend, or NULL */
    const char **case_paths;      /* cases whose x gets a non-finite map (kreplay report --case) */
    int n_case_paths;
    int find_cases;               /* also map the rows' case files that exist and whose x had
                                     non-finite values (default 1; at most 8 cases in all) */
    int history_last;             /* the trend keeps the last N history runs (default 10) */
    int write_tables;             /* also results.json, results.csv, report.md (default 0: the
                                     caller already wrote them) */
    int plots;                    /* draw plots when gnuplot is on PATH (default 1) */
    int quiet;                    /* no warnings on stderr (default 0) */
    int progress;                 /* a progress line while plotting, if stderr is a terminal (default 1) */
    const char *title;            /* page title (NULL: "kreplay report") */
    report_outcome_t *outcome;    /* filled when not NULL */
} report_options_t;

void report_options_init(report_options_t *o);

/* The names a report directory's set is made of: report.html,
 * report_full.md, plots (always), then results.json, results.csv,
 * report.md (with write_tables). */
extern const char *const REPORT_DIR_NAMES[6];

/* Writes the report directory for rows (any order; shown in the order given).
 * history_paths: results files of earlier runs (any order: sorted by their
 * provenance time_utc); unreadable ones are warned about and skipped, and
 * one that is this very run (same time, commit and suite hash as opt->meta)
 * is not counted twice.  opt may be NULL (the defaults).  Returns 0, or -1
 * with err when a file cannot be written or memory runs out. */
int report_generate(const char *out_dir, const result_list_t *rows, const char **history_paths, int n_history,
                    const report_options_t *opt, kr_error_t *err);

/* Was the run a drill (its command injected a fault, --inject)?  Of several
 * runs given to `kreplay report`, the newest that is not one is reported. */
int report_run_injected(const results_meta_t *m);

/* The results files of a history directory (gate --history, baseline update
 * --history): its *.h5 files in name order, "*.tmp.*" left out; a file is
 * returned as itself.  *paths is malloc'd (report_free_paths).  Returns the
 * count, or -1 with err when the path does not exist or cannot be read. */
int report_history_paths(const char *dir_or_file, char ***paths, kr_error_t *err);
void report_free_paths(char **paths, int n);

#endif
