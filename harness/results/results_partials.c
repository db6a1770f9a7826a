/* results_partials: one small results file per finished case in
 * RUNDIR/partial/, what --resume continues from (results_store.h's
 * results_store_append_case, results_store_load_partials).
 *
 * Separate from results_store.c, the file format, because loading the
 * partials reads each through the reading process (results_reader.c),
 * which builds on the format: here the arrows point down only. */
#include "results_store.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "array_grow.h"
#include "atomic_file.h"
#include "results_reader.h"

static uint64_t fnv1a64(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3ull;
    }
    return h;
}

static void partial_name(const char *key, char *buf, size_t cap)
{
    /* The hash makes it unique; the tail (the key's last 48 bytes, [A-Za-z0-9._-]) makes it
     * recognisable to a person listing the folder. */
    size_t len = strlen(key);
    const char *tail = key + (len > 48 ? len - 48 : 0);
    char t[49];
    size_t j = 0;
    for (; *tail && j < sizeof t - 1; tail++) {
        char c = *tail;
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '.' || c == '-' || c == '_';
        t[j++] = ok ? c : '_';
    }
    t[j] = '\0';
    snprintf(buf, cap, "%016" PRIx64 "-%s.h5", fnv1a64(key), t);
}

void results_store_partial_path(const char *run_dir, const char *case_key, char *buf, size_t cap)
{
    char name[128];
    partial_name(case_key, name, sizeof name);
    snprintf(buf, cap, "%s/partial/%s", run_dir, name);
}

/* RUNDIR/partial planted as a symbolic link: the run's partials would be
 * written to (and, by a fresh run, cleared from) wherever it points. */
static int partial_dir_is_link(const char *dir, kr_error_t *err)
{
    struct stat st;
    if (lstat(dir, &st) == 0 && S_ISLNK(st.st_mode))
        return kr_fail(err, "%s: is a symbolic link; refused (remove it: kreplay creates its own "
                            "partial/ folder)", dir);
    return 0;
}

int results_store_append_case(const char *run_dir, const char *case_key, const result_t *rows,
                              int64_t n_rows, const results_meta_t *meta, kr_error_t *err)
{
    if (!run_dir || !case_key || !*case_key)
        return kr_fail(err, "%s: partial: no run folder or case key given; expected both",
                       run_dir ? run_dir : "(null)");
    char dir[4200], name[128], path[4400];
    snprintf(dir, sizeof dir, "%s/partial", run_dir);
    if (partial_dir_is_link(dir, err) || make_dirs(dir, err) != 0)
        return -1;
    partial_name(case_key, name, sizeof name);
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, name) >= sizeof path)
        return kr_fail(err, "%s: partial: path too long; expected under 4096 bytes", run_dir);
    return results_store_write_rows(path, rows, n_rows, meta, case_key, err);
}

void results_store_free_keys(char **keys, int n)
{
    if (!keys)
        return;
    for (int i = 0; i < n; i++)
        free(keys[i]);
    free(keys);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int results_store_partial_names(const char *run_dir, char *dir, size_t dir_cap, char ***names,
                                int *n, kr_error_t *err)
{
    *names = NULL;
    *n = 0;
    snprintf(dir, dir_cap, "%s/partial", run_dir);
    if (partial_dir_is_link(dir, err))
        return -1;
    DIR *d = opendir(dir);
    if (!d) {
        if (errno == ENOENT)
            return 0;
        return kr_fail(err, "%s: cannot list (%s); expected a readable folder", dir,
                       strerror(errno));
    }
    char **v = NULL;
    int nn = 0;
    int64_t cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        /* Finished partials only: "<hash>-<tail>.h5"; "*.h5.tmp.<pid>" is a killed write. */
        if (len < 4 || strcmp(e->d_name + len - 3, ".h5") != 0 || strstr(e->d_name, ".tmp."))
            continue;
        if (!array_append_strdup(&v, &nn, &cap, 64, e->d_name)) {
            closedir(d);
            results_store_free_keys(v, nn);
            return kr_fail(err, "%s: out of memory loading partial results; expected to fit in "
                                "memory", dir);
        }
    }
    closedir(d);
    if (nn)
        qsort(v, (size_t)nn, sizeof *v, cmp_str);
    *names = v;
    *n = nn;
    return 0;
}

int results_store_load_partials(const char *run_dir, result_list_t *rows, char ***done_keys,
                                int *n_done, kr_error_t *err)
{
    *done_keys = NULL;
    *n_done = 0;
    if (!run_dir)
        return kr_fail(err, "(null): partial: no run folder given; expected a folder");
    char dir[4200];
    char **names = NULL, **keys = NULL;
    int nn = 0, nk = 0, rc = -1;
    if (results_store_partial_names(run_dir, dir, sizeof dir, &names, &nn, err) != 0)
        return -1;
    if (nn == 0) {              /* nothing finished yet: no keys, nothing to free */
        results_store_free_keys(names, 0);
        return 0;
    }
    const int64_t rows_before = rows->count;   /* restored on failure */
    keys = calloc((size_t)nn, sizeof *keys);
    if (!keys)
        goto oom;
    for (int i = 0; i < nn; i++) {
        char path[4400], key[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        result_list_t part;
        if (results_read_isolated(path, &part, NULL, key, sizeof key, NULL, err) != 0) {
            size_t l = strlen(err ? err->msg : "");
            if (err && l + 40 < sizeof err->msg)
                snprintf(err->msg + l, sizeof err->msg - l, " (delete it to re-run that case)");
            goto done;
        }
        for (int64_t r = 0; r < part.count; r++) {
            result_t *row = result_list_add(rows);
            if (!row) {
                result_list_free(&part);
                goto oom;
            }
            *row = part.rows[r];
        }
        result_list_free(&part);
        if (!(keys[nk] = strdup(key)))
            goto oom;
        nk++;
    }
    *done_keys = keys;
    *n_done = nk;
    keys = NULL;
    rc = 0;
    goto done;
oom:
    kr_fail(err, "%s: out of memory loading partial results; expected to fit in memory", dir);
done:
    if (rc != 0)
        rows->count = rows_before;
    results_store_free_keys(names, nn);
    results_store_free_keys(keys, nk);
    return rc;
}
