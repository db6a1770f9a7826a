/* What a run's closing lines must say besides the verdict counts, so a
 * table of PASS rows cannot hide that the run checked less than asked:
 * cases that could not be read, an injected fault that changed no output
 * bit, a selection whose every row compared nothing. */
#ifndef KR_CLI_RUN_SUMMARY_H
#define KR_CLI_RUN_SUMMARY_H

#include <stdio.h>

#include "result.h"

/* "4 rows: 4 PASS; 1 case not read (its error is above)" */
void cli_summary_line(FILE *fp, const result_list_t *rows, int cases_not_read);

/* One line naming the kernels whose injected fault changed no output bit
 * ("injected fault changed no output bit of w4a8.folded, w4a8.decode (4
 * rows of 1 case): the fault was not tested there"); nothing when every
 * fault changed something. */
void cli_fault_summary(FILE *fp, const result_list_t *rows);

/* 1 when rows compared nothing (none, or every one UNSUPPORTED): the
 * error line is printed to stderr, prefixed "kreplay CMD: ". */
int cli_rows_compared_nothing(const char *cmd, const result_list_t *rows);

#endif
