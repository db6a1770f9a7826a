#include "policy.h"

#include "kr_string.h"
#include "row_reference.h"
#include "yaml_util.h"

#include <fnmatch.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define POLICY_MAX_RULES 1024

static const char *const root_keys[] = {"policy", "description", "margin", "rules",
                                        "bias_z", "bias_frac", "bias_share", NULL};
static const char *const rule_keys[] = {"kernel",        "reference", "band",          "rel_fro",
                                        "worst_row_rel", "max_ulp",   "identical_min", "nonfinite",
                                        "bias_z",        "bias_frac", "bias_share", NULL};
static const char *const recorded_names[] = {"recorded.out", "recorded.out_rerun", "recorded.aiter", NULL};
static const char *const band_names[] = {"decode", "mid", "prefill", "tiled", "none", NULL};

void policy_rule_init(policy_rule_t *rule, const char *kernel, const char *reference)
{
    memset(rule, 0, sizeof *rule);
    kr_strlcpy(rule->kernel, kernel, sizeof rule->kernel);
    kr_strlcpy(rule->reference, reference, sizeof rule->reference);
    kr_strlcpy(rule->band, "*", sizeof rule->band);
    rule->worst_row_rel = NAN;
    rule->identical_min = NAN;
    rule->max_ulp = -1;
    rule->nonfinite = POLICY_NONFINITE_FORBID;
    rule->bias_z = POLICY_BIAS_Z_DEFAULT;
    rule->bias_frac = POLICY_BIAS_FRAC_DEFAULT;
    rule->bias_share = POLICY_BIAS_SHARE_DEFAULT;
}

/* ---- loading ---- */

/* Does a rule's reference glob match a reference rows are written against
 * (row_reference.h; "-", a row that compared nothing, has no threshold)?
 * The names it could match go into expect. */
static int reference_glob_ok(const char *glob_, char *expect, size_t cap)
{
    int ok = !strncmp(glob_, ROW_REF_MODEL_PREFIX, strlen(ROW_REF_MODEL_PREFIX));
    size_t o = 0;
    expect[0] = 0;
    for (int i = 0; row_reference_name(i); i++) {
        const char *name = row_reference_name(i);
        if (!strcmp(name, ROW_REF_NONE))
            continue;
        ok |= fnmatch(glob_, name, 0) == 0;
        int w = snprintf(expect + o, cap - o, "%s, ", name);
        if (w < 0 || (size_t)w >= cap - o)
            return ok;
        o += (size_t)w;
    }
    snprintf(expect + o, cap - o, "%sNAME", ROW_REF_MODEL_PREFIX);
    return ok;
}

static int glob_matches_any(const char *glob_, const char *const *names)
{
    for (; *names; names++)
        if (fnmatch(glob_, *names, 0) == 0)
            return 1;
    return 0;
}

static int kernel_glob_ok(const char *g)
{
    for (int i = 0; i < kernel_count(); i++)
        if (fnmatch(g, kernel_at(i)->name, 0) == 0)
            return 1;
    return glob_matches_any(g, recorded_names);
}

static int get_glob(kr_yaml_t *y, yaml_node_t *rule, const char *field, const char *key, char *buf,
                    size_t cap, kr_error_t *err)
{
    yaml_node_t *v = kr_yaml_get(y, rule, field, NULL);
    if (!v || kr_yaml_is_null(v)) {
        kr_strlcpy(buf, "*", cap);
        return 0;
    }
    char k[96];
    snprintf(k, sizeof k, "%s.%s", key, field);
    if (kr_yaml_get_str(y, v, k, buf, cap, err))
        return -1;
    if (!buf[0])
        return kr_yaml_fail(y, v, 0, err, "%s: empty glob; expected a glob such as \"*\"", k);
    int ok;
    const char *expect;
    char names[768] = "";
    if (!strcmp(field, "kernel")) {
        ok = kernel_glob_ok(buf);
        size_t o = 0;
        for (int j = 0; j < kernel_count() && o < sizeof names; j++) {
            int w = snprintf(names + o, sizeof names - o, "%s, ", kernel_at(j)->name);
            if (w < 0)
                break;
            o += (size_t)w;
        }
        if (o < sizeof names)
            snprintf(names + o, sizeof names - o, "recorded.out, recorded.out_rerun, recorded.aiter");
        expect = names;
    } else if (!strcmp(field, "reference")) {
        ok = reference_glob_ok(buf, names, sizeof names);
        expect = names;
    } else {
        ok = glob_matches_any(buf, band_names);
        expect = "decode, mid, prefill, tiled";
    }
    if (!ok)
        return kr_yaml_fail(y, v, 0, err, "%s: '%s' matches no %s; expected a glob over: %s", k, buf, field, expect);
    return 0;
}

static int get_threshold(kr_yaml_t *y, yaml_node_t *v, const char *key, double lo, double hi, double *out,
                         kr_error_t *err)
{
    if (kr_yaml_get_double(y, v, key, out, err))
        return -1;
    if (!(*out >= lo && *out <= hi)) {
        char q[80];
        kr_yaml_quote(v, q, sizeof q);
        return kr_yaml_fail(y, v, 0, err, "%s: expected a number in [%g, %g], got '%s'", key, lo, hi, q);
    }
    return 0;
}

/* A rule's optional limits, in the order they are read (a bad one is
 * reported before those after it), with the range each must lie in. */
typedef struct {
    const char *name;
    double lo, hi;
    size_t offset;      /* where it goes in policy_rule_t */
    int whole_ulps;     /* an int64_t count of ULPs, not a double */
} optional_limit_t;

static const optional_limit_t OPTIONAL_LIMITS[] = {
    {"worst_row_rel", 0, INFINITY, offsetof(policy_rule_t, worst_row_rel), 0},
    {"max_ulp", 0, 65535, offsetof(policy_rule_t, max_ulp), 1},
    {"identical_min", 0, 1, offsetof(policy_rule_t, identical_min), 0},
    {"bias_z", 0, INFINITY, offsetof(policy_rule_t, bias_z), 0},
    {"bias_frac", 0, 1, offsetof(policy_rule_t, bias_frac), 0},
    {"bias_share", 0, 1, offsetof(policy_rule_t, bias_share), 0},
};

static int read_optional_limit(kr_yaml_t *y, yaml_node_t *v, const char *k,
                               const optional_limit_t *o, policy_rule_t *r, kr_error_t *err)
{
    char *field = (char *)r + o->offset;
    if (o->whole_ulps) {
        long long u;
        if (kr_yaml_get_int(y, v, k, (long long)o->lo, (long long)o->hi, &u, err))
            return -1;
        const int64_t ulps = u;
        memcpy(field, &ulps, sizeof ulps);
        return 0;
    }
    double d;
    if (get_threshold(y, v, k, o->lo, o->hi, &d, err))
        return -1;
    memcpy(field, &d, sizeof d);
    return 0;
}

static int parse_rule(kr_yaml_t *y, yaml_node_t *node, int i, policy_rule_t *r, kr_error_t *err)
{
    char key[48], k[96];
    snprintf(key, sizeof key, "rules[%d]", i);
    if (kr_yaml_check_map(y, node, key, rule_keys, err))
        return -1;
    policy_rule_init(r, "", "");
    r->bias_z = NAN;            /* unset: the policy's root-level limits apply */
    r->bias_frac = NAN;
    r->bias_share = NAN;
    r->line = kr_yaml_line(node);
    snprintf(r->origin, sizeof r->origin, "%.120s:%d", y->path, r->line);
    if (get_glob(y, node, "kernel", key, r->kernel, sizeof r->kernel, err) ||
        get_glob(y, node, "reference", key, r->reference, sizeof r->reference, err) ||
        get_glob(y, node, "band", key, r->band, sizeof r->band, err))
        return -1;
    yaml_node_t *v = kr_yaml_get(y, node, "rel_fro", NULL);
    snprintf(k, sizeof k, "%s.rel_fro", key);
    if (!v)
        return kr_yaml_fail(y, node, 0, err, "%s: missing required key 'rel_fro'; expected rel_fro: MAX (a number)", key);
    if (get_threshold(y, v, k, 0, INFINITY, &r->rel_fro, err))
        return -1;
    for (size_t j = 0; j < sizeof OPTIONAL_LIMITS / sizeof OPTIONAL_LIMITS[0]; j++) {
        const optional_limit_t *o = &OPTIONAL_LIMITS[j];
        if (!(v = kr_yaml_get(y, node, o->name, NULL)) || kr_yaml_is_null(v))
            continue;
        snprintf(k, sizeof k, "%s.%s", key, o->name);
        if (read_optional_limit(y, v, k, o, r, err))
            return -1;
    }
    if ((v = kr_yaml_get(y, node, "nonfinite", NULL)) && !kr_yaml_is_null(v)) {
        char txt[16] = "";
        snprintf(k, sizeof k, "%s.nonfinite", key);
        if (kr_yaml_get_str(y, v, k, txt, sizeof txt, err) == 0 && !strcmp(txt, "forbid"))
            r->nonfinite = POLICY_NONFINITE_FORBID;
        else if (!strcmp(txt, "allow"))
            r->nonfinite = POLICY_NONFINITE_ALLOW;
        else {
            char q[80];
            kr_yaml_quote(v, q, sizeof q);
            return kr_yaml_fail(y, v, 0, err, "%s: expected forbid or allow, got '%s'", k, q);
        }
    }
    return 0;
}

static int parse_policy(kr_yaml_t *y, policy_t *p, kr_error_t *err)
{
    yaml_node_t *root = kr_yaml_root(y);
    if (kr_yaml_check_map(y, root, "the policy", root_keys, err))
        return -1;
    yaml_node_t *v = kr_yaml_get(y, root, "policy", NULL);
    if (!v)
        return kr_yaml_fail(y, root, 0, err, "missing required key 'policy'; expected policy: NAME");
    char name[128];
    if (kr_yaml_get_str(y, v, "policy", name, sizeof name, err))
        return -1;
    if (!name[0])
        return kr_yaml_fail(y, v, 0, err, "policy: empty name; expected policy: NAME");
    char desc[2048] = "";
    v = kr_yaml_get(y, root, "description", NULL);
    if (v && !kr_yaml_is_null(v) && kr_yaml_get_str(y, v, "description", desc, sizeof desc, err))
        return -1;
    p->name = strdup(name);
    p->description = strdup(desc);
    if (!p->name || !p->description)
        return kr_yaml_fail(y, root, 0, err, "out of memory");
    v = kr_yaml_get(y, root, "margin", NULL);
    if (v && !kr_yaml_is_null(v)) {
        if (kr_yaml_get_double(y, v, "margin", &p->margin, err))
            return -1;
        if (!(p->margin >= 1.0 && p->margin <= 1000.0)) {
            char q[80];
            kr_yaml_quote(v, q, sizeof q);
            return kr_yaml_fail(y, v, 0, err, "margin: expected a number in [1, 1000], got '%s'", q);
        }
    }
    if ((v = kr_yaml_get(y, root, "bias_z", NULL)) && !kr_yaml_is_null(v) &&
        get_threshold(y, v, "bias_z", 0, INFINITY, &p->bias_z, err))
        return -1;
    if ((v = kr_yaml_get(y, root, "bias_frac", NULL)) && !kr_yaml_is_null(v) &&
        get_threshold(y, v, "bias_frac", 0, 1, &p->bias_frac, err))
        return -1;
    if ((v = kr_yaml_get(y, root, "bias_share", NULL)) && !kr_yaml_is_null(v) &&
        get_threshold(y, v, "bias_share", 0, 1, &p->bias_share, err))
        return -1;
    int line = 0;
    v = kr_yaml_get(y, root, "rules", &line);
    if (!v)
        return kr_yaml_fail(y, root, 0, err, "missing required key 'rules'; expected rules: a list (may be [])");
    if (kr_yaml_expect_seq(y, v, "rules", err))
        return -1;
    const int n = kr_yaml_seq_len(v);
    if (n > POLICY_MAX_RULES)
        return kr_yaml_fail(y, v, 0, err, "rules: %d rules; expected at most %d", n, POLICY_MAX_RULES);
    if (n) {
        p->rules = calloc((size_t)n, sizeof *p->rules);
        if (!p->rules)
            return kr_yaml_fail(y, v, 0, err, "out of memory");
    }
    for (int i = 0; i < n; i++) {
        if (parse_rule(y, kr_yaml_seq_item(y, v, i), i, &p->rules[i], err))
            return -1;
        if (isnan(p->rules[i].bias_z))
            p->rules[i].bias_z = p->bias_z;
        if (isnan(p->rules[i].bias_frac))
            p->rules[i].bias_frac = p->bias_frac;
        if (isnan(p->rules[i].bias_share))
            p->rules[i].bias_share = p->bias_share;
        p->n_rules++;
    }
    return 0;
}

static int load_common(kr_yaml_t *y, const char *name, policy_t *p, kr_error_t *err)
{
    p->margin = 2.0;
    p->bias_z = POLICY_BIAS_Z_DEFAULT;
    p->bias_frac = POLICY_BIAS_FRAC_DEFAULT;
    p->bias_share = POLICY_BIAS_SHARE_DEFAULT;
    p->path = strdup(name);
    kr_strlcpy(p->hash, y->hash, sizeof p->hash);
    int rc = p->path ? parse_policy(y, p, err) : kr_fail(err, "%s: out of memory", name);
    kr_yaml_free(y);
    if (rc)
        policy_free(p);
    return rc;
}

int policy_load(const char *path, policy_t *p, kr_error_t *err)
{
    memset(p, 0, sizeof *p);
    kr_yaml_t y;
    if (kr_yaml_load(path, "a mapping with policy: and rules:", &y, err))
        return -1;
    return load_common(&y, path, p, err);
}

int policy_load_bytes(const char *name, const char *bytes, size_t len, policy_t *p, kr_error_t *err)
{
    memset(p, 0, sizeof *p);
    kr_yaml_t y;
    if (kr_yaml_load_bytes(name, bytes, len, "a mapping with policy: and rules:", &y, err))
        return -1;
    return load_common(&y, name, p, err);
}

void policy_free(policy_t *p)
{
    if (!p)
        return;
    free(p->path);
    free(p->name);
    free(p->description);
    free(p->rules);
    memset(p, 0, sizeof *p);
}

const policy_rule_t *policy_match(const policy_t *p, const char *kernel, const char *reference,
                                  const char *band)
{
    if (!p)
        return NULL;
    for (int i = 0; i < p->n_rules; i++) {
        const policy_rule_t *r = &p->rules[i];
        if (fnmatch(r->kernel, kernel ? kernel : "", 0) == 0 &&
            fnmatch(r->reference, reference ? reference : "", 0) == 0 &&
            fnmatch(r->band, band ? band : "", 0) == 0)
            return r;
    }
    return NULL;
}

/* ---- derived rules ---- */

static double unit_roundoff(int mant)
{
    return ldexp(1.0, -(mant + 1));
}

double policy_derived_rel(int out_mant, int acc_mant, int act_mant, int64_t K)
{
    double t = unit_roundoff(out_mant) + (double)K * unit_roundoff(acc_mant);
    if (act_mant >= 0)
        t += unit_roundoff(act_mant);
    return t;
}

enum { OUT_MANT_BF16 = 7, ACC_MANT_FP32 = 23 };

static int act_mantissa(const kernel_desc_t *k)
{
    if (k->act.elem != ELEM_NONE && k->act.mantissa_bits >= 0)
        return k->act.mantissa_bits;
    return 7; /* no declared format: bf16 activations, as the unquantized kernels take */
}

int policy_derived_rule(const kernel_desc_t *k, const char *reference, int64_t K, policy_rule_t *rule)
{
    if (!k || !reference || K < 1)
        return -1;
    policy_rule_init(rule, k->name, reference);
    rule->line = 0;
    const int act = act_mantissa(k);
    if (!strcmp(reference, "R_exact") || !strncmp(reference, ROW_REF_MODEL_PREFIX, strlen(ROW_REF_MODEL_PREFIX))) {
        rule->rel_fro = policy_derived_rel(OUT_MANT_BF16, ACC_MANT_FP32, -1, K);
        snprintf(rule->origin, sizeof rule->origin, "derived: 2^-8 (bf16 out) + K=%lld x 2^-24 (fp32 sum)",
                 (long long)K);
    } else if (!strcmp(reference, "R_source") || !strcmp(reference, ROW_REF_SANITIZED)) {
        rule->rel_fro = policy_derived_rel(OUT_MANT_BF16, ACC_MANT_FP32, act, K);
        snprintf(rule->origin, sizeof rule->origin,
                 "derived: 2^-8 (bf16 out) + K=%lld x 2^-24 (fp32 sum) + 2^-%d (activations, %d mantissa bits)",
                 (long long)K, act + 1, act);
    } else if (!strcmp(reference, "x")) {
        rule->rel_fro = unit_roundoff(act);
        snprintf(rule->origin, sizeof rule->origin, "derived: 2^-%d (activations, %d mantissa bits)", act + 1, act);
    } else if (!strcmp(reference, ROW_REF_RERUN)) {
        rule->rel_fro = 0.0;
        rule->identical_min = 1.0;
        snprintf(rule->origin, sizeof rule->origin, "derived: a rerun is bit-identical");
    } else {
        return -1;
    }
    return 0;
}

int policy_rule_for(const policy_t *p, const char *kernel, const char *reference, const char *band,
                    int64_t K, policy_rule_t *rule)
{
    const policy_rule_t *r = policy_match(p, kernel, reference, band);
    if (r) {
        *rule = *r;
        return 0;
    }
    if (!kernel)
        return -1;
    const kernel_desc_t *k = kernel_find(kernel);
    if (!k && !strcmp(kernel, "recorded.aiter"))
        k = kernel_for_role(COMPARE_ROLE_W4A4_EMULATION);
    else if (!k && !strncmp(kernel, "recorded.", 9))
        k = kernel_for_role(COMPARE_ROLE_W4A8_MODEL);
    if (!k || policy_derived_rule(k, reference, K, rule))
        return -1;
    kr_strlcpy(rule->kernel, kernel, sizeof rule->kernel);
    return 0;
}

