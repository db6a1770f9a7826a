/* One writer per run directory: a gate, `replay -o`, `merge` or `calibrate`
 * holds an exclusive flock on DIR/.kreplay.lock while it writes DIR, so two
 * runs given the same directory cannot both claim results.h5 with one run's
 * rows lost.  The second is refused by name ("DIR is being written by another
 * kreplay (pid N)").  The lock dies with the process (a killed run leaves no
 * stale lock); the file itself stays, holding the last writer's pid. */
#ifndef KR_RUN_LOCK_H
#define KR_RUN_LOCK_H

#include "kr_error.h"

typedef struct {
    int fd;                     /* -1 when not held */
} run_lock_t;

/* Creates DIR (mkdir -p) and takes its lock without waiting. */
int run_lock_acquire(const char *dir, run_lock_t *lock, kr_error_t *err);
/* Releases the lock (no-op when not held). */
void run_lock_release(run_lock_t *lock);

#endif
