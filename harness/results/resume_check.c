#include "resume_check.h"

#include <stdio.h>
#include <string.h>

#include "kr_string.h"
#include "run_options.h"

/* The suite part of "SUITE+POLICY" (the whole string when there is no policy). */
static void suite_part(const char *hash, char *buf, size_t cap)
{
    kr_strlcpy(buf, hash, cap);
    char *plus = strchr(buf, '+');
    if (plus)
        *plus = '\0';
}

static int check_one(const char *path, const results_meta_t *now, resume_check_t *out, kr_error_t *err)
{
    result_list_t rows = {0};
    results_meta_t was;
    if (results_store_read(path, &rows, &was, err)) {
        kr_error_t e = *err;
        return kr_fail(err, "%s (delete it to re-run that case)", e.msg);
    }
    result_list_free(&rows);
    char a[128], b[128];
    suite_part(was.suite_hash, a, sizeof a);
    suite_part(now->suite_hash, b, sizeof b);
    if (strcmp(a, b) != 0)
        return kr_fail(err, "%s: --resume: written for suite '%s' (hash %s), not this suite '%s' (hash %s); "
                            "resume with the same suite, or run without --resume to start over",
                       path, was.suite_name, a[0] ? a : "none", now->suite_name, b);
    if (strcmp(was.version, now->version) != 0 || strcmp(was.git_commit, now->git_commit) != 0)
        return kr_fail(err, "%s: --resume: written by kreplay %s (commit %s), this is kreplay %s (commit %s); "
                            "its rows would not be this build's: run without --resume to start over",
                       path, was.version[0] ? was.version : "?", was.git_commit[0] ? was.git_commit : "?",
                       now->version, now->git_commit);
    if (strcmp(was.blas_core, now->blas_core) != 0)
        return kr_fail(err, "%s: --resume: its references ran on the OpenBLAS core %s, this run's on %s: "
                            "their bits differ; run without --resume to start over, or resume with "
                            "OPENBLAS_CORETYPE=%s",
                       path, was.blas_core[0] ? was.blas_core : "?", now->blas_core, was.blas_core);
    char differ[1536];
    if (run_options_diff(was.options, now->options, differ, sizeof differ) > 0)
        return kr_fail(err, "%s: --resume: the interrupted run asked for other rows: %s; resume with its "
                            "options, or start over without --resume (--force, or a new -o directory)",
                       path, differ);
    if (strcmp(was.suite_hash, now->suite_hash) != 0 && !out->policy_changed) {
        out->policy_changed = 1;
        kr_strlcpy(out->old_suite_hash, was.suite_hash, sizeof out->old_suite_hash);
    }
    out->n_partials++;
    return 0;
}

int resume_check_partials(const char *run_dir, const results_meta_t *now, resume_check_t *out,
                          kr_error_t *err)
{
    memset(out, 0, sizeof *out);
    char dir[4200];
    char **names = NULL;
    int n = 0;
    if (results_store_partial_names(run_dir, dir, sizeof dir, &names, &n, err) != 0)
        return -1;
    int rc = 0;
    for (int i = 0; rc == 0 && i < n; i++) {
        char path[sizeof dir + 256 + 1];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        rc = check_one(path, now, out, err);
    }
    results_store_free_keys(names, n);
    return rc;
}
