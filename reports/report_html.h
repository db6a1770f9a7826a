/* The report page: one self-contained HTML file (no external file, script,
 * style or font), plots embedded as inline SVG.
 *
 * Layout: the summary on top (verdict counts; regressions, then the other
 * failing rows, with their notes and diagnosis; the worst offenders by
 * rel_fro / threshold; the worst shape x band; provenance), the plots, a
 * table per shape x band (rows pooled per kernel x reference), the run
 * history, and per-case detail (every row with its note and diagnosis line;
 * the non-finite map of the case's x where one was made; in a run of more
 * than 300 cases, passing cases get one line each).  Every string
 * from the rows or the provenance is HTML-escaped, bytes that are not UTF-8
 * included.
 *
 * A small inline script checks the page in a browser: on load it counts the
 * plots (svg.kr-plot), those that rendered nothing (no data group with a
 * non-empty bounding box) and the errors window.onerror saw, and writes
 * "plots=N expected=E empty=0 errors=0" into <div id="kr-selftest">
 * (tests/browser/ reads it). */
#ifndef KR_REPORT_HTML_H
#define KR_REPORT_HTML_H

#include <stdint.h>
#include <stdio.h>

#include "result.h"
#include "results_store.h"

typedef struct {
    const char *name;       /* file stem */
    const char *title;      /* caption */
    const char *kind;       /* plot_t.kind */
    const char *case_path;  /* nfmap: the case ("" otherwise) */
    const char *svg;        /* gnuplot's SVG, or NULL when not drawn */
    const char *png;        /* path of the PNG relative to the report ("plots/x.png"), or NULL */
} report_plot_t;

typedef struct {
    char case_path[512];
    char case_name[128];
    const char *describe;   /* input_map_describe's lines */
    int plot;               /* index into the plots, -1 when none */
} report_nfmap_t;

typedef struct {
    char label[96];
    char path[512];
    char time_utc[32];
    char git_commit[64];
    int64_t rows, failing, regressed;
} report_run_t;

typedef struct {
    const result_list_t *rows;
    const results_meta_t *meta;     /* provenance (NULL: none) */
    const report_plot_t *plots;
    int n_plots;
    const report_nfmap_t *nfmaps;
    int n_nfmaps;
    const report_run_t *runs;       /* the trend's runs, oldest first (this run last) */
    int n_runs;
    const char *plots_note;         /* why plots are missing (no gnuplot, a failure), or NULL */
    const char *title;              /* NULL: "kreplay report" */
} report_doc_t;

void report_html_write(FILE *fp, const report_doc_t *doc);
/* report_full.md: the same for a pull request, plots as their PNGs
 * (report_full_md.c). */
void report_full_md_write(FILE *fp, const report_doc_t *doc);

/* Writes s with & < > " ' as entities, control characters other than tab
 * and newline and bytes that are not UTF-8 as U+FFFD. */
void report_html_escape(FILE *fp, const char *s);

/* ---- summaries shared by the HTML page and report_full.md ---- */

/* Row indices, worst first: failing rows, then by rel_fro / threshold (rows
 * without a threshold after them, by rel_fro).  Rows without a reference,
 * UNSUPPORTED, ERROR and POISONED_INPUT rows (whose rel_fro covers the
 * finite part of a poisoned input) are left out.  At most cap; returns the
 * count. */
int report_worst_offenders(const result_list_t *rows, int64_t *idx, int cap);

/* The words around the worst shape x band cell's line, and the escaper of
 * the format (the line reads LEAD NxK BAND AFTER_BAND rel (KERNEL vs
 * REFERENCE BEFORE_CASE CASE TAIL). */
typedef struct {
    void (*esc)(FILE *fp, const char *s);
    const char *lead, *after_band, *before_case, *tail;
} report_line_style_t;

/* The line naming the worst shape x band cell -- a failing row before any
 * passing one, then by rel_fro / threshold (plots_row_worse) -- with its
 * rel_fro, its ratio to the threshold and its verdict; nothing when no
 * row has an error metric. */
void report_worst_cell_line(FILE *fp, const result_list_t *rows, const report_line_style_t *st);

/* How many rows of each failing section are listed. */
#define REPORT_FAILING_SHOWN 100

/* The writer of the failing sections: head(pass) before a section's first
 * row (pass 0: regressions, 1: the other failing rows), row for each of its
 * first REPORT_FAILING_SHOWN rows, end(n_more) after its last one (n_more:
 * the rows not listed, <= 0 when none). */
typedef struct {
    void (*head)(FILE *fp, int pass);
    void (*row)(FILE *fp, const result_t *r);
    void (*end)(FILE *fp, int64_t n_more);
    void (*regressed_row)(FILE *fp, const result_t *r);   /* the regressions' rows (NULL: row) */
} report_failing_writer_t;

/* A regressed row's finding: its metric, the baseline's and this run's
 * value, the change ("+0.0123 (+12.3%)"); NaN and "" where the finding has no
 * numbers (a verdict, a digest). */
void report_regression_change(const result_t *r, char *buf, size_t cap);

/* The regressions, then the other failing rows, each section only when it
 * has a row. */
void report_failing_sections(FILE *fp, const result_list_t *rows, const report_failing_writer_t *w);

/* One group of a shape x band table: the rows of one kernel x reference. */
typedef struct {
    int64_t N, K;
    char band[16];
    int64_t band_order;
    char kernel[64];
    char reference[32];
    int rows;
    double worst_rel, sum_rel;
    int n_rel;
    double threshold;               /* the largest */
    double worst_ratio;             /* rel_fro / threshold, the largest */
    double min_identical;
    uint64_t max_ulp;
    int64_t verdicts[VERDICT_COUNT];
} report_group_t;

/* Groups of rows with a reference (not "-"), sorted by N, K, band (by its
 * smallest M), kernel, reference.  UNSUPPORTED, ERROR and POISONED_INPUT
 * rows count in verdicts only, not in the rel_fro statistics.  *groups is malloc'd.  Returns the count,
 * or -1 when out of memory. */
int report_groups(const result_list_t *rows, report_group_t **groups);

/* The numbers of a group's row in the shape x band tables, in column order:
 * worst rel_fro, mean rel_fro (NaN without one), threshold, worst rel/thr,
 * min identical. */
#define REPORT_GROUP_NUMBERS 5
void report_group_numbers(const report_group_t *g, double v[REPORT_GROUP_NUMBERS]);

/* The rows of each verdict into counts; returns how many rows fail.  The
 * three summaries (report.md, report_full.md, the page) start from these. */
int64_t report_verdict_counts(const result_list_t *rows, int64_t counts[VERDICT_COUNT]);

/* "452 PASS, 24 POISONED_INPUT" into buf. */
void report_verdict_tally(const int64_t *counts, char *buf, int cap);

#endif
