/* What a run could not do, in the forms its reports carry, so every output
 * agrees with the exit code: the list that makes results.json "incomplete":
 * true and the report INCOMPLETE (the inputs that could not be read, and the
 * error that stopped the run), and ERROR rows for JUnit (a CI reading only
 * the JUnit file sees the run did not finish). */
#ifndef KR_RUN_INCOMPLETE_H
#define KR_RUN_INCOMPLETE_H

#include "gate.h"
#include "result.h"

#define RUN_INCOMPLETE_MAX 17   /* gate_summary_t's 16 failed keys + the stopping error */

/* Fills list[] (pointers into *sum and stop_error, valid while they live)
 * and returns its length.  stop_error: why the run stopped (NULL: it did
 * not); it is listed unless it only repeats that inputs could not be read. */
int gate_incomplete_list(const gate_summary_t *sum, const char *stop_error,
                         const char *list[RUN_INCOMPLETE_MAX]);

/* *out = a copy of rows plus one ERROR row per entry of list (case_path the
 * entry, kernel and reference "-").  Returns 0, or -1 out of memory (*out
 * empty). */
int gate_rows_with_errors(const result_list_t *rows, const char *const *list, int n,
                          result_list_t *out);

#endif
