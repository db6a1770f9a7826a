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

/* One row per (case, kernel, reference), aligned columns. */
void report_table_print(FILE *fp, const result_list_t *rows);

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
