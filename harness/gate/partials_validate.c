/* partials_validate: resumed rows checked against the plan
 * (partials_validate.h). */
#include "partials_validate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "result_order.h"

#include "results_store.h"
#include "results_validate.h"
#include "row_reference.h"

static int kernel_in_run(const partials_plan_t *p, const char *name)
{
    if (!strncmp(name, "recorded.", 9))
        return 1;
    if (!kernel_name_matches(name, p->kernel_patterns))
        return 0;
    if (kernel_find(name))
        return 1;
    for (int i = 0; i < p->n_extra_kernels; i++)
        if (p->extra_kernels[i] && !strcmp(p->extra_kernels[i]->name, name))
            return 1;
    return 0;
}

static int key_index(char *const *keys, int n, const char *key)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(keys[i], key))
            return i;
    return -1;
}

static int refuse(const partials_plan_t *p, const char *key, kr_error_t *err, const char *why)
{
    char path[4600];
    results_store_partial_path(p->run_dir, key, path, sizeof path);
    return kr_fail(err, "%s: --resume: %s; expected only partials this run wrote (delete it, or "
                        "run without --resume to start over)", path, why);
}

/* The first row that repeats another's (case_path, kernel, reference), or -1
 * (-2 when out of memory). */
static int64_t repeated_row(const result_list_t *rows)
{
    int64_t *perm = result_order(rows->rows, rows->count, result_key_cmp);
    if (!perm)
        return -2;
    int64_t at = -1;
    for (int64_t k = 1; k < rows->count && at < 0; k++)
        if (result_key_cmp(&rows->rows[perm[k - 1]], &rows->rows[perm[k]]) == 0)
            at = perm[k];
    free(perm);
    return at;
}

/* What is wrong with one resumed row, into why; 0 when nothing. */
static int row_problem(const partials_plan_t *p, const result_t *row, char *const *keys,
                       int n_keys, char *why, size_t cap)
{
    if (key_index(keys, n_keys, row->case_path) < 0)
        snprintf(why, cap, "a row of case '%.512s', which no partial is for", row->case_path);
    else if (!kernel_in_run(p, row->kernel))
        snprintf(why, cap, "a row of kernel '%.128s', which this run does not run", row->kernel);
    else if (!row_reference_known(row->reference))
        snprintf(why, cap, "a row against reference '%.128s', which no run writes",
                 row->reference);
    else
        return 0;
    return 1;
}

int partials_validate(const partials_plan_t *p, const result_list_t *rows, char *const *keys,
                      int n_keys, kr_error_t *err)
{
    char why[2048];
    for (int i = 0; i < n_keys; i++)
        if (!p->planned(p->planned_ctx, keys[i])) {
            snprintf(why, sizeof why, "its case '%.512s' is not one this run plans (not in the "
                                      "suite, or not this shard's, shape's or band's)", keys[i]);
            return refuse(p, keys[i], err, why);
        }
    for (int64_t r = 0; r < rows->count; r++)
        if (row_problem(p, &rows->rows[r], keys, n_keys, why, sizeof why))
            return refuse(p, rows->rows[r].case_path, err, why);
    const int64_t rep = repeated_row(rows);
    if (rep == -2)
        return kr_fail(err, "%s/partial: out of memory checking %lld resumed rows", p->run_dir,
                       (long long)rows->count);
    if (rep >= 0) {
        const result_t *row = &rows->rows[rep];
        snprintf(why, sizeof why, "kernel %.128s, reference %.64s occurs twice for its case: more "
                                  "rows than the plan gives a case (one per kernel x reference)",
                 row->kernel, row->reference);
        return refuse(p, row->case_path, err, why);
    }
    /* One case's content under two keys. */
    return results_check_unique(rows, "--resume: the partials", err);
}
