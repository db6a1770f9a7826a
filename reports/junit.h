/* JUnit XML for CI (Jenkins, GitLab, GitHub test reporters).
 *
 * One <testsuite name=suite_name>; one <testcase> per (case, kernel), the
 * references of that pair grouped into it, in order of first appearance:
 *   classname "kreplay.<N>x<K>.<band>", name "<case_name>:<kernel>",
 *   time = the sum of its rows' seconds.
 * A testcase with any row whose verdict fails (verdict_is_failure) carries
 * one <failure message="VERDICT reference: metric value (threshold t): note"
 * type="VERDICT">, its text one line per failing row.  A testcase whose rows
 * are all UNSUPPORTED is <skipped message="note"/>.  Everything else passes
 * (POISONED_INPUT included, as in a replay).
 *
 * All text is XML-escaped (& < > " '); control characters other than tab
 * and newline, and bytes that are not valid UTF-8, become '?', so the file
 * is always well-formed XML 1.0. */
#ifndef KR_JUNIT_H
#define KR_JUNIT_H

#include <stdio.h>

#include "result.h"

/* Returns 0, or -1 on a write error (ferror). */
int junit_write(FILE *fp, const char *suite_name, const result_list_t *rows, double seconds);

#endif
