/* out_stage: a set of output files (a report directory's, a merged run's)
 * that replaces the earlier set whole or not at all.
 *
 * Each file of a set is written atomically (atomic_file.h), but a set of
 * them is not: a report interrupted half-way over an earlier report leaves
 * results.csv new beside report.html old, each complete-looking.  So every
 * file of the set is written into a fresh staging directory inside the
 * output directory (DIR/.kreplay-new-PID-RANDOM, mode 0700, made here), and
 * out_stage_commit moves the staged entries over their old selves in one
 * short step with SIGINT, SIGTERM, SIGHUP and SIGQUIT held back: an
 * interrupt either comes before it (the earlier set stands, untouched) or
 * after it (the new set stands).  A staged directory (plots/) is exchanged
 * with what was there (renameat2 RENAME_EXCHANGE), so nothing of an earlier
 * plots/ is left beside the new one; whatever an earlier set had that this
 * one does not (named in `owned`) is moved out.  Everything displaced goes
 * into the staging directory, which is then removed without following a
 * link: a plots/ planted as a symbolic link to another folder is replaced
 * as a link, and nothing in that folder is touched.
 *
 * Files outside DIR that belong to the set (a JUnit file) are staged too
 * (out_stage_external) and renamed into their own directory in the same
 * step.  A staging directory left by a process that was killed (its pid is
 * gone) is removed by the next out_stage_begin on DIR. */
#ifndef KR_OUT_STAGE_H
#define KR_OUT_STAGE_H

#include <stddef.h>

#include "kr_error.h"

#define OUT_STAGE_MAX_EXTERNAL 4

typedef struct {
    int dir_fd;                 /* DIR, opened once; -1 when not begun */
    int stage_fd;               /* the staging directory */
    char dir[4096];             /* DIR as given (messages) */
    char stage_name[64];        /* ".kreplay-new-PID-RANDOM" */
    char path[4200];            /* DIR/stage_name: where the set is written */
    int n_external;
    char external[OUT_STAGE_MAX_EXTERNAL][4096];     /* final paths outside DIR */
} out_stage_t;

/* Creates DIR (mkdir -p) and a fresh staging directory in it; removes the
 * staging directories of dead processes.  st->path is where to write. */
int out_stage_begin(out_stage_t *st, const char *dir, kr_error_t *err);

/* A file outside DIR that commits with the set: its staged path (inside
 * st->path) into staged. */
int out_stage_external(out_stage_t *st, const char *final_path, char *staged, size_t cap,
                       kr_error_t *err);

/* Moves the staged set into DIR (and the external files into place), and
 * moves out of DIR each name in owned that the set does not hold; then
 * removes the staging directory.  On failure (nothing was moved, or the
 * move stopped part-way, said in err) the staging directory is removed. */
int out_stage_commit(out_stage_t *st, const char *const *owned, int n_owned, kr_error_t *err);

/* Removes the staging directory and what is in it (an error path). */
void out_stage_abort(out_stage_t *st);

#endif
