/* report_history: the earlier runs of a report's trend (--history).
 *
 * A history directory may hold many runs, each of thousands of rows, and
 * the trend shows only the last N (--last, default 10).  So each file's
 * provenance is read first (results_store_read_meta: its attributes and row
 * count, not its rows), the runs are ordered by their provenance time and
 * only the N newest are loaded whole: the rows of older runs are never
 * read, and memory does not grow with the history.  A file that cannot be
 * read (corrupt, a crash or a hang of libhdf5 in the reading process, a
 * FIFO, ...) is skipped with one warning naming it, whether it is read for
 * its provenance or for its rows; a run that is this very run (same time,
 * commit, suite hash and row count) is not counted twice. */
#ifndef KR_REPORT_HISTORY_H
#define KR_REPORT_HISTORY_H

#include <stdint.h>

#include "kr_error.h"
#include "result.h"
#include "results_store.h"

typedef struct {
    result_list_t rows;
    results_meta_t meta;
    char path[512];
} hist_run_t;

/* The last `last` (<= 0: all) runs of paths, oldest first, into *runs (*n
 * of them; free with report_history_free).  this_meta / this_rows: the run
 * the report is of (NULL: none).  Warnings go to stderr unless quiet.
 * Returns 0, or -1 with err when memory runs out. */
int report_history_load(const char **paths, int n_paths, int last, const results_meta_t *this_meta,
                        int64_t this_rows, int quiet, hist_run_t **runs, int *n, kr_error_t *err);

void report_history_free(hist_run_t *runs, int n);

/* Are a and b one run (the same time, commit and suite hash, and as many
 * rows)?  A run directory and its copy in a history directory are. */
int report_same_run(const results_meta_t *a, const results_meta_t *b, int64_t rows_a, int64_t rows_b);

#endif
