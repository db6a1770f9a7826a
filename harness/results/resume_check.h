/* --resume only over partials this run could have written: each file in
 * RUNDIR/partial/ carries the provenance of the run that wrote it (suite hash
 * "SUITE+POLICY", kreplay version and commit, the BLAS core, the options
 * fingerprint of run_options.h).  Another suite, another kreplay build,
 * another BLAS core or options that change rows (kernels, faults, filters,
 * seeds, ...) are refused by name, each differing option with its old and
 * new value (their rows would be merged as this run's); another policy is
 * allowed, and the caller judges the resumed rows again with the current
 * one. */
#ifndef KR_RESUME_CHECK_H
#define KR_RESUME_CHECK_H

#include "kr_error.h"
#include "results_store.h"

typedef struct {
    int n_partials;
    int policy_changed;         /* some partial was judged by another policy */
    char old_suite_hash[128];   /* that partial's "SUITE+POLICY" hash */
} resume_check_t;

/* Compares every finished partial of run_dir with now (suite_hash, version,
 * git_commit, blas_core, options).  A missing partial/ folder is 0 partials.  Returns 0, or -1
 * with err naming the partial, what it was written by and what this run is. */
int resume_check_partials(const char *run_dir, const results_meta_t *now, resume_check_t *out,
                          kr_error_t *err);

#endif
