/* What `kreplay gate` prints for people: the summary first (verdict counts,
 * failing / regressed / missing counts, where the report is), then only the
 * rows that need attention, each with its diagnosis and the one command that
 * reruns it; --all-rows adds the full table, --quiet keeps the summary alone. */
#ifndef KR_CLI_GATE_CONSOLE_H
#define KR_CLI_GATE_CONSOLE_H

#include <stdio.h>

#include "gate.h"

typedef struct {
    int all_rows;       /* --all-rows / -v: the full table after the summary */
    int quiet;          /* --quiet: the summary alone */
    int allow_missing;  /* --allow-missing: MISSING baseline rows do not fail the gate */
} gate_console_t;

/* ran: gate_run returned 0 (otherwise the summary says the run is incomplete). */
void gate_console_print(FILE *fp, const gate_console_t *con, const gate_options_t *o,
                        const result_list_t *rows, const gate_summary_t *sum, int ran);

#endif
