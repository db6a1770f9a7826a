/* suite_files: the files: items of a suite (suite_internal.h): each glob
 * taken relative to the suite file's directory, a directory contributing
 * its *.h5, each file found replaced by the path the OS resolves it to
 * (suite_paths.h), the whole list sorted and deduplicated; and the lexical
 * path cleaning suite.h offers.  Separate from suite.c because expanding
 * globs is file-system work, not YAML. */
#include "suite_internal.h"
#include "suite_paths.h"

#include "array_grow.h"
#include "kr_string.h"

#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- paths ---- */

void suite_clean_path(char *path)
{
    if (!path || !*path)
        return;
    const int absolute = path[0] == '/';
    size_t len = strlen(path);
    char *work = malloc(len + 1);
    char **parts = malloc((len / 2 + 2) * sizeof *parts);
    if (!work || !parts) {
        free(work);
        free(parts);
        return;
    }
    memcpy(work, path, len + 1);
    int n = 0;
    for (char *save = NULL, *p = strtok_r(work, "/", &save); p; p = strtok_r(NULL, "/", &save)) {
        if (!strcmp(p, "."))
            continue;
        if (!strcmp(p, "..")) {
            if (n > 0 && strcmp(parts[n - 1], ".."))
                n--;
            else if (!absolute)
                parts[n++] = p;     /* a leading ".." of a relative path stays */
            continue;               /* "/.." is "/" */
        }
        parts[n++] = p;
    }
    size_t o = 0;
    if (absolute)
        path[o++] = '/';
    for (int i = 0; i < n; i++) {
        size_t l = strlen(parts[i]);
        if (i > 0)
            path[o++] = '/';
        memcpy(path + o, parts[i], l);  /* never longer than the input */
        o += l;
    }
    if (o == 0)
        path[o++] = '.';
    path[o] = 0;
    free(work);
    free(parts);
}

/* dst = DIR/rel (or rel when absolute, or when DIR is ".").  -1 when too long. */
int suite_join_path(const char *dir, const char *rel, char *dst, size_t cap)
{
    int n;
    if (rel[0] == '/' || !strcmp(dir, "."))
        n = snprintf(dst, cap, "%s", rel);
    else
        n = snprintf(dst, cap, "%s/%s", dir, rel);
    /* Not cleaned: "link/../x" is for the OS to resolve (suite_paths.h). */
    return n < 0 || (size_t)n >= cap ? -1 : 0;
}

/* Copies s with the glob metacharacters *?[\ escaped; -1 when too long. */
static int glob_escape(const char *s, char *dst, size_t cap)
{
    size_t o = 0;
    for (; *s; s++) {
        if (strchr("*?[\\", *s)) {
            if (o + 1 >= cap)
                return -1;
            dst[o++] = '\\';
        }
        if (o + 1 >= cap)
            return -1;
        dst[o++] = *s;
    }
    dst[o] = 0;
    return 0;
}

static int add_file(loader_t *L, const char *path)
{
    suite_t *s = L->s;
    char real[SUITE_PATH_MAX];
    if (s->n_files >= SUITE_MAX_FILES || suite_path_resolve(path, real, sizeof real))
        return -1;
    return array_append_strdup(&s->files, &s->n_files, &L->files_cap, 16, real) ? 0 : -1;
}

/* Adds the regular files PATTERN matches (a directory contributes its *.h5).
 * Returns the number added, or -1 on a glob or memory failure. */
static int expand_glob(loader_t *L, const char *pattern, int allow_dirs)
{
    glob_t g;
    memset(&g, 0, sizeof g);
    int rc = glob(pattern, 0, NULL, &g);
    if (rc == GLOB_NOMATCH) {
        globfree(&g);
        return 0;
    }
    if (rc != 0) {
        globfree(&g);
        return -1;
    }
    int added = 0;
    for (size_t i = 0; i < g.gl_pathc; i++) {
        struct stat st;
        if (stat(g.gl_pathv[i], &st) != 0)
            continue;
        if (S_ISREG(st.st_mode)) {
            if (add_file(L, g.gl_pathv[i])) {
                globfree(&g);
                return -1;
            }
            added++;
        } else if (S_ISDIR(st.st_mode) && allow_dirs) {
            char esc[SUITE_PATH_MAX], sub[SUITE_PATH_MAX];
            if (glob_escape(g.gl_pathv[i], esc, sizeof esc) ||
                snprintf(sub, sizeof sub, "%s/*.h5", esc) >= (int)sizeof sub)
                continue;
            int a = expand_glob(L, sub, 0);
            if (a < 0) {
                globfree(&g);
                return -1;
            }
            added += a;
        }
    }
    globfree(&g);
    return added;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void suite_sort_unique_files(suite_t *s)
{
    if (s->n_files < 2)
        return;
    qsort(s->files, (size_t)s->n_files, sizeof *s->files, cmp_str);
    int o = 1;
    for (int i = 1; i < s->n_files; i++) {
        if (!strcmp(s->files[i], s->files[o - 1]))
            free(s->files[i]);
        else
            s->files[o++] = s->files[i];
    }
    s->n_files = o;
}

int suite_parse_files(loader_t *L, yaml_node_t *list, const char *key, kr_error_t *err)
{
    kr_yaml_t *y = &L->y;
    const int n = suite_nonempty_seq(y, list, key, "at least one glob", err);
    if (n < 0)
        return -1;
    for (int i = 0; i < n; i++) {
        char ikey[96], pat[1024], esc[SUITE_PATH_MAX], full[SUITE_PATH_MAX];
        yaml_node_t *it = suite_seq_item_named(y, list, key, i, ikey, sizeof ikey);
        if (kr_yaml_get_str(y, it, ikey, pat, sizeof pat, err))
            return -1;
        if (!pat[0])
            return kr_yaml_fail(y, it, 0, err, "%s: empty glob; expected a path or glob such as ../samples/*.h5",
                                ikey);
        if (pat[0] == '/') {
            kr_strlcpy(full, pat, sizeof full);
        } else {
            if (glob_escape(L->dir, esc, sizeof esc) || suite_join_path(esc, pat, full, sizeof full))
                return kr_yaml_fail(y, it, 0, err, "%s: path too long; expected under %d bytes", ikey,
                                    SUITE_PATH_MAX);
        }
        int added = expand_glob(L, full, 1);
        if (added < 0)
            return kr_yaml_fail(y, it, 0, err, "%s: '%s': cannot expand (read error, out of memory, or more than %d files)",
                                ikey, pat, SUITE_MAX_FILES);
        if (added == 0)
            return kr_yaml_fail(y, it, 0, err, "%s: '%s' matches no file (looked for %s); expected at least one case file",
                                ikey, pat, full);
    }
    return 0;
}
