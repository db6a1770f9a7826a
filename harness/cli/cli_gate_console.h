/* What `kreplay gate` prints for people: the summary first, then only the
 * rows that need attention, each with the command that reruns it. */
#ifndef KR_CLI_GATE_CONSOLE_H
#define KR_CLI_GATE_CONSOLE_H

typedef struct {
    int all_rows;       /* --all-rows / -v: the full table after the summary */
    int quiet;          /* --quiet: the summary alone */
    int allow_missing;  /* --allow-missing: MISSING baseline rows do not fail the gate */
} gate_console_t;

#endif
