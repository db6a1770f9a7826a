#include "cli_reduce_input.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "case_load.h"
#include "kr_string.h"
#include "synth.h"

int reduce_input_row(const char *results_path, long long index, result_t *row, results_meta_t *meta,
                     kr_error_t *err)
{
    result_list_t rows = {0};
    if (results_store_read(results_path, &rows, meta, err))
        return -1;
    if (index < 0 || index >= rows.count) {
        const long long count = (long long)rows.count;
        result_list_free(&rows);
        return kr_fail(err, "%s: rows: no row %lld; expected 0 to %lld (the order of /rows)",
                       results_path, index, count - 1);
    }
    *row = rows.rows[index];
    result_list_free(&rows);
    return 0;
}

int reduce_input_is_synthetic(const char *path)
{
    return strncmp(path, "synth:", 6) == 0;
}

/* "synth:LAYER:NxK:M<M>:s<seed>:i<item>" (gate.c's plan key). */
static int parse_key(const char *key, char *layer, size_t cap, long long v[5])
{
    const char *p = key + 6, *colon = strchr(p, ':');
    if (!colon || (size_t)(colon - p) >= cap)
        return -1;
    memcpy(layer, p, (size_t)(colon - p));
    layer[colon - p] = '\0';
    int used = 0;
    if (sscanf(colon, ":%lldx%lld:M%lld:s%llu:i%lld%n", &v[0], &v[1], &v[2],
               (unsigned long long *)&v[3], &v[4], &used) != 5 || colon[used] != '\0')
        return -1;
    return 0;
}

/* The synthetic case of a suite with this key, made by synth_case from the
 * parameters of its item's shape, with the key's M and seed (a gate run
 * with --seeds has seeds the suite does not list). */
static int load_synthetic(const char *key, const suite_t *s, case_t *c, kr_error_t *err)
{
    char layer[128];
    long long v[5];
    if (parse_key(key, layer, sizeof layer, v))
        return kr_fail(err, "%s: not a synthetic case's key; expected synth:LAYER:NxK:M<M>:s<seed>:i<item>",
                       key);
    if (!s)
        return kr_fail(err, "%s: a synthetic case; give the suite it came from (--suite SUITE)", key);
    if (v[4] < 0 || v[4] >= s->n_synth)
        return kr_fail(err, "%s: %s has no synthetic item %lld", key, s->path, v[4]);
    const suite_synth_t *item = &s->synth[v[4]];
    for (int64_t j = 0; j < suite_synth_count(item); j++) {
        synth_params_t p;
        if (suite_synth_params(item, j, &p) || p.N != v[0] || p.K != v[1] ||
            strcmp(p.layer ? p.layer : "shape", layer) != 0)
            continue;
        p.M = v[2];
        p.seed = (uint64_t)v[3];
        if (synth_case(&p, c, err))
            return -1;
        c->path = strdup(key);
        return c->path ? 0 : kr_fail(err, "out of memory");
    }
    return kr_fail(err, "%s: item %lld of %s has no shape %s %lldx%lld", key, v[4], s->path, layer, v[0],
                   v[1]);
}

int reduce_input_load(const char *path, const suite_t *suite, case_t *c, kr_error_t *err)
{
    if (reduce_input_is_synthetic(path))
        return load_synthetic(path, suite, c, err);
    return case_load_safe(path, c, NULL, 0, err);
}
