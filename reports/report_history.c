/* report_history: the trend's earlier runs, newest first by provenance
 * (report_history.h), and the files of a history directory. */
#include "report_history.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kr_string.h"
#include "report_bundle.h"

static int hist_cmp(const void *a, const void *b)
{
    const hist_run_t *x = a, *y = b;
    int c = strcmp(x->meta.time_utc, y->meta.time_utc);
    return c ? c : strcmp(x->path, y->path);
}

int report_same_run(const results_meta_t *a, const results_meta_t *b, int64_t rows_a, int64_t rows_b)
{
    return a && b && a->time_utc[0] && !strcmp(a->time_utc, b->time_utc) && !strcmp(a->git_commit, b->git_commit) &&
           !strcmp(a->suite_hash, b->suite_hash) && rows_a == rows_b;
}

static void warn_skipped(int quiet, const char *msg)
{
    if (!quiet)
        fprintf(stderr, "kreplay report: warning: history run skipped: %s\n", msg);
}

void report_history_free(hist_run_t *runs, int n)
{
    for (int i = 0; runs && i < n; i++)
        result_list_free(&runs[i].rows);
    free(runs);
}

int report_history_load(const char **paths, int n_paths, int last, const results_meta_t *this_meta,
                        int64_t this_rows, int quiet, hist_run_t **runs, int *n, kr_error_t *err)
{
    *runs = NULL;
    *n = 0;
    hist_run_t *h = calloc((size_t)(n_paths + 1), sizeof *h);
    int64_t *counts = calloc((size_t)(n_paths + 1), sizeof *counts);
    if (!h || !counts) {
        free(h);
        free(counts);
        return kr_fail(err, "report: out of memory");
    }
    int k = 0;
    for (int i = 0; i < n_paths; i++) {
        kr_error_t e = {{0}};
        int64_t rows = 0;
        if (results_store_read_meta(paths[i], &h[k].meta, &rows, &e)) {
            warn_skipped(quiet, e.msg);
            continue;
        }
        /* This very run, or one already listed (a run directory and its copy
         * in a history directory): counted once. */
        int twice = report_same_run(this_meta, &h[k].meta, this_rows, rows);
        for (int j = 0; j < k && !twice; j++)
            twice = report_same_run(&h[j].meta, &h[k].meta, counts[j], rows);
        if (twice)
            continue;
        counts[k] = rows;
        kr_strlcpy(h[k].path, paths[i], sizeof h[k].path);
        k++;
    }
    free(counts);
    if (k > 1)
        qsort(h, (size_t)k, sizeof *h, hist_cmp);
    /* Only the newest `last` are read whole; the older ones' rows never. */
    const int from = last > 0 && k > last ? k - last : 0;
    int kept = 0;
    for (int i = from; i < k; i++) {
        kr_error_t e = {{0}};
        results_meta_t m;
        if (results_store_read(h[i].path, &h[i].rows, &m, &e)) {
            warn_skipped(quiet, e.msg);
            continue;
        }
        h[i].meta = m;
        h[kept++] = h[i];
    }
    *runs = h;
    *n = kept;
    return 0;
}

/* ------------------------------------------------------- history folders */

static int str_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void report_free_paths(char **paths, int n)
{
    for (int i = 0; i < n && paths; i++)
        free(paths[i]);
    free(paths);
}

int report_history_paths(const char *dir_or_file, char ***paths, kr_error_t *err)
{
    *paths = NULL;
    struct stat st;
    if (stat(dir_or_file, &st) != 0)
        return kr_fail(err, "%s: history: no such file or directory", dir_or_file);
    int n = 0, cap = 16;
    char **v = malloc((size_t)cap * sizeof *v);
    if (!v)
        return kr_fail(err, "out of memory");
    if (!S_ISDIR(st.st_mode)) {
        v[0] = strdup(dir_or_file);
        if (!v[0]) {
            free(v);
            return kr_fail(err, "out of memory");
        }
        *paths = v;
        return 1;
    }
    DIR *d = opendir(dir_or_file);
    if (!d) {
        free(v);
        return kr_fail(err, "%s: history: cannot read the directory", dir_or_file);
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len <= 3 || strcmp(e->d_name + len - 3, ".h5") || strstr(e->d_name, ".tmp."))
            continue;
        if (n == cap) {
            cap *= 2;
            char **nv = realloc(v, (size_t)cap * sizeof *nv);
            if (!nv)
                break;
            v = nv;
        }
        size_t need = strlen(dir_or_file) + len + 2;
        v[n] = malloc(need);
        if (!v[n])
            break;
        snprintf(v[n], need, "%s/%s", dir_or_file, e->d_name);
        n++;
    }
    int broke = e != NULL;
    closedir(d);
    if (broke) {
        report_free_paths(v, n);
        return kr_fail(err, "out of memory");
    }
    if (n > 1)
        qsort(v, (size_t)n, sizeof *v, str_cmp);
    *paths = v;
    return n;
}
