/* suite_synth: the synth: items of a suite (suite_internal.h): the shapes
 * (catalogue names, NxK, "production") resolved in the shape catalogue,
 * the m values and seeds, the optional synth_params_t fields checked
 * against every shape, and the synthetic cases an item makes
 * (suite_synth_count, suite_synth_params).  Separate from suite.c because
 * a sweep has its own vocabulary and limits. */
#include "suite_internal.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const synth_keys[] = {"shapes",       "m",           "seeds",          "outliers",
                                         "outlier_gain", "token_spread", "weight_spread", "nan_block",
                                         "zero_rows",    "scale_layout", "fragment_order", "weight_format",
                                         NULL};

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
    const int n = suite_nonempty_seq(y, list, key, "at least one value", err);
    if (n < 0)
        return -1;
    if (n > SUITE_MAX_LIST)
        return kr_yaml_fail(y, list, 0, err, "%s: %d values; expected at most %d", key, n, SUITE_MAX_LIST);
    for (int i = 0; i < n; i++) {
        char ikey[96];
        yaml_node_t *it = suite_seq_item_named(y, list, key, i, ikey, sizeof ikey);
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
    const int ns = suite_nonempty_seq(y, shapes, k, "at least one shape", err);
    if (ns < 0)
        return -1;
    if (load_catalogue(L, shapes, err))
        return -1;
    ss->shape_list = calloc(SUITE_MAX_LIST, sizeof *ss->shape_list);
    if (!ss->shape_list)
        return kr_yaml_fail(y, shapes, 0, err, "out of memory");
    for (int i = 0; i < ns; i++) {
        char ikey[160], spec[64];
        yaml_node_t *it = suite_seq_item_named(y, shapes, k, i, ikey, sizeof ikey);
        if (kr_yaml_get_str(y, it, ikey, spec, sizeof spec, err))
            return -1;
        int got = resolve_shape_spec(L, it, ikey, spec, ss, err);
        if (got < 0)
            return -1;
        ss->n_shapes += got;
        if (suite_append_csv(ss->shapes, sizeof ss->shapes, spec))
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

int suite_parse_synth(loader_t *L, yaml_node_t *map, const char *key, int line, suite_synth_t *ss,
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

int64_t suite_synth_count(const suite_synth_t *ss)
{
    return (int64_t)ss->n_shapes * ss->n_m * ss->n_seeds;
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
