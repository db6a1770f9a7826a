/* Writers for a run's results: the terminal table, JSON, CSV and Markdown,
 * and the report directory that holds them (every file written atomically). */
#ifndef KR_REPORT_H
#define KR_REPORT_H

#include <jansson.h>
#include <stdio.h>

#include "kr_error.h"
#include "result.h"

/* Provenance of a run, written into every machine-readable output. */
typedef struct {
    const char *command;        /* the command line */
    const char *version;        /* kreplay version */
    const char *git_commit;     /* build's commit, or "unknown" */
    char host[128];
    char time_utc[32];          /* ISO 8601 */
    /* Inputs that could not be read: the run is incomplete, and every
     * report says so (results.json "incomplete": true with the list). */
    const char *const *failed_inputs;
    int n_failed_inputs;
} run_info_t;

void run_info_fill(run_info_t *info, const char *command, const char *version,
                   const char *git_commit);

/* One row per (case, kernel, reference), aligned columns, fitted to a
 * width (term_layout.h): columns dropped least useful first (band, nonfin,
 * max_abs, ...; the names, rel_fro, threshold and verdict stay), names cut
 * in the middle, a line saying which columns were left out.  Under every
 * failing row its note (why: the metric, value and threshold) and its
 * diagnosis, wrapped; under a row that compared nothing its note. */
typedef struct {
    int width;          /* 0: term_width(fp); < 0: no limit */
    int failed_only;    /* only the rows whose verdict fails */
} report_table_options_t;
void report_table_print_with(FILE *fp, const result_list_t *rows, const report_table_options_t *o);
/* The same with the defaults (every row, term_width(fp)). */
void report_table_print(FILE *fp, const result_list_t *rows);

/* What replay prints before its summary: one headline per case
 * (case_headline.h), the table (failed_only: its failing rows; then
 * "N failing rows shown (--failed); " with no newline, for the summary line
 * that follows it). */
void report_console_print(FILE *fp, const result_list_t *rows, int failed_only);

/* Verdict counts, one line: "12 rows: 10 PASS, 2 POISONED_INPUT". */
void report_summary_line(FILE *fp, const result_list_t *rows);
/* The same line with each verdict's name between before[verdict] and after
 * (a terminal's colour and its reset); before NULL: nothing around them. */
void report_summary_line_marked(FILE *fp, const result_list_t *rows, const char *const *before, const char *after);

/* {"kreplay": {...provenance}, "results": [ {...}, ... ], "summary": {...}} */
json_t *report_json_build(const result_list_t *rows, const run_info_t *info);
int report_json_write(FILE *fp, const result_list_t *rows, const run_info_t *info);

void report_csv_write(FILE *fp, const result_list_t *rows);
void report_markdown_write(FILE *fp, const result_list_t *rows, const run_info_t *info);

/* Writes DIR/results.json, DIR/results.csv and DIR/report.md, creating DIR. */
int report_write_dir(const char *dir, const result_list_t *rows, const run_info_t *info,
                     kr_error_t *err);

#endif
