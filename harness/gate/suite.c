#include "suite.h"
#include "suite_paths.h"

#include "array_grow.h"
#include "closest_name.h"
#include "kr_string.h"
#include "registry.h"
#include "yaml_util.h"

#include <glob.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define SUITE_MAX_FILES 100000
#define SUITE_PATH_MAX 4096

static const char *const root_keys[] = {"suite",  "description", "cases",  "kernels", "references",
                                        "bands",  "reruns",      "device", "policy",  "python",
                                        NULL};
static const char *const case_keys[] = {"files", "synth", NULL};
static const char *const synth_keys[] = {"shapes",       "m",           "seeds",          "outliers",
                                         "outlier_gain", "token_spread", "weight_spread", "nan_block",
                                         "zero_rows",    "scale_layout", "fragment_order", "weight_format",
                                         NULL};
static const char *const band_names[] = {"decode", "mid", "prefill", "tiled", NULL};

typedef struct {
    kr_yaml_t y;
    suite_t *s;
    char dir[SUITE_PATH_MAX];   /* the suite file's directory */
    shape_catalog_t cat;
    int have_cat;
    int64_t files_cap;
} loader_t;

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
static int join_path(const char *dir, const char *rel, char *dst, size_t cap)
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

static void sort_unique_files(suite_t *s)
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

/* ---- pieces ---- */

static int is_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-' || c == '.';
}

static int append_csv(char *dst, size_t cap, const char *item)
{
    size_t l = strlen(dst), il = strlen(item);
    size_t need = l + (l ? 1 : 0) + il + 1;
    if (need > cap)
        return -1;
    if (l)
        dst[l++] = ',';
    memcpy(dst + l, item, il + 1);
    return 0;
}

/* The length of the sequence `list` (the value of `key`), or -1 with the
 * error said when it is not a sequence or is empty; `expect` says what
 * belongs in it. */
static int nonempty_seq(kr_yaml_t *y, yaml_node_t *list, const char *key, const char *expect,
                        kr_error_t *err)
{
    if (kr_yaml_expect_seq(y, list, key, err))
        return -1;
    const int n = kr_yaml_seq_len(list);
    if (n == 0)
        return kr_yaml_fail(y, list, 0, err, "%s: the list is empty; expected %s", key, expect);
    return n;
}

/* Item i of the list `list_key`, and its name in messages ("kernels[2]")
 * in key. */
static yaml_node_t *seq_item_named(kr_yaml_t *y, yaml_node_t *list, const char *list_key, int i,
                                   char *key, size_t key_cap)
{
    snprintf(key, key_cap, "%s[%d]", list_key, i);
    return kr_yaml_seq_item(y, list, i);
}

static int parse_files(loader_t *L, yaml_node_t *list, const char *key, kr_error_t *err)
{
    kr_yaml_t *y = &L->y;
    const int n = nonempty_seq(y, list, key, "at least one glob", err);
    if (n < 0)
        return -1;
    for (int i = 0; i < n; i++) {
        char ikey[96], pat[1024], esc[SUITE_PATH_MAX], full[SUITE_PATH_MAX];
        yaml_node_t *it = seq_item_named(y, list, key, i, ikey, sizeof ikey);
        if (kr_yaml_get_str(y, it, ikey, pat, sizeof pat, err))
            return -1;
        if (!pat[0])
            return kr_yaml_fail(y, it, 0, err, "%s: empty glob; expected a path or glob such as ../samples/*.h5",
                                ikey);
        if (pat[0] == '/') {
            kr_strlcpy(full, pat, sizeof full);
        } else {
            if (glob_escape(L->dir, esc, sizeof esc) || join_path(esc, pat, full, sizeof full))
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

static int load_catalogue(loader_t *L, yaml_node_t *at, kr_error_t *err)
{
    if (L->have_cat)
        return 0;
    kr_error_t e = {{0}};
    if (shape_catalog_load(shape_catalog_default_path(), &L->cat, &e))
        return kr_yaml_fail(&L->y, at, 0, err, "cannot load the shape catalogue: %s", e.msg);
    L->have_cat = 1;
    return 0;
}

static int parse_int_list(loader_t *L, yaml_node_t *list, const char *key, long long lo, long long hi,
                          long long *out, int *n_out, kr_error_t *err)
{
    kr_yaml_t *y = &L->y;
    const int n = nonempty_seq(y, list, key, "at least one value", err);
    if (n < 0)
        return -1;
    if (n > SUITE_MAX_LIST)
        return kr_yaml_fail(y, list, 0, err, "%s: %d values; expected at most %d", key, n, SUITE_MAX_LIST);
    for (int i = 0; i < n; i++) {
        char ikey[96];
        yaml_node_t *it = seq_item_named(y, list, key, i, ikey, sizeof ikey);
        if (kr_yaml_get_int(y, it, ikey, lo, hi, &out[i], err))
            return -1;
    }
    *n_out = n;
    return 0;
}

static int get_number_in(loader_t *L, yaml_node_t *v, const char *key, double lo, double hi,
                         int lo_open, double *out, kr_error_t *err)
{
    if (kr_yaml_get_double(&L->y, v, key, out, err))
        return -1;
    if (!(*out >= lo && *out <= hi) || (lo_open && *out == lo)) {
        char q[80];
        kr_yaml_quote(v, q, sizeof q);
        return kr_yaml_fail(&L->y, v, 0, err, "%s: expected a number in %c%g, %g], got '%s'", key,
                            lo_open ? '(' : '[', lo, hi, q);
    }
    return 0;
}

/* One entry of a synth item's shapes: a catalogue name, NxK or
 * "production", appended to ss->shape_list.  Returns how many shapes it
 * named, or -1. */
static int resolve_shape_spec(loader_t *L, yaml_node_t *it, const char *ikey, const char *spec, suite_synth_t *ss,
                              kr_error_t *err)
{
    kr_yaml_t *y = &L->y;
    char names[512] = "";
    size_t o = 0;
    for (int c = 0; c < L->cat.count && o < sizeof names; c++) {
        int w = snprintf(names + o, sizeof names - o, "%s%s", c ? ", " : "", L->cat.shapes[c].name);
        if (w < 0)
            break;
        o += (size_t)w;
    }
    kr_error_t e = {{0}};
    int got = -1;
    if (spec[0] && !strchr(spec, ','))
        got = shape_catalog_resolve(&L->cat, spec, ss->shape_list + ss->n_shapes,
                                    SUITE_MAX_LIST - ss->n_shapes, &e);
    if (got < 0) {
        if (strstr(e.msg, "too many"))
            return kr_yaml_fail(y, it, 0, err, "%s: more than %d shapes in one synth item; expected fewer",
                                ikey, SUITE_MAX_LIST);
        return kr_yaml_fail(y, it, 0, err,
                            "%s: unknown shape '%s'; expected a catalogue name (%s), NxK or production",
                            ikey, spec, names);
    }
    for (int j = ss->n_shapes; j < ss->n_shapes + got; j++) {
        const shape_t *sh = &ss->shape_list[j];
        if (sh->K % 64 != 0 || sh->N > (1 << 20) || sh->K > (1 << 20))
            return kr_yaml_fail(y, it, 0, err,
                                "%s: shape %s (N=%lld, K=%lld) cannot be synthesized; expected K a multiple of 64 and N, K <= 1048576",
                                ikey, sh->name, (long long)sh->N, (long long)sh->K);
    }
    return got;
}

/* shapes (required): the shape list of a synth item. */
static int parse_synth_shapes(loader_t *L, yaml_node_t *map, const char *key, suite_synth_t *ss, kr_error_t *err)
{
    kr_yaml_t *y = &L->y;
    char k[128];
    yaml_node_t *shapes = kr_yaml_get(y, map, "shapes", NULL);
    snprintf(k, sizeof k, "%s.shapes", key);
    if (!shapes)
        return kr_yaml_fail(y, map, 0, err,
                            "%s: missing required key 'shapes'; expected shapes: [catalogue names, NxK or production]",
                            key);
    const int ns = nonempty_seq(y, shapes, k, "at least one shape", err);
    if (ns < 0)
        return -1;
    if (load_catalogue(L, shapes, err))
        return -1;
    ss->shape_list = calloc(SUITE_MAX_LIST, sizeof *ss->shape_list);
    if (!ss->shape_list)
        return kr_yaml_fail(y, shapes, 0, err, "out of memory");
    for (int i = 0; i < ns; i++) {
        char ikey[160], spec[64];
        yaml_node_t *it = seq_item_named(y, shapes, k, i, ikey, sizeof ikey);
        if (kr_yaml_get_str(y, it, ikey, spec, sizeof spec, err))
            return -1;
        int got = resolve_shape_spec(L, it, ikey, spec, ss, err);
        if (got < 0)
            return -1;
        ss->n_shapes += got;
        if (append_csv(ss->shapes, sizeof ss->shapes, spec))
            return kr_yaml_fail(y, it, 0, err, "%s: the shape list is too long; expected under %zu characters",
                                ikey, sizeof ss->shapes);
    }
    return 0;
}

/* nan_block: "RxC@C0", R rows and C columns from column C0, inside every
 * shape's K. */
static int parse_nan_block(loader_t *L, yaml_node_t *v, const char *k, suite_synth_t *ss, kr_error_t *err)
{
    kr_yaml_t *y = &L->y;
    synth_params_t *p = &ss->base;
    char txt[64];
    if (kr_yaml_get_str(y, v, k, txt, sizeof txt, err))
        return -1;
    long long r = 0, c = 0, c0 = 0;
    int used = -1, used2 = -1;
    int ok = sscanf(txt, "%lldx%lld%n@%lld%n", &r, &c, &used, &c0, &used2);
    int full = (ok == 2 && used >= 0 && txt[used] == 0) || (ok == 3 && used2 >= 0 && txt[used2] == 0);
    if (!full || r <= 0 || c <= 0 || c0 < 0 || r > (1 << 20) || c > (1 << 20) || c0 > (1 << 20) ||
        strchr(txt, ' ') || strchr(txt, '+') || strchr(txt, '-'))
        return kr_yaml_fail(y, v, 0, err, "%s: expected \"RxC@C0\" (R rows, C columns from column C0), got '%s'",
                            k, txt);
    for (int j = 0; j < ss->n_shapes; j++)
        if (c0 + c > ss->shape_list[j].K)
            return kr_yaml_fail(y, v, 0, err,
                                "%s: columns [%lld, %lld) lie outside K=%lld of shape %s; expected C0 + C <= K",
                                k, c0, c0 + c, (long long)ss->shape_list[j].K, ss->shape_list[j].name);
    p->nan_rows = r;
    p->nan_cols = c;
    p->nan_col0 = c0;
    return 0;
}

static int parse_synth(loader_t *L, yaml_node_t *map, const char *key, int line, suite_synth_t *ss,
                       kr_error_t *err)
{
    kr_yaml_t *y = &L->y;
    if (kr_yaml_check_map(y, map, key, synth_keys, err))
        return -1;
    synth_params_default(&ss->base);
    ss->line = line;
    char k[128];

    if (parse_synth_shapes(L, map, key, ss, err))
        return -1;

    /* m (required), seeds */
    yaml_node_t *m = kr_yaml_get(y, map, "m", NULL);
    snprintf(k, sizeof k, "%s.m", key);
    if (!m)
        return kr_yaml_fail(y, map, 0, err, "%s: missing required key 'm'; expected m: [M values]", key);
    if (parse_int_list(L, m, k, 1, 1 << 20, ss->m, &ss->n_m, err))
        return -1;
    yaml_node_t *seeds = kr_yaml_get(y, map, "seeds", NULL);
    snprintf(k, sizeof k, "%s.seeds", key);
    if (seeds && !kr_yaml_is_null(seeds)) {
        if (parse_int_list(L, seeds, k, 0, LLONG_MAX, ss->seeds, &ss->n_seeds, err))
            return -1;
    } else {
        ss->seeds[0] = 1;
        ss->n_seeds = 1;
    }

    /* the optional synth_params_t fields */
    synth_params_t *p = &ss->base;
    yaml_node_t *v;
    long long iv;
    double dv;
#define OPT(name) ((v = kr_yaml_get(y, map, name, NULL)) && !kr_yaml_is_null(v) && \
                   snprintf(k, sizeof k, "%s.%s", key, name) > 0)
    if (OPT("outliers")) {
        if (kr_yaml_get_int(y, v, k, 0, 1 << 20, &iv, err))
            return -1;
        p->outlier_channels = (int)iv;
    }
    if (OPT("outlier_gain")) {
        if (get_number_in(L, v, k, 0, 1e30, 1, &dv, err))
            return -1;
        p->outlier_gain = dv;
    }
    if (OPT("token_spread")) {
        if (get_number_in(L, v, k, 0, 16, 0, &dv, err))
            return -1;
        p->token_spread = dv;
    }
    if (OPT("weight_spread")) {
        if (get_number_in(L, v, k, 0, 64, 0, &dv, err))
            return -1;
        p->weight_exp_spread = dv;
    }
    if (OPT("nan_block")) {
        if (parse_nan_block(L, v, k, ss, err))
            return -1;
    }
    if (OPT("zero_rows")) {
        if (kr_yaml_get_int(y, v, k, 0, 1 << 20, &iv, err))
            return -1;
        p->zero_rows = iv;
    }
    if (OPT("scale_layout")) {
        char txt[16] = "";
        if (kr_yaml_get_str(y, v, k, txt, sizeof txt, err) == 0 && (!strcmp(txt, "nk") || !strcmp(txt, "N,K/32")))
            p->scale_layout = SCALE_LAYOUT_NK;
        else if (!strcmp(txt, "kn") || !strcmp(txt, "K/32,N"))
            p->scale_layout = SCALE_LAYOUT_KN;
        else {
            char q[80];
            kr_yaml_quote(v, q, sizeof q);
            return kr_yaml_fail(y, v, 0, err, "%s: expected nk or kn, got '%s'", k, q);
        }
    }
    if (OPT("fragment_order")) {
        int b;
        if (kr_yaml_get_bool(y, v, k, &b, err))
            return -1;
        p->weight_order = b ? WEIGHT_ORDER_FRAGMENT : WEIGHT_ORDER_CHECKPOINT;
        for (int j = 0; b && j < ss->n_shapes; j++)
            if (ss->shape_list[j].N % 16 || ss->shape_list[j].K % 16)
                return kr_yaml_fail(y, v, 0, err, "%s: shape %s: fragment order needs N and K divisible by 16",
                                    k, ss->shape_list[j].name);
    }
    if (OPT("weight_format")) {
        char txt[16] = "";
        if (kr_yaml_get_str(y, v, k, txt, sizeof txt, err) || synth_weight_format_from_name(txt, &p->weight_format)) {
            char q[80];
            kr_yaml_quote(v, q, sizeof q);
            return kr_yaml_fail(y, v, 0, err, "%s: expected mxfp4, bf16 or both, got '%s'", k, q);
        }
        ss->weight_format_given = 1;
        if (p->weight_format == SYNTH_WEIGHT_BF16 && p->weight_order == WEIGHT_ORDER_FRAGMENT)
            return kr_yaml_fail(y, v, 0, err,
                                "%s: bf16 has no fragment order; expected mxfp4 or both with fragment_order: true",
                                k);
    }
#undef OPT
    return 0;
}

static int parse_cases(loader_t *L, yaml_node_t *cases, kr_error_t *err)
{
    kr_yaml_t *y = &L->y;
    suite_t *s = L->s;
    const int n = nonempty_seq(y, cases, "cases", "at least one files: or synth: item", err);
    if (n < 0)
        return -1;
    int n_synth = 0;
    for (int i = 0; i < n; i++) {
        char key[64];
        yaml_node_t *it = seq_item_named(y, cases, "cases", i, key, sizeof key);
        if (kr_yaml_check_map(y, it, key, case_keys, err))
            return -1;
        yaml_node_t *files = kr_yaml_get(y, it, "files", NULL), *synth = kr_yaml_get(y, it, "synth", NULL);
        if (files && synth)
            return kr_yaml_fail(y, it, 0, err, "%s: both files and synth; expected one of them per item", key);
        if (!files && !synth)
            return kr_yaml_fail(y, it, 0, err, "%s: empty item; expected files: [globs] or synth: {shapes, m}", key);
        n_synth += synth != NULL;
    }
    if (n_synth) {
        s->synth = calloc((size_t)n_synth, sizeof *s->synth);
        if (!s->synth)
            return kr_yaml_fail(y, cases, 0, err, "out of memory");
    }
    for (int i = 0; i < n; i++) {
        yaml_node_t *it = kr_yaml_seq_item(y, cases, i);
        char key[64];
        int line = 0;
        yaml_node_t *files = kr_yaml_get(y, it, "files", NULL), *synth = kr_yaml_get(y, it, "synth", &line);
        if (files) {
            snprintf(key, sizeof key, "cases[%d].files", i);
            if (parse_files(L, files, key, err))
                return -1;
        } else {
            snprintf(key, sizeof key, "cases[%d].synth", i);
            suite_synth_t *ss = &s->synth[s->n_synth++];
            if (parse_synth(L, synth, key, line, ss, err))
                return -1;
        }
    }
    sort_unique_files(s);
    kr_error_t limit;
    if (suite_check_case_count(s, &limit))
        return kr_yaml_fail(y, cases, 0, err, "cases: %s", limit.msg);
    return 0;
}

/* python: [MODULE:FUNCTION, ...]; a MODULE that is a path (a '/' or ".py") is taken
 * relative to the suite's directory and must exist. */
static int parse_python(loader_t *L, yaml_node_t *list, kr_error_t *err)
{
    kr_yaml_t *y = &L->y;
    if (kr_yaml_expect_seq(y, list, "python", err))
        return -1;
    const int n = kr_yaml_seq_len(list);
    if (n < 1 || n > SUITE_MAX_PYTHON)
        return kr_yaml_fail(y, list, 0, err, "python: %d entries; expected 1 to %d "
                                             "MODULE:FUNCTION specs", n, SUITE_MAX_PYTHON);
    for (int i = 0; i < n; i++) {
        char key[32], spec[512], full[SUITE_PATH_MAX];
        yaml_node_t *it = seq_item_named(y, list, "python", i, key, sizeof key);
        if (kr_yaml_get_str(y, it, key, spec, sizeof spec, err))
            return -1;
        char *colon = strrchr(spec, ':');
        if (!colon || colon == spec || !colon[1] || strchr(spec, ','))
            return kr_yaml_fail(y, it, 0, err, "%s: '%s' is not MODULE:FUNCTION; expected e.g. "
                                               "kernels.py:w4a8 or mypkg.kernels:w4a8", key, spec);
        *colon = '\0';
        size_t ml = strlen(spec);
        int is_path = strchr(spec, '/') || (ml > 3 && !strcmp(spec + ml - 3, ".py"));
        struct stat st;
        if (is_path && (join_path(L->dir, spec, full, sizeof full) || stat(full, &st) != 0))
            return kr_yaml_fail(y, it, 0, err, "%s: '%s' (resolved against %s) does not exist; "
                                               "expected a Python file", key, spec, L->dir);
        int w = snprintf(L->s->python[i], sizeof L->s->python[i], "%s:%s", is_path ? full : spec,
                         colon + 1);
        if (w < 0 || (size_t)w >= sizeof L->s->python[i])
            return kr_yaml_fail(y, it, 0, err, "%s: too long; expected under %zu bytes", key,
                                sizeof L->s->python[i]);
    }
    L->s->n_python = n;
    return 0;
}

static int parse_kernels(loader_t *L, yaml_node_t *list, kr_error_t *err)
{
    kr_yaml_t *y = &L->y;
    const int n = nonempty_seq(y, list, "kernels", "kernel globs, or no kernels: key for all", err);
    if (n < 0)
        return -1;
    char names[768] = "";
    const char *known[256];
    int n_known = 0;
    for (int j = 0; j < kernel_count() && n_known < 256; j++)
        known[n_known++] = kernel_at(j)->name;
    size_t o = 0;
    for (int j = 0; j < kernel_count() && o < sizeof names; j++) {
        int w = snprintf(names + o, sizeof names - o, "%s%s", j ? ", " : "", kernel_at(j)->name);
        if (w < 0)
            break;
        o += (size_t)w;
    }
    for (int i = 0; i < n; i++) {
        char key[64], glob_[128];
        yaml_node_t *it = seq_item_named(y, list, "kernels", i, key, sizeof key);
        if (kr_yaml_get_str(y, it, key, glob_, sizeof glob_, err))
            return -1;
        int matched = 0;
        if (glob_[0] && !strchr(glob_, ',') && glob_[0] != ' ')
            for (int j = 0; j < kernel_count() && !matched; j++)
                matched = kernel_name_matches(kernel_at(j)->name, glob_);
        if (!matched) {
            const char *near = closest_name(glob_, known, n_known);
            return kr_yaml_fail(y, it, 0, err,
                                "%s: '%s' matches no kernel in the registry%s%s%s; expected a glob over: %s", key,
                                glob_, near ? " (did you mean " : "", near ? near : "", near ? "?)" : "", names);
        }
        if (append_csv(L->s->kernels, sizeof L->s->kernels, glob_))
            return kr_yaml_fail(y, it, 0, err, "%s: the kernel list is too long; expected under %zu characters", key,
                                sizeof L->s->kernels);
    }
    return 0;
}

static int parse_refs(loader_t *L, yaml_node_t *list, kr_error_t *err)
{
    kr_yaml_t *y = &L->y;
    const int n = nonempty_seq(y, list, "references", "exact and/or source", err);
    if (n < 0)
        return -1;
    L->s->refs = 0;
    for (int i = 0; i < n; i++) {
        char key[64], txt[32] = "";
        yaml_node_t *it = seq_item_named(y, list, "references", i, key, sizeof key);
        if (kr_yaml_get_str(y, it, key, txt, sizeof txt, err) == 0 &&
            (!strcmp(txt, "exact") || !strcmp(txt, "R_exact")))
            L->s->refs |= REF_EXACT;
        else if (!strcmp(txt, "source") || !strcmp(txt, "R_source"))
            L->s->refs |= REF_SOURCE;
        else {
            char q[80];
            kr_yaml_quote(it, q, sizeof q);
            return kr_yaml_fail(y, it, 0, err, "%s: expected exact or source, got '%s'", key, q);
        }
    }
    return 0;
}

static int parse_bands(loader_t *L, yaml_node_t *map, kr_error_t *err)
{
    kr_yaml_t *y = &L->y;
    suite_t *s = L->s;
    if (kr_yaml_check_map(y, map, "bands", band_names, err))
        return -1;
    const int n = kr_yaml_map_len(map);
    if (n == 0)
        return kr_yaml_fail(y, map, 0, err, "bands: no band; expected decode/mid/prefill/tiled: [lo, hi]");
    s->n_bands = 0;
    for (int i = 0; i < n && i < SUITE_MAX_BANDS; i++) {
        yaml_node_t *kn, *v;
        if (kr_yaml_map_pair(y, map, i, &kn, &v))
            return kr_yaml_fail(y, map, 0, err, "bands: malformed mapping");
        band_t *b = &s->bands[s->n_bands];
        kr_strlcpy(b->name, kr_yaml_scalar(kn), sizeof b->name);
        char key[64];
        snprintf(key, sizeof key, "bands.%s", b->name);
        if (v->type != YAML_SEQUENCE_NODE || kr_yaml_seq_len(v) != 2) {
            char got[64];
            snprintf(got, sizeof got, "%s", v->type == YAML_SEQUENCE_NODE ? "a list of another length" : kr_yaml_kind(v));
            return kr_yaml_fail(y, v, 0, err, "%s: expected [lo, hi] (hi null = unbounded), got %s", key, got);
        }
        yaml_node_t *lo = kr_yaml_seq_item(y, v, 0), *hi = kr_yaml_seq_item(y, v, 1);
        long long l, h = 0;
        char k2[80];
        snprintf(k2, sizeof k2, "%s[0]", key);
        if (kr_yaml_get_int(y, lo, k2, 1, INT64_MAX, &l, err))
            return -1;
        snprintf(k2, sizeof k2, "%s[1]", key);
        if (!kr_yaml_is_null(hi) && kr_yaml_get_int(y, hi, k2, 1, INT64_MAX, &h, err))
            return -1;
        if (h && h < l)
            return kr_yaml_fail(y, hi, 0, err, "%s: hi %lld is below lo %lld; expected lo <= hi (or hi null)", key,
                                h, l);
        b->lo = l;
        b->hi = h;
        for (int j = 0; j < s->n_bands; j++) {
            const band_t *o = &s->bands[j];
            int64_t ahi = b->hi ? b->hi : INT64_MAX, bhi = o->hi ? o->hi : INT64_MAX;
            if (b->lo <= bhi && o->lo <= ahi)
                return kr_yaml_fail(y, v, 0, err, "%s: [%lld, %lld] overlaps %s; expected disjoint bands", key,
                                    (long long)b->lo, (long long)b->hi, o->name);
        }
        s->n_bands++;
    }
    return 0;
}

static int parse_root(loader_t *L, kr_error_t *err)
{
    kr_yaml_t *y = &L->y;
    suite_t *s = L->s;
    yaml_node_t *root = kr_yaml_root(y);
    if (kr_yaml_check_map(y, root, "the suite", root_keys, err))
        return -1;
    yaml_node_t *v;
    int line = 0;

    v = kr_yaml_get(y, root, "suite", NULL);
    if (!v)
        return kr_yaml_fail(y, root, 0, err, "missing required key 'suite'; expected suite: NAME");
    char name[128];
    if (kr_yaml_get_str(y, v, "suite", name, sizeof name, err))
        return -1;
    int ok = name[0] != 0;
    for (const char *c = name; *c && ok; c++)
        ok = is_name_char(*c);
    if (!ok)
        return kr_yaml_fail(y, v, 0, err, "suite: '%s' is not a name; expected letters, digits, '_', '-', '.'", name);
    s->name = strdup(name);

    v = kr_yaml_get(y, root, "description", NULL);
    char desc[2048] = "";
    if (v && !kr_yaml_is_null(v) && kr_yaml_get_str(y, v, "description", desc, sizeof desc, err))
        return -1;
    s->description = strdup(desc);
    if (!s->name || !s->description)
        return kr_yaml_fail(y, root, 0, err, "out of memory");

    v = kr_yaml_get(y, root, "kernels", NULL);
    if (v && !kr_yaml_is_null(v) && parse_kernels(L, v, err))
        return -1;
    v = kr_yaml_get(y, root, "python", NULL);
    if (v && !kr_yaml_is_null(v) && parse_python(L, v, err))
        return -1;
    v = kr_yaml_get(y, root, "references", NULL);
    if (v && !kr_yaml_is_null(v) && parse_refs(L, v, err))
        return -1;
    v = kr_yaml_get(y, root, "bands", NULL);
    if (v && !kr_yaml_is_null(v) && parse_bands(L, v, err))
        return -1;
    v = kr_yaml_get(y, root, "reruns", NULL);
    if (v && !kr_yaml_is_null(v)) {
        long long r;
        if (kr_yaml_get_int(y, v, "reruns", 0, 1000, &r, err))
            return -1;
        s->reruns = (int)r;
    }
    v = kr_yaml_get(y, root, "device", NULL);
    if (v && !kr_yaml_is_null(v)) {
        char dev[16] = "";
        if (kr_yaml_get_str(y, v, "device", dev, sizeof dev, err) || (strcmp(dev, "cpu") && strcmp(dev, "gpu"))) {
            char q[80];
            kr_yaml_quote(v, q, sizeof q);
            return kr_yaml_fail(y, v, 0, err, "device: expected cpu or gpu, got '%s'", q);
        }
        kr_strlcpy(s->device, dev, sizeof s->device);
    }
    v = kr_yaml_get(y, root, "policy", NULL);
    if (v && !kr_yaml_is_null(v)) {
        char rel[1024], full[SUITE_PATH_MAX];
        if (kr_yaml_get_str(y, v, "policy", rel, sizeof rel, err))
            return -1;
        if (!rel[0] || join_path(L->dir, rel, full, sizeof full))
            return kr_yaml_fail(y, v, 0, err, "policy: '%s' is not a usable path; expected a policy file", rel);
        char problem[128], real[SUITE_PATH_MAX];
        if (suite_file_problem(full, problem, sizeof problem) || suite_path_resolve(full, real, sizeof real))
            return kr_yaml_fail(y, v, 0, err, "policy: '%s' (resolved to %s) %s; expected a policy file", rel, full,
                                suite_file_problem(full, problem, sizeof problem) ? problem : "cannot be resolved");
        s->policy_path = strdup(real);
        if (!s->policy_path)
            return kr_yaml_fail(y, v, 0, err, "out of memory");
    }

    /* cases last: its errors (globs, shapes) come after the cheap checks */
    v = kr_yaml_get(y, root, "cases", &line);
    if (!v)
        return kr_yaml_fail(y, root, 0, err, "missing required key 'cases'; expected cases: a list of files: and synth: items");
    if (kr_yaml_is_null(v))
        return kr_yaml_fail(y, NULL, line, err, "cases: expected a list of files: and synth: items, got null");
    return parse_cases(L, v, err);
}

static void set_defaults(suite_t *s)
{
    static const band_t defaults[] = {
        {"decode", 1, 64}, {"mid", 65, 255}, {"prefill", 256, 2047}, {"tiled", 2048, 0}};
    s->refs = REF_EXACT | REF_SOURCE;
    s->n_bands = 4;
    memcpy(s->bands, defaults, sizeof defaults);
    s->reruns = 3;
    kr_strlcpy(s->device, "cpu", sizeof s->device);
}

static int load_common(loader_t *L, const char *name, suite_t *s, kr_error_t *err)
{
    s->path = strdup(name);
    if (!s->path) {
        kr_yaml_free(&L->y);
        return kr_fail(err, "%s: out of memory", name);
    }
    kr_strlcpy(s->hash, L->y.hash, sizeof s->hash);
    char tmp[SUITE_PATH_MAX];
    kr_strlcpy(tmp, name, sizeof tmp);
    char *slash = strrchr(tmp, '/');
    if (!slash)
        kr_strlcpy(L->dir, ".", sizeof L->dir);
    else if (slash == tmp)
        kr_strlcpy(L->dir, "/", sizeof L->dir);
    else {
        *slash = 0;
        kr_strlcpy(L->dir, tmp, sizeof L->dir);
    }
    L->s = s;
    int rc = parse_root(L, err);
    kr_yaml_free(&L->y);
    if (L->have_cat)
        shape_catalog_free(&L->cat);
    if (rc)
        suite_free(s);
    return rc;
}

int suite_load(const char *path, suite_t *s, kr_error_t *err)
{
    memset(s, 0, sizeof *s);
    set_defaults(s);
    loader_t L;
    memset(&L, 0, sizeof L);
    if (kr_yaml_load(path, "a mapping with suite: and cases:", &L.y, err)) {
        memset(s, 0, sizeof *s);
        return -1;
    }
    return load_common(&L, path, s, err);
}

int suite_load_bytes(const char *name, const char *bytes, size_t len, suite_t *s, kr_error_t *err)
{
    memset(s, 0, sizeof *s);
    set_defaults(s);
    loader_t L;
    memset(&L, 0, sizeof L);
    if (kr_yaml_load_bytes(name, bytes, len, "a mapping with suite: and cases:", &L.y, err)) {
        memset(s, 0, sizeof *s);
        return -1;
    }
    return load_common(&L, name, s, err);
}

void suite_free(suite_t *s)
{
    if (!s)
        return;
    free(s->path);
    free(s->name);
    free(s->description);
    for (int i = 0; i < s->n_files; i++)
        free(s->files[i]);
    free(s->files);
    for (int i = 0; i < s->n_synth; i++)
        free(s->synth[i].shape_list);
    free(s->synth);
    free(s->policy_path);
    memset(s, 0, sizeof *s);
}

const char *suite_band_of(const suite_t *s, int64_t M)
{
    for (int i = 0; i < s->n_bands; i++) {
        const band_t *b = &s->bands[i];
        if (M >= b->lo && (b->hi == 0 || M <= b->hi))
            return b->name;
    }
    return "none";
}

int64_t suite_synth_count(const suite_synth_t *ss)
{
    return (int64_t)ss->n_shapes * ss->n_m * ss->n_seeds;
}

int64_t suite_case_count(const suite_t *s)
{
    /* Each term is at most SUITE_MAX_LIST^3 and there are at most INT_MAX
     * items, so the sum cannot overflow int64. */
    int64_t n = s->n_files;
    for (int i = 0; i < s->n_synth; i++)
        n += suite_synth_count(&s->synth[i]);
    return n;
}

int suite_check_case_count(const suite_t *s, kr_error_t *err)
{
    const int64_t n = suite_case_count(s);
    if (n > SUITE_MAX_CASES)
        return kr_fail(err, "the suite would make %lld cases (%d files, %d synthetic sweeps); expected at "
                            "most %d (SUITE_MAX_CASES): split it into several suites, or use fewer shapes, "
                            "m values or seeds", (long long)n, s->n_files, s->n_synth, SUITE_MAX_CASES);
    return 0;
}

int suite_synth_params(const suite_synth_t *ss, int64_t i, synth_params_t *p)
{
    if (i < 0 || i >= suite_synth_count(ss))
        return -1;
    const int64_t per_shape = (int64_t)ss->n_m * ss->n_seeds;
    const shape_t *sh = &ss->shape_list[i / per_shape];
    const int64_t r = i % per_shape;
    *p = ss->base;
    p->M = ss->m[r / ss->n_seeds];
    p->seed = (uint64_t)ss->seeds[r % ss->n_seeds];
    p->N = sh->N;
    p->K = sh->K;
    if (!ss->weight_format_given)
        p->weight_format = !strcmp(sh->weight, "bf16") ? SYNTH_WEIGHT_BOTH : SYNTH_WEIGHT_MXFP4;
    p->layer = sh->name;
    return 0;
}
