/* A run directory that already holds a run: what a gate or `replay -o`
 * may write over, checked before the first case.
 *
 *   - An interrupted gate run (RUNDIR/partial/ holds finished cases, no
 *     results.h5): a gate says "N cases finished: add --resume" instead of
 *     discarding them; a replay refuses to mix its rows in.
 *   - Another run's results (results.h5 of another suite, of a replay when
 *     a gate writes, of a gate when a replay writes): refused, naming it.
 *   - A finished run of the same suite (the nightly's fixed -o) or of an
 *     earlier replay is replaced, as before.
 * --force writes over any of them (the caller discards the old partials).
 * A directory that does not exist yet holds nothing. */
#ifndef KR_RUN_DIR_CHECK_H
#define KR_RUN_DIR_CHECK_H

#include "kr_error.h"

typedef struct {
    const char *dir;
    const char *suite_name;   /* the gate's suite; NULL for a replay */
    int resume;               /* gate --resume: the partials are this run's to finish */
    int force;
} run_dir_request_t;

/* 0 when the request may write into dir, else -1 with err saying what the
 * directory holds and the option or directory that goes on. */
int run_dir_check(const run_dir_request_t *rq, kr_error_t *err);

/* Removes dir/partial/'s finished case files (a run that is not resumed
 * starts clean); says on stderr when some could not be removed. */
void run_dir_clear_partials(const char *dir);

#endif
