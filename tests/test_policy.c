/* Policy files (harness/judge/policy.h): loading, first-match order and globs,
 * the thresholds policy_apply enforces on crafted rows, bad policies with
 * "PATH:LINE:" errors, and the derived default thresholds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "judge.h"
#include "load_error.h"
#include "policy.h"
#include "registry.h"
#include "test_main.h"
#include "test_support.h"

static void write_file(const char *path, const char *text)
{
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
}

static const char calibrated[] =
    "policy: calibrated\n"              /* 1 */
    "description: for the tests\n"      /* 2 */
    "margin: 3\n"                       /* 3 */
    "rules:\n"                          /* 4 */
    "  - kernel: w4a8.perblock\n"       /* 5: specific first */
    "    reference: R_exact\n"          /* 6 */
    "    band: decode\n"                /* 7 */
    "    rel_fro: 0.001\n"              /* 8 */
    "  - kernel: \"w4a8.*\"\n"          /* 9 */
    "    reference: \"R_*\"\n"          /* 10 */
    "    rel_fro: 0.0035\n"             /* 11 */
    "    worst_row_rel: 0.006\n"        /* 12 */
    "    max_ulp: 2\n"                  /* 13 */
    "    identical_min: 0.97\n"         /* 14 */
    "    nonfinite: allow\n"            /* 15 */
    "  - band: \"[mp]*\"\n"             /* 16: mid and prefill, any kernel and reference */
    "    rel_fro: .inf\n";              /* 17 */

static void load_text(const char *text, char *path, size_t cap, policy_t *p, kr_error_t *err, int *rc)
{
    test_tmp_path(path, cap, "policy.yaml");
    write_file(path, text);
    *rc = policy_load(path, p, err);
}

/* The policy at PATH loads; fails the test with its error otherwise. */
static void load_ok(const char *path, policy_t *p)
{
    kr_error_t err = {{0}};
    if (policy_load(path, p, &err))
        fail_msg("%s", err.msg);
}

/* TEXT, written to a temporary file (its path in path[cap]), loads. */
static void load_text_ok(const char *text, char *path, size_t cap, policy_t *p)
{
    test_tmp_path(path, cap, "policy.yaml");
    write_file(path, text);
    load_ok(path, p);
}

static void test_load_and_match(void **state)
{
    (void)state;
    char path[1024], origin[1100];
    policy_t p;
    load_text_ok(calibrated, path, sizeof path, &p);
    assert_string_equal(p.path, path);
    assert_string_equal(p.name, "calibrated");
    assert_string_equal(p.description, "for the tests");
    assert_true(p.margin == 3.0);
    assert_int_equal(strlen(p.hash), 16);
    assert_int_equal(p.n_rules, 3);

    const policy_rule_t *r0 = &p.rules[0], *r1 = &p.rules[1], *r2 = &p.rules[2];
    assert_string_equal(r0->kernel, "w4a8.perblock");
    assert_string_equal(r0->reference, "R_exact");
    assert_string_equal(r0->band, "decode");
    assert_true(r0->rel_fro == 0.001);
    assert_true(isnan(r0->worst_row_rel));
    assert_int_equal(r0->max_ulp, -1);
    assert_true(isnan(r0->identical_min));
    assert_int_equal(r0->nonfinite, POLICY_NONFINITE_FORBID);
    assert_int_equal(r0->line, 5);
    snprintf(origin, sizeof origin, "%s:5", path);
    assert_string_equal(r0->origin, origin);

    assert_string_equal(r1->kernel, "w4a8.*");
    assert_string_equal(r1->reference, "R_*");
    assert_string_equal(r1->band, "*");
    assert_true(r1->rel_fro == 0.0035);
    assert_true(r1->worst_row_rel == 0.006);
    assert_int_equal(r1->max_ulp, 2);
    assert_true(r1->identical_min == 0.97);
    assert_int_equal(r1->nonfinite, POLICY_NONFINITE_ALLOW);
    assert_int_equal(r1->line, 9);

    assert_string_equal(r2->kernel, "*");
    assert_string_equal(r2->reference, "*");
    assert_string_equal(r2->band, "[mp]*");
    assert_true(isinf(r2->rel_fro));
    assert_int_equal(r2->line, 16);

    /* first match wins, in file order */
    assert_ptr_equal(policy_match(&p, "w4a8.perblock", "R_exact", "decode"), r0);
    assert_ptr_equal(policy_match(&p, "w4a8.perblock", "R_exact", "mid"), r1);
    assert_ptr_equal(policy_match(&p, "w4a8.perblock", "R_source", "decode"), r1);
    assert_ptr_equal(policy_match(&p, "w4a8.folded", "R_exact", "tiled"), r1);
    assert_ptr_equal(policy_match(&p, "w4a8.perblock", "out_rerun", "mid"), r2);
    assert_ptr_equal(policy_match(&p, "w4a4.aiter", "R_exact", "mid"), r2);
    assert_ptr_equal(policy_match(&p, "w4a4.aiter", "R_exact", "prefill"), r2);
    assert_null(policy_match(&p, "w4a4.aiter", "R_exact", "decode"));
    assert_null(policy_match(&p, "w4a4.aiter", "R_source", "tiled"));
    assert_null(policy_match(NULL, "w4a4.aiter", "R_source", "tiled"));

    /* policy_rule_for: the match, else the derived rule */
    policy_rule_t rule;
    assert_int_equal(policy_rule_for(&p, "w4a8.perblock", "R_exact", "decode", 5120, &rule), 0);
    assert_true(rule.rel_fro == 0.001);
    assert_int_equal(policy_rule_for(&p, "w4a4.aiter", "R_exact", "decode", 5120, &rule), 0);
    assert_int_equal(rule.line, 0);
    assert_non_null(strstr(rule.origin, "derived"));
    assert_true(fabs(rule.rel_fro - (0x1p-8 + 5120 * 0x1p-24)) < 1e-15);
    policy_free(&p);
    assert_null(p.rules);

    /* the same rules with the catch-all first shadow everything after it */
    static const char shadow[] = "policy: shadow\nrules:\n  - rel_fro: 1\n  - kernel: w4a8.perblock\n    rel_fro: 0.001\n";
    load_text_ok(shadow, path, sizeof path, &p);
    assert_true(p.margin == 2.0); /* the default */
    const policy_rule_t *m = policy_match(&p, "w4a8.perblock", "R_exact", "decode");
    assert_non_null(m);
    assert_true(m->rel_fro == 1.0);
    assert_int_equal(m->line, 3);
    policy_free(&p);
}

static void test_default_policy(void **state)
{
    (void)state;
    policy_t p;
    load_ok(KREPLAY_SOURCE_DIR "/cases/policies/default.yaml", &p);
    assert_string_equal(p.name, "default");
    assert_true(p.margin == 2.0);
    /* The committed default is calibrated (cases/policies/default-calibration.md):
     * every kernel of the default suite has a decode rule, and a band the
     * calibration never saw falls back to the derived rule. */
    assert_true(p.n_rules > 0);
    for (int i = 0; i < kernel_count(); i++) {
        const kernel_desc_t *k = kernel_at(i);
        const char *ref = k->op == KERNEL_OP_QUANT ? "x" : "R_source";
        policy_rule_t rule;
        const policy_rule_t *m = policy_match(&p, k->name, ref, "decode");
        assert_non_null(m);
        assert_true(m->rel_fro > 0 && m->rel_fro < 1);
        assert_int_equal(policy_rule_for(&p, k->name, ref, "tiled", 2048, &rule), 0);
        assert_true(rule.rel_fro > 0 && rule.rel_fro < 1);
        assert_non_null(strstr(rule.origin, "derived"));
    }
    policy_free(&p);
}

/* A row of a clean kernel: every metric comfortably inside the rule below. */
static result_t clean_row(void)
{
    return (result_t){
        .kernel = "w4a8.perblock",
        .reference = "R_exact",
        .metrics = {.count = 1000, .finite_count = 1000, .rel_fro = 0.002, .max_abs = 0.01,
                    .worst_row_rel = 0.004, .worst_row = 3, .mag_ratio = 1.0, .cosine = 1.0},
        .ulp = {.count = 1000, .identical = 980, .identical_frac = 0.98, .max_ulp = 1},
        .verdict = VERDICT_PASS,
    };
}

static policy_rule_t full_rule(void)
{
    return (policy_rule_t){
        .kernel = "w4a8.*", .reference = "R_exact", .band = "*",
        .rel_fro = 0.0035, .worst_row_rel = 0.006, .max_ulp = 2, .identical_min = 0.97,
        .nonfinite = POLICY_NONFINITE_FORBID,
        .bias_z = POLICY_BIAS_Z_DEFAULT, .bias_frac = POLICY_BIAS_FRAC_DEFAULT,
        .bias_share = POLICY_BIAS_SHARE_DEFAULT,
        .line = 7, .origin = "test.yaml:7",
    };
}

#define EXPECT(row, v, phrase)                                                              \
    do {                                                                                    \
        char note_[512] = "";                                                               \
        verdict_t got_ = policy_apply(&rule, &(row), note_, sizeof note_);                  \
        if (got_ != (v) || !strstr(note_, (phrase)))                                        \
            fprintf(stderr, "line %d: got %s '%s', wanted %s '%s'\n", __LINE__,             \
                    verdict_name(got_), note_, verdict_name(v), (phrase));                  \
        assert_int_equal(got_, (v));                                                        \
        assert_non_null(strstr(note_, (phrase)));                                           \
    } while (0)

/* One metric of row R set to each value in turn, with the verdict and a
 * phrase of the note RULE must give for it. */
typedef struct {
    double value;
    verdict_t verdict;
    const char *phrase;
} metric_step_t;

static void expect_metric_steps(const policy_rule_t *rule, result_t *r, double *metric,
                                const metric_step_t *steps, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        *metric = steps[i].value;
        char note[512] = "";
        const verdict_t got = policy_apply(rule, r, note, sizeof note);
        if (got != steps[i].verdict || !strstr(note, steps[i].phrase))
            fail_msg("value %g: got %s '%s', wanted %s '%s'", steps[i].value, verdict_name(got),
                     note, verdict_name(steps[i].verdict), steps[i].phrase);
    }
}
#define EXPECT_METRIC_STEPS(r, metric, ...)                                                 \
    expect_metric_steps(&rule, &(r), &(metric), (const metric_step_t[]){__VA_ARGS__},       \
                        sizeof((const metric_step_t[]){__VA_ARGS__}) / sizeof(metric_step_t))

static void test_apply(void **state)
{
    (void)state;
    policy_rule_t rule = full_rule();
    result_t r = clean_row();
    EXPECT(r, VERDICT_PASS, "rel_fro 0.002 <= 0.0035 (test.yaml:7)");

    /* rel_fro: over, at, and over with a magnitude far from 1 */
    r = clean_row();
    EXPECT_METRIC_STEPS(r, r.metrics.rel_fro,
                        {0.0041, VERDICT_WRONG, "rel_fro 0.0041 > 0.0035"},
                        {0.0035, VERDICT_PASS, "rel_fro 0.0035 <= 0.0035"});
    r.metrics.rel_fro = 0.9;
    r.metrics.mag_ratio = 2.5;
    EXPECT(r, VERDICT_MAGNITUDE, "rel_fro 0.9 > 0.0035 and |out|/|ref| = 2.5");
    r.metrics.mag_ratio = 0.3;
    EXPECT(r, VERDICT_MAGNITUDE, "|out|/|ref| = 0.3");
    r.metrics.mag_ratio = 1.9;
    EXPECT(r, VERDICT_WRONG, "rel_fro 0.9 > 0.0035");
    r = clean_row();
    r.metrics.rel_fro = NAN; /* e.g. a zero reference with a non-zero output */
    EXPECT(r, VERDICT_WRONG, "the reference is exactly zero, the output is not: relative error undefined");
    r.metrics.max_abs = 0.0; /* zero against zero is exact */
    EXPECT(r, VERDICT_PASS, "the reference is exactly zero and so is the output");

    /* worst_row_rel */
    r = clean_row();
    r.metrics.worst_row = 12;
    EXPECT_METRIC_STEPS(r, r.metrics.worst_row_rel,
                        {0.0081, VERDICT_WRONG, "worst_row_rel 0.0081 > 0.006"},
                        {INFINITY, VERDICT_WRONG, "worst_row_rel inf > 0.006"},
                        {0.006, VERDICT_PASS, "<="},
                        {NAN, VERDICT_PASS, "<="}); /* NaN: every row skipped, nothing to judge */
    r.metrics.worst_row_rel = 0.5;
    r.metrics.mag_ratio = 3.0;
    r.metrics.rel_fro = 0.003;
    EXPECT(r, VERDICT_MAGNITUDE, "worst_row_rel 0.5 > 0.006");

    /* max_ulp */
    r = clean_row();
    r.ulp.max_ulp = 3;
    EXPECT(r, VERDICT_WRONG, "max_ulp 3 > 2");
    r.ulp.max_ulp = 2;
    EXPECT(r, VERDICT_PASS, "<=");

    /* identical fraction */
    r = clean_row();
    EXPECT_METRIC_STEPS(r, r.ulp.identical_frac,
                        {0.95, VERDICT_WRONG, "identical 0.95 < 0.97"},
                        {0.97, VERDICT_PASS, "<="},
                        {NAN, VERDICT_PASS, "<="}); /* NaN: nothing compared */

    /* non-finite outputs from finite input */
    r = clean_row();
    r.metrics.out_nf.nan = 2;
    r.metrics.out_nf.pos_inf = 1;
    EXPECT(r, VERDICT_NONFINITE_OUT, "3 non-finite outputs (2 NaN, 1 +Inf, 0 -Inf)");
    r.metrics.ref_nf.nan = 3; /* the reference overflows as much: not the kernel's fault */
    EXPECT(r, VERDICT_PASS, "<=");
    r.metrics.ref_nf.nan = 0;
    rule.nonfinite = POLICY_NONFINITE_ALLOW;
    EXPECT(r, VERDICT_PASS, "<=");
    rule.nonfinite = POLICY_NONFINITE_FORBID;
    r.metrics.finite_count = 0;
    r.metrics.out_nf.nan = 1000;
    r.metrics.out_nf.pos_inf = 0;
    r.metrics.rel_fro = NAN;
    EXPECT(r, VERDICT_NONFINITE_OUT, "1000 non-finite outputs");
    rule.nonfinite = POLICY_NONFINITE_ALLOW;
    EXPECT(r, VERDICT_WRONG, "no finite element");
    rule.nonfinite = POLICY_NONFINITE_FORBID;

    /* non-finite input no longer decides the row: NaN outputs outside the
     * rows judged apart fail it; inside them they are reported */
    r = clean_row();
    r.input_nf.nan = 5;
    r.metrics.out_nf.nan = 40;
    EXPECT(r, VERDICT_NONFINITE_OUT, "40 non-finite outputs");
    r.metrics.rows_apart = 1;
    r.metrics.out_nf_apart.nan = 40;
    EXPECT(r, VERDICT_POISONED_INPUT, "1 of ");

    /* rounding bias (R_exact): 20 differing elements all toward zero are
     * z 4.5 (under 8); 900 of 920 are z 29, lean 0.96: biased.  A fair
     * 460 / 440 split is z 0.66 and passes. */
    r = clean_row();
    r.ulp.toward_zero = 20;
    EXPECT(r, VERDICT_PASS, "rel_fro 0.002 <= 0.0035");
    r.ulp.toward_zero = 900;
    r.ulp.away_zero = 20;
    r.ulp.signed_ulp_sum = -880;
    EXPECT(r, VERDICT_WRONG, "biased rounding: 900 of 920 differing outputs toward zero (z 29.0 > 8, lean 0.957 > 0.25), mean signed ULP -0.880");
    snprintf(r.reference, sizeof r.reference, "R_source"); /* quantization noise: not judged for bias */
    EXPECT(r, VERDICT_PASS, "rel_fro 0.002");
    snprintf(r.reference, sizeof r.reference, "R_exact");
    r.ulp.toward_zero = 460;
    r.ulp.away_zero = 440;
    EXPECT(r, VERDICT_PASS, "rel_fro 0.002 <= 0.0035");

    /* verdicts that are not about metrics stand */
    r = clean_row();
    r.verdict = VERDICT_UNSUPPORTED;
    snprintf(r.note, sizeof r.note, "K=48 is not a multiple of 64");
    r.metrics.rel_fro = 1.0;
    EXPECT(r, VERDICT_UNSUPPORTED, "K=48 is not a multiple of 64");
    r.verdict = VERDICT_NONDETERMINISTIC;
    EXPECT(r, VERDICT_NONDETERMINISTIC, "K=48");

    /* unset optional thresholds are not checked */
    policy_rule_t only_rel = full_rule();
    only_rel.worst_row_rel = NAN;
    only_rel.max_ulp = -1;
    only_rel.identical_min = NAN;
    r = clean_row();
    r.metrics.worst_row_rel = 10;
    r.ulp.max_ulp = 60000;
    r.ulp.identical_frac = 0;
    char note[64];
    assert_int_equal(policy_apply(&only_rel, &r, note, sizeof note), VERDICT_PASS);
    /* a short note buffer is cut, never overrun; a NULL one is allowed */
    char tiny[8];
    memset(tiny, 'z', sizeof tiny);
    r.metrics.rel_fro = 0.5;
    assert_int_equal(policy_apply(&only_rel, &r, tiny, 4), VERDICT_WRONG);
    assert_int_equal(strlen(tiny), 3);
    assert_int_equal(tiny[4], 'z');
    assert_int_equal(policy_apply(&only_rel, &r, NULL, 0), VERDICT_WRONG);
}

static const test_bad_yaml_t bad_policies[] = {
    {"policy: p\nrules:\n  - kernel: \"w4a8.*\"\n    rel_frob: 0.1\n", 4, "unknown key 'rel_frob' in rules[0]"},
    {"policy: p\nrulez: []\n", 2, "unknown key 'rulez' in the policy"},
    {"policy: p\nrules:\n  - kernel: \"w4a8.*\"\n    band: decode\n", 3, "rules[0]: missing required key 'rel_fro'"},
    {"policy: p\nrules:\n  - rel_fro: 0.1\n  - rel_fro: abc\n", 4, "rules[1].rel_fro: expected a number, got 'abc'"},
    {"policy: p\nrules:\n  - rel_fro: -0.1\n", 3, "rules[0].rel_fro: expected a number in [0, inf]"},
    {"policy: p\nrules:\n  - rel_fro: \"0.1\"\n", 3, "expected a number, got the quoted string"},
    {"policy: p\nrules:\n  - rel_fro: 0.1\n    identical_min: 1.5\n", 4, "identical_min: expected a number in [0, 1]"},
    {"policy: p\nrules:\n  - rel_fro: 0.1\n    max_ulp: 2.5\n", 4, "max_ulp: expected an integer, got '2.5'"},
    {"policy: p\nrules:\n  - rel_fro: 0.1\n    nonfinite: maybe\n", 4, "nonfinite: expected forbid or allow, got 'maybe'"},
    {"policy: p\nrules:\n  - rel_fro: 0.1\n\n    kernel: \"w4a9.*\"\n", 5, "rules[0].kernel: 'w4a9.*' matches no kernel"},
    {"policy: p\nrules:\n  - rel_fro: 0.1\n    reference: R_exakt\n", 4, "'R_exakt' matches no reference"},
    {"policy: p\nrules:\n  - rel_fro: 0.1\n    band: decoder\n", 4, "'decoder' matches no band"},
    {"policy: p\nmargin: 0.5\nrules: []\n", 2, "margin: expected a number in [1, 1000], got '0.5'"},
    {"policy: p\nmargin: two\nrules: []\n", 2, "margin: expected a number, got 'two'"},
    {"margin: 2\nrules: []\n", 1, "missing required key 'policy'"},
    {"policy: p\nmargin: 2\n", 1, "missing required key 'rules'"},
    {"policy: p\nrules: {}\n", 2, "rules: expected a list, got a mapping"},
    {"policy: p\nrules:\n  - 0.1\n", 3, "rules[0]: expected a mapping, got '0.1'"},
    {"policy: p\nrules:\n  - rel_fro: 0.1\n    rel_fro: 0.2\n", 4, "duplicate key 'rel_fro'"},
    {"policy: p\nrules:\n  - rel_fro: 0.1\n   kernel: x\n", 4, "YAML syntax error"},
    {"policy: p\nrules: [\n", 3, "YAML syntax error"},
    {"", 1, "empty file"},
};

static void test_bad_policies(void **state)
{
    (void)state;
    char path[1024];
    for (size_t i = 0; i < sizeof bad_policies / sizeof bad_policies[0]; i++) {
        policy_t p;
        kr_error_t err = {{0}};
        int rc;
        load_text(bad_policies[i].yaml, path, sizeof path, &p, &err, &rc);
        test_expect_load_error("policy", i, &bad_policies[i], path, rc, err.msg);
        assert_null(p.rules);
        assert_null(p.name);
    }
    /* deep nesting and alias cycles are refused, not followed */
    const size_t depth = 100000;
    char *deep = malloc(2 * depth + 64);
    assert_non_null(deep);
    int o = sprintf(deep, "policy: p\nrules: ");
    memset(deep + o, '{', depth);
    policy_t p;
    kr_error_t err;
    assert_int_equal(policy_load_bytes("deep.yaml", deep, (size_t)o + depth, &p, &err), -1);
    assert_non_null(strstr(err.msg, "deep.yaml:2: nested more than"));
    free(deep);
    const char cyc[] = "policy: p\nrules: &r [*r]\n";
    assert_int_equal(policy_load_bytes("cyc.yaml", cyc, sizeof cyc - 1, &p, &err), -1);
    assert_non_null(strstr(err.msg, "cyc.yaml:2: rules[0]: expected a mapping, got a list"));
}

static void test_derived(void **state)
{
    (void)state;
    const kernel_desc_t *w4a8 = kernel_find("w4a8.perblock"), *w4a4 = kernel_find("w4a4.aiter");
    assert_non_null(w4a8);
    assert_non_null(w4a4);
    /* the formats' explicit mantissa bits, read from the descriptors' typed formats */
    assert_int_equal(w4a8->act.elem, ELEM_E4M3FN);
    assert_int_equal(w4a8->act.mantissa_bits, 3);
    assert_int_equal(w4a4->act.elem, ELEM_E2M1);
    assert_int_equal(w4a4->act.mantissa_bits, 1);

    /* the formula: u(out) + K u(acc) [+ u(act)], u(m) = 2^-(m+1) */
    assert_true(policy_derived_rel(7, 23, -1, 5120) == 0x1p-8 + 5120 * 0x1p-24);
    assert_true(policy_derived_rel(7, 23, 3, 5120) == 0x1p-8 + 5120 * 0x1p-24 + 0x1p-4);
    assert_true(policy_derived_rel(7, 23, 1, 1) == 0x1p-8 + 0x1p-24 + 0x1p-2);

    const int64_t Ks[] = {32, 256, 2048, 3072, 5120, 8704, 65536};
    double prev[2][2] = {{0, 0}, {0, 0}};
    for (size_t i = 0; i < sizeof Ks / sizeof Ks[0]; i++) {
        policy_rule_t e8, s8, e4, s4;
        assert_int_equal(policy_derived_rule(w4a8, "R_exact", Ks[i], &e8), 0);
        assert_int_equal(policy_derived_rule(w4a8, "R_source", Ks[i], &s8), 0);
        assert_int_equal(policy_derived_rule(w4a4, "R_exact", Ks[i], &e4), 0);
        assert_int_equal(policy_derived_rule(w4a4, "R_source", Ks[i], &s4), 0);
        /* grows with K */
        assert_true(e8.rel_fro > prev[0][0] && s8.rel_fro > prev[0][1]);
        assert_true(e4.rel_fro > prev[1][0] && s4.rel_fro > prev[1][1]);
        prev[0][0] = e8.rel_fro;
        prev[0][1] = s8.rel_fro;
        prev[1][0] = e4.rel_fro;
        prev[1][1] = s4.rel_fro;
        /* R_source adds the activations' quantization error */
        assert_true(s8.rel_fro > e8.rel_fro);
        assert_true(s4.rel_fro > e4.rel_fro);
        assert_true(fabs(s8.rel_fro - e8.rel_fro - 0x1p-4) < 1e-15);
        assert_true(fabs(s4.rel_fro - e4.rel_fro - 0x1p-2) < 1e-15);
        /* W4A4 (e2m1 activations) is looser than W4A8 (e4m3) against the source;
         * against its own operands both see the same bf16 output and fp32 sum */
        assert_true(s4.rel_fro > s8.rel_fro);
        assert_true(e4.rel_fro >= e8.rel_fro);
        /* derived rules judge rel_fro and non-finite outputs only */
        assert_true(isnan(e8.worst_row_rel));
        assert_int_equal(e8.max_ulp, -1);
        assert_true(isnan(e8.identical_min));
        assert_int_equal(e8.nonfinite, POLICY_NONFINITE_FORBID);
        assert_int_equal(e8.line, 0);
        assert_string_equal(e8.kernel, "w4a8.perblock");
        assert_string_equal(e8.band, "*");
        assert_non_null(strstr(s8.origin, "derived"));
        assert_non_null(strstr(s8.origin, "2^-4"));
    }

    /* the other references */
    policy_rule_t r;
    assert_int_equal(policy_derived_rule(w4a8, "out_rerun", 5120, &r), 0);
    assert_true(r.rel_fro == 0.0);
    assert_true(r.identical_min == 1.0);
    assert_int_equal(policy_derived_rule(w4a8, "model:w4a8.folded", 5120, &r), 0);
    assert_true(r.rel_fro == 0x1p-8 + 5120 * 0x1p-24);
    for (int i = 0; i < kernel_count(); i++) {
        const kernel_desc_t *k = kernel_at(i);
        if (k->op != KERNEL_OP_QUANT)
            continue;
        assert_int_equal(policy_derived_rule(k, "x", 5120, &r), 0);
        /* e4m3fn codes: 3 mantissa bits; e2m1: 1 (formats.h's definitions) */
        const int m = k->act.elem == ELEM_E4M3FN ? 3 : k->act.elem == ELEM_E2M1 ? 1 : -1;
        assert_true(m == 1 || m == 3);
        assert_true(r.rel_fro == ldexp(1.0, -(m + 1)));
    }
    assert_int_equal(policy_derived_rule(w4a8, "R_nothing", 5120, &r), -1);
    assert_int_equal(policy_derived_rule(w4a8, "R_exact", 0, &r), -1);
    assert_int_equal(policy_derived_rule(NULL, "R_exact", 64, &r), -1);

    /* recorded outputs derive from the kernel the replay compares them as */
    policy_rule_t a, b;
    assert_int_equal(policy_rule_for(NULL, "recorded.aiter", "R_source", "decode", 5120, &a), 0);
    assert_int_equal(policy_derived_rule(w4a4, "R_source", 5120, &b), 0);
    assert_true(a.rel_fro == b.rel_fro);
    assert_string_equal(a.kernel, "recorded.aiter");
    assert_int_equal(policy_rule_for(NULL, "recorded.out", "R_source", "decode", 5120, &a), 0);
    assert_int_equal(policy_derived_rule(w4a8, "R_source", 5120, &b), 0);
    assert_true(a.rel_fro == b.rel_fro);
    assert_int_equal(policy_rule_for(NULL, "no.such.kernel", "R_exact", "decode", 5120, &a), -1);

    /* a derived rule judges rows: bf16 rounding passes, a 1% error does not */
    assert_int_equal(policy_derived_rule(w4a8, "R_exact", 5120, &r), 0);
    result_t row = clean_row();
    char note[256];
    assert_int_equal(policy_apply(&r, &row, note, sizeof note), VERDICT_PASS);
    assert_non_null(strstr(note, "derived"));
    row.metrics.rel_fro = 0.01;
    assert_int_equal(policy_apply(&r, &row, note, sizeof note), VERDICT_WRONG);
    assert_non_null(strstr(note, "rel_fro 0.01 > 0.00421"));
}

KR_TEST_MAIN(test_load_and_match, test_default_policy, test_apply, test_bad_policies, test_derived);
