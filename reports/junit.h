/* JUnit XML for CI (Jenkins, GitLab, GitHub test reporters).
 *
 * One <testsuite name=suite_name>; one <testcase> per (case, kernel), the
 * references of that pair grouped into it, in order of first appearance:
 *   classname "kreplay.<N>x<K>.<band>", name "<case_name>:<kernel>",
 *   time = the sum of its rows' seconds.
 * A testcase with an ERROR row (the harness could not compute it) carries
 * one <error message=... type="ERROR"> and counts in errors="N"; otherwise
 * one with any row whose verdict fails (verdict_is_failure) carries one
 * <failure message="VERDICT reference: metric value (threshold t): note"
 * type="VERDICT">; either's text has one line per such row.  A testcase whose
 * rows are all UNSUPPORTED is <skipped message="note"/>.  Everything else
 * passes (POISONED_INPUT included, as in a replay).  A testcase with a failing
 * row or a diagnosis has <system-out>: each such row's line and its
 * "diagnosis: ..." line.
 *
 * The testsuite carries timestamp (the run's time_utc) and hostname, and
 * <properties>: the run's provenance (commit, suite_hash, policy, blas_core, blas,
 * version, device, kernel_build_id, shard, command; those that are set).
 *
 * All text is XML-escaped (& < > " '); control characters other than tab
 * and newline, and bytes that are not valid UTF-8, become '?', so the file
 * is always well-formed XML 1.0. */
#ifndef KR_JUNIT_H
#define KR_JUNIT_H

#include <stdio.h>

#include "result.h"
#include "results_store.h"

typedef struct {
    const char *suite_name;       /* NULL: "kreplay" */
    double seconds;               /* the run's wall time (NaN: 0) */
    const results_meta_t *meta;   /* provenance, or NULL: timestamp now, this host */
} junit_run_t;

/* Returns 0, or -1 on a write error (ferror). */
int junit_write_run(FILE *fp, const junit_run_t *run, const result_list_t *rows);
/* The same without provenance. */
int junit_write(FILE *fp, const char *suite_name, const result_list_t *rows, double seconds);

#endif
