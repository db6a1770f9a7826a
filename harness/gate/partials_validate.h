/* partials_validate: the rows --resume takes from RUNDIR/partial, checked
 * against the run's own plan before any is kept.
 *
 * A partial is a file anyone who can write RUNDIR could have placed there
 * (resume_check.h already refuses those of another suite or build by their
 * provenance, which a forger copies).  So its content must be what this run
 * would have written for it:
 *   - its case is one the run plans and selects (this suite, shard, shape,
 *     band and --only-case), and its rows are that case's;
 *   - each of its rows is of a kernel the run runs (the suite's kernels and
 *     python kernels, or a recorded.* output of the case) and of a known
 *     reference, and no (kernel, reference) occurs twice: so a case never
 *     has more rows than the plan gives it (one per kernel x reference).
 * A refusal names the partial file and says to delete it (or to run without
 * --resume). */
#ifndef KR_PARTIALS_VALIDATE_H
#define KR_PARTIALS_VALIDATE_H

#include "kr_error.h"
#include "registry.h"
#include "result.h"

/* Is the case with this key one the run plans and selects? */
typedef int (*partials_planned_fn)(const void *ctx, const char *key);

typedef struct {
    const char *run_dir;
    const char *kernel_patterns;                  /* the run's (NULL: every kernel) */
    const kernel_desc_t *const *extra_kernels;    /* the suite's python kernels */
    int n_extra_kernels;
    partials_planned_fn planned;
    const void *planned_ctx;
} partials_plan_t;

/* rows: those the partials held (results_store_load_partials), keys their
 * cases' keys.  0, or -1 with err. */
int partials_validate(const partials_plan_t *plan, const result_list_t *rows, char *const *keys,
                      int n_keys, kr_error_t *err);

#endif
