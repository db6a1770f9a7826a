#include "run_dir_check.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "results_store.h"

/* What an earlier run left in dir: finished partials and results.h5's
 * provenance (has_results: 1 read, -1 present but unreadable). */
typedef struct {
    int n_partials;
    int has_results;
    results_meta_t meta;
    int64_t rows;
    kr_error_t read_err;
} run_dir_state_t;

static void read_state(const char *dir, run_dir_state_t *st)
{
    memset(st, 0, sizeof *st);
    char pdir[4200];
    char **names = NULL;
    kr_error_t err = {{0}};
    if (results_store_partial_names(dir, pdir, sizeof pdir, &names, &st->n_partials, &err) == 0)
        results_store_free_keys(names, st->n_partials);
    char path[4400];
    snprintf(path, sizeof path, "%s/results.h5", dir);
    struct stat sb;
    if (stat(path, &sb) != 0)
        return;
    result_list_t rows = {0};
    if (results_store_read(path, &rows, &st->meta, &st->read_err) == 0) {
        st->has_results = 1;
        st->rows = rows.count;
        result_list_free(&rows);
    } else {
        st->has_results = -1;
    }
}

/* "suite 'default' (524 rows, written 2026-... by: kreplay gate ...)" */
static void describe_results(const run_dir_state_t *st, char *buf, size_t cap)
{
    if (st->meta.suite_name[0])
        snprintf(buf, cap, "the results of suite '%.100s' (%lld rows, %.31s, by: %.300s)", st->meta.suite_name,
                 (long long)st->rows, st->meta.time_utc, st->meta.command);
    else
        snprintf(buf, cap, "the results of a replay (%lld rows, %.31s, by: %.300s)", (long long)st->rows,
                 st->meta.time_utc, st->meta.command);
}

static int check_gate(const run_dir_request_t *rq, const run_dir_state_t *st, kr_error_t *err)
{
    if (rq->resume)
        return 0;
    if (st->n_partials > 0 && st->has_results == 0)
        return kr_fail(err, "%s holds an interrupted run: %d case%s finished (%s/partial/): add --resume to "
                            "finish it, or --force to discard %s and start over",
                       rq->dir, st->n_partials, st->n_partials == 1 ? "" : "s", rq->dir,
                       st->n_partials == 1 ? "it" : "them");
    if (st->has_results < 0)
        return kr_fail(err, "%s holds a results.h5 that cannot be read (%s): use a new -o directory, or "
                            "--force to replace it", rq->dir, st->read_err.msg);
    if (st->has_results > 0 && strcmp(st->meta.suite_name, rq->suite_name) != 0) {
        char what[600];
        describe_results(st, what, sizeof what);
        return kr_fail(err, "%s holds another run, %s; this is suite '%s': use a new -o directory, or --force "
                            "to replace that run", rq->dir, what, rq->suite_name);
    }
    return 0;
}

static int check_replay(const run_dir_request_t *rq, const run_dir_state_t *st, kr_error_t *err)
{
    if (st->n_partials > 0)
        return kr_fail(err, "%s holds a gate run (%d finished case%s in %s/partial/%s): use a new -o directory, "
                            "or --force to replace that run", rq->dir, st->n_partials,
                       st->n_partials == 1 ? "" : "s", rq->dir,
                       st->has_results == 0 ? ", an interrupted run 'kreplay gate --resume' finishes" : "");
    if (st->has_results < 0)
        return kr_fail(err, "%s holds a results.h5 that cannot be read (%s): use a new -o directory, or "
                            "--force to replace it", rq->dir, st->read_err.msg);
    if (st->has_results > 0 && st->meta.suite_name[0]) {
        char what[600];
        describe_results(st, what, sizeof what);
        return kr_fail(err, "%s holds a gate run, %s: use a new -o directory, or --force to replace that run",
                       rq->dir, what);
    }
    return 0;
}

int run_dir_check(const run_dir_request_t *rq, kr_error_t *err)
{
    if (rq->force)
        return 0;
    run_dir_state_t st;
    read_state(rq->dir, &st);
    return rq->suite_name ? check_gate(rq, &st, err) : check_replay(rq, &st, err);
}

void run_dir_clear_partials(const char *dir)
{
    /* Unlinked one by one, never through a shell: dir is a user's path. */
    char pdir[4400];
    snprintf(pdir, sizeof pdir, "%s/partial", dir);
    /* A partial/ planted as a link is not ours to empty (its writer refuses it). */
    struct stat ls;
    DIR *d = lstat(pdir, &ls) == 0 && S_ISLNK(ls.st_mode) ? NULL : opendir(pdir);
    if (!d)
        return;
    int failed = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        size_t len = strlen(e->d_name);
        if (e->d_name[0] == '.' || len < 4 || strcmp(e->d_name + len - 3, ".h5") != 0)
            continue;
        char file[8800];
        snprintf(file, sizeof file, "%s/%s", pdir, e->d_name);
        failed |= unlink(file) != 0 && errno != ENOENT;
    }
    closedir(d);
    if (failed)
        fprintf(stderr, "kreplay: could not clear %s\n", pdir);
}
