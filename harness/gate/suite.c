/* suite: a suite file (suite.h) read from its YAML root: the name and
 * description, kernels, python, references, bands, reruns, device, policy
 * and, last, the cases: list, whose files: and synth: items are
 * suite_files.c's and suite_synth.c's (suite_internal.h). */
#include "suite.h"
#include "suite_internal.h"
#include "suite_paths.h"

#include "closest_name.h"
#include "kr_string.h"
#include "registry.h"
#include "yaml_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *const root_keys[] = {"suite",  "description", "cases",  "kernels", "references",
                                        "bands",  "reruns",      "device", "policy",  "python",
                                        NULL};
static const char *const case_keys[] = {"files", "synth", NULL};
static const char *const band_names[] = {"decode", "mid", "prefill", "tiled", NULL};

/* ---- pieces ---- */

static int is_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-' || c == '.';
}

static int parse_cases(loader_t *L, yaml_node_t *cases, kr_error_t *err)
{
    kr_yaml_t *y = &L->y;
    suite_t *s = L->s;
    const int n = suite_nonempty_seq(y, cases, "cases", "at least one files: or synth: item", err);
    if (n < 0)
        return -1;
    int n_synth = 0;
    for (int i = 0; i < n; i++) {
        char key[64];
        yaml_node_t *it = suite_seq_item_named(y, cases, "cases", i, key, sizeof key);
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
            if (suite_parse_files(L, files, key, err))
                return -1;
        } else {
            snprintf(key, sizeof key, "cases[%d].synth", i);
            suite_synth_t *ss = &s->synth[s->n_synth++];
            if (suite_parse_synth(L, synth, key, line, ss, err))
                return -1;
        }
    }
    suite_sort_unique_files(s);
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
        yaml_node_t *it = suite_seq_item_named(y, list, "python", i, key, sizeof key);
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
        if (is_path && (suite_join_path(L->dir, spec, full, sizeof full) || stat(full, &st) != 0))
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
    const int n = suite_nonempty_seq(y, list, "kernels", "kernel globs, or no kernels: key for all", err);
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
        yaml_node_t *it = suite_seq_item_named(y, list, "kernels", i, key, sizeof key);
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
        if (suite_append_csv(L->s->kernels, sizeof L->s->kernels, glob_))
            return kr_yaml_fail(y, it, 0, err, "%s: the kernel list is too long; expected under %zu characters", key,
                                sizeof L->s->kernels);
    }
    return 0;
}

static int parse_refs(loader_t *L, yaml_node_t *list, kr_error_t *err)
{
    kr_yaml_t *y = &L->y;
    const int n = suite_nonempty_seq(y, list, "references", "exact and/or source", err);
    if (n < 0)
        return -1;
    L->s->refs = 0;
    for (int i = 0; i < n; i++) {
        char key[64], txt[32] = "";
        yaml_node_t *it = suite_seq_item_named(y, list, "references", i, key, sizeof key);
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
        if (!rel[0] || suite_join_path(L->dir, rel, full, sizeof full))
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

