#include "gate_selection.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "closest_name.h"
#include "kr_string.h"

/* Adds word to the ", "-separated list unless it is there. */
static void add_unique(char *list, size_t cap, const char *word)
{
    size_t wl = strlen(word);
    for (const char *p = list; (p = strstr(p, word)) != NULL; p += wl)
        if ((p == list || p[-1] == ' ') && (p[wl] == ',' || p[wl] == '\0'))
            return;
    size_t len = strlen(list);
    if (len + wl + 3 < cap)
        snprintf(list + len, cap - len, "%s%s", len ? ", " : "", word);
}

void gate_seen_add(gate_seen_t *seen, int64_t N, int64_t K, const char *band)
{
    char shape[48];
    snprintf(shape, sizeof shape, "%lldx%lld", (long long)N, (long long)K);
    add_unique(seen->shapes, sizeof seen->shapes, shape);
    add_unique(seen->bands, sizeof seen->bands, band);
}

int gate_check_only_band(const suite_t *s, const char *band, kr_error_t *err)
{
    const char *names[SUITE_MAX_BANDS + 1];
    char list[256] = "";
    int n = 0;
    for (int i = 0; i < s->n_bands; i++) {
        names[n++] = s->bands[i].name;
        add_unique(list, sizeof list, s->bands[i].name);
    }
    names[n++] = "none";
    for (int i = 0; i < n; i++)
        if (!strcmp(names[i], band))
            return 0;
    const char *near = closest_name(band, names, n);
    return kr_fail(err, "--only-band: '%s' is not a band of suite '%s' (%s)%s%s%s", band, s->name, list,
                   near ? "; did you mean " : "", near ? near : "", near ? "?" : "");
}

int gate_check_only_shape(const suite_t *s, const char *shape, int64_t *N, int64_t *K, kr_error_t *err)
{
    long long n = 0, k = 0;
    char tail;
    if (sscanf(shape, "%lldx%lld%c", &n, &k, &tail) != 2 || n < 1 || k < 1)
        return kr_fail(err, "--only-shape: expected NxK, got '%s'", shape);
    *N = n;
    *K = k;
    if (s->n_files > 0)
        return 0;
    gate_seen_t seen;
    memset(&seen, 0, sizeof seen);
    const char *names[256];
    char bufs[256][48];
    int nn = 0;
    for (int i = 0; i < s->n_synth; i++)
        for (int j = 0; j < s->synth[i].n_shapes; j++) {
            const shape_t *sh = &s->synth[i].shape_list[j];
            if (sh->N == n && sh->K == k)
                return 0;
            gate_seen_add(&seen, sh->N, sh->K, "");
            if (nn < 256) {
                snprintf(bufs[nn], sizeof bufs[nn], "%lldx%lld", (long long)sh->N, (long long)sh->K);
                names[nn] = bufs[nn];
                nn++;
            }
        }
    const char *near = closest_name(shape, names, nn);
    return kr_fail(err, "--only-shape: %s is not a shape of suite '%s' (%s)%s%s%s", shape, s->name, seen.shapes,
                   near ? "; did you mean " : "", near ? near : "", near ? "?" : "");
}

int gate_check_only_case(const char *name, int64_t n,
                         void (*name_at)(const void *ctx, int64_t i, char *buf, size_t cap), const void *ctx,
                         kr_error_t *err)
{
    enum { KEEP = 4096 };
    char (*names)[128] = malloc(KEEP * sizeof *names);
    const char **list = malloc(KEEP * sizeof *list);
    int kept = 0;
    char first[128] = "";
    for (int64_t i = 0; i < n; i++) {
        char buf[256];
        name_at(ctx, i, buf, sizeof buf);
        if (i == 0)
            kr_strlcpy(first, buf, sizeof first);
        if (!strcmp(buf, name)) {
            free(names);
            free(list);
            return 0;
        }
        if (names && list && kept < KEEP) {
            kr_strlcpy(names[kept], buf, sizeof names[kept]);
            list[kept] = names[kept];
            kept++;
        }
    }
    const char *near = names && list ? closest_name(name, list, kept) : NULL;
    char example[200] = "";
    if (first[0])
        snprintf(example, sizeof example, "; the names are a row's case name, such as '%s'", first);
    kr_fail(err, "--only-case: no case of the suite is named '%s'%s%s%s%s", name, near ? " (did you mean " : "",
            near ? near : "", near ? "?)" : "", near ? "" : example);
    free(names);
    free(list);
    return -1;
}

/* "--only-shape 17408x5120 --only-band mid" into buf: the filters given. */
static void filters_given(const gate_options_t *o, char *buf, size_t cap)
{
    buf[0] = '\0';
    size_t len = 0;
    if (o->only_case)
        len += (size_t)snprintf(buf + len, cap - len, "%s--only-case %s", len ? " " : "", o->only_case);
    if (o->only_shape && len < cap)
        len += (size_t)snprintf(buf + len, cap - len, "%s--only-shape %s", len ? " " : "", o->only_shape);
    if (o->only_band && len < cap)
        len += (size_t)snprintf(buf + len, cap - len, "%s--only-band %s", len ? " " : "", o->only_band);
    if (o->shard_count > 0 && len < cap)
        snprintf(buf + len, cap - len, "%s--shard %d/%d", len ? " " : "", o->shard_index, o->shard_count);
}

int gate_check_selected(const gate_options_t *o, const char *suite_name, int64_t cases, const gate_seen_t *seen,
                        const result_list_t *rows, kr_error_t *err)
{
    if (cases == 0) {
        char filters[700];
        filters_given(o, filters, sizeof filters);
        return kr_fail(err, "%s%sno case of suite '%s' is selected (its cases' shapes: %s; bands: %s): nothing "
                            "was checked",
                       filters, filters[0] ? ": " : "", suite_name, seen->shapes[0] ? seen->shapes : "none",
                       seen->bands[0] ? seen->bands : "none");
    }
    for (int64_t i = 0; i < rows->count; i++)
        if (rows->rows[i].verdict != VERDICT_UNSUPPORTED)
            return 0;
    if (rows->count == 0)
        return kr_fail(err, "the run's %lld case%s gave no rows: nothing was checked", (long long)cases,
                       cases == 1 ? "" : "s");
    return kr_fail(err, "no row compared anything: all %lld rows are UNSUPPORTED (%s: %s); select kernels that "
                        "serve these cases ('kreplay list kernels --verbose')",
                   (long long)rows->count, rows->rows[0].kernel, rows->rows[0].note);
}
