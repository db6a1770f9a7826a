/* What a gate needs, checked before its first case runs, so a run that is
 * bound to fail says so at once instead of after hours of cases: the
 * baseline file (present and a readable results file, or --baseline-init),
 * the run directory, the JUnit file's directory and the history directory
 * (each created if missing, and proven writable by writing, fsyncing and
 * removing a probe file: a read-only or full file system is refused here).
 * The suite and the policy are loaded (and so checked) before this. */
#ifndef KR_GATE_PREFLIGHT_H
#define KR_GATE_PREFLIGHT_H

#include "gate.h"
#include "kr_error.h"

/* Returns 0, or -1 with one line in err naming the path and what is wrong
 * (for a missing baseline: how to create one).  *baseline_missing is set
 * when --baseline-init will create the baseline from this run. */
int gate_preflight(const gate_options_t *o, int *baseline_missing, kr_error_t *err);

/* Creates dir (mkdir -p) and proves it writable with a probe file. */
int dir_check_writable(const char *dir, kr_error_t *err);

#endif
