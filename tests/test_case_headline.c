/* The case headline (reports/case_headline.h): one line per case saying
 * which party is at fault, the verdict and the diagnosis that explains it.
 *  - every rule of the decision table on rows built here by hand, each with
 *    the party, the rule, the row it cites and what it must say; a row whose
 *    diagnosis blames another party than the verdicts is named as not
 *    trusted; the poisoned block is added whenever a row holds one;
 *  - the bad-case dumps of tests/fixtures/pt/diag through `kreplay replay`:
 *    the WPERM dump as dumped (weight in fragment order, unmarked) and after
 *    `import --weight-order fragment` both say the reference is at fault (the
 *    serve's reference read the weight without WPERM) in the first line of
 *    the output, before the table, and in --json's "cases"; the scale fault
 *    blames the kernel, the race calls it not deterministic, the NaN head
 *    names its block, the clean dump has no party at fault. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "case_headline.h"
#include "kr_string.h"
#include "test_main.h"
#include "test_support.h"

#define DIAG KREPLAY_SOURCE_DIR "/tests/fixtures/pt/diag"

/* ------------------------------------------------------------ by hand */

static result_t *add(result_list_t *l, const char *kernel, const char *ref, verdict_t v, double rel, double thr)
{
    result_t *r = result_list_add(l);
    assert_non_null(r);
    kr_strlcpy(r->case_path, "cases/c1.h5", sizeof r->case_path);
    kr_strlcpy(r->case_name, "c1", sizeof r->case_name);
    r->M = 8;
    r->N = 64;
    r->K = 256;
    kr_strlcpy(r->band, "decode", sizeof r->band);
    kr_strlcpy(r->kernel, kernel, sizeof r->kernel);
    kr_strlcpy(r->reference, ref, sizeof r->reference);
    r->verdict = v;
    r->metrics.rel_fro = rel;
    r->threshold = thr;
    r->metrics.count = strcmp(ref, "-") ? 512 : 0;
    r->ulp.count = r->metrics.count;
    r->ulp.identical = r->metrics.count;
    snprintf(r->note, sizeof r->note, "rel_fro %.4g %s %.4g (policy)", rel, rel > thr ? ">" : "<=", thr);
    return r;
}

static void diagnosed(result_t *r, const char *party, const char *line)
{
    kr_strlcpy(r->diag_party, party, sizeof r->diag_party);
    kr_strlcpy(r->diagnosis, line, sizeof r->diagnosis);
}

/* The one headline of l (all rows one case). */
static case_headline_t headline(const result_list_t *l)
{
    case_headline_t *h = NULL;
    assert_int_equal(case_headlines(l, &h), 1);
    case_headline_t out = h[0];
    free(h);
    return out;
}

static void expect(const result_list_t *l, const char *rule, party_t party, const char *cited_kernel,
                   const char *const *must_say)
{
    const case_headline_t h = headline(l);
    print_message("%s\n", h.line);
    assert_string_equal(h.rule, rule);
    assert_int_equal(h.party, party);
    if (cited_kernel) {
        assert_true(h.row >= 0);
        assert_string_equal(l->rows[h.row].kernel, cited_kernel);
    }
    assert_int_equal(strncmp(h.line, "c1: ", 4), 0);
    assert_null(strchr(h.line, '\n'));
    for (int i = 0; must_say && must_say[i]; i++)
        if (!strstr(h.line, must_say[i]))
            fail_msg("headline lacks \"%s\": %s", must_say[i], h.line);
}

/* The rows of a clean dump: kreplay's models and the recorded outputs pass. */
static void clean_rows(result_list_t *l)
{
    add(l, "w4a8.folded", "R_exact", VERDICT_PASS, 0.0016, 0.005);
    add(l, "w4a8.folded", "R_source", VERDICT_PASS, 0.025, 0.07);
    add(l, "bf16.skinny", "-", VERDICT_UNSUPPORTED, NAN, NAN);
}

static void test_rule_pass(void **state)
{
    result_list_t *l = *state;
    const char *say[] = {"no party at fault (PASS)", "all 2 compared rows pass", NULL};
    expect(l, "pass", PARTY_NONE, NULL, say);
    assert_int_equal(headline(l).verdict, VERDICT_PASS);
}

static void test_rule_harness_error(void **state)
{
    result_list_t *l = *state;
    result_t *e = add(l, "w4a4.aiter", "-", VERDICT_ERROR, NAN, NAN);
    kr_strlcpy(e->note, "out of memory for the reference", sizeof e->note);
    add(l, "w4a8.decode", "R_exact", VERDICT_WRONG, 0.5, 0.005);
    const char *say[] = {"no party at fault", "w4a4.aiter ERROR", "out of memory for the reference", NULL};
    expect(l, "harness-error", PARTY_NONE, "w4a4.aiter", say);
    assert_int_equal(headline(l).verdict, VERDICT_ERROR);
}

static void test_rule_reference_wrong(void **state)
{
    result_list_t *l = *state;
    add(l, "recorded.out", "R_exact", VERDICT_PASS, 0.0017, 0.0039);
    result_t *ref = add(l, "recorded.ref", "R_exact", VERDICT_WRONG, 1.54, 0.0039);
    /* the reference's own diagnosis claims the case is mislabelled */
    diagnosed(ref, "input", "matches R_exact on permute_w(W): the case's weight is mislabelled");
    const char *say[] = {"reference at fault", "recorded.ref WRONG against R_exact (rel_fro 1.54 > 0.0039)",
                         "recorded reference is wrong, not the kernel",
                         "recorded.out matches R_exact, rel_fro 0.0017 <= 0.0039",
                         "the reference's diagnosis: matches R_exact on permute_w(W)",
                         "its diagnosis blames the input; not trusted",
                         "matches R_exact built from the case as labelled, so the labels are right", NULL};
    expect(l, "reference-wrong", PARTY_REFERENCE, "recorded.ref", say);
    const case_headline_t h = headline(l);
    assert_true(h.contradicted);
    assert_string_equal(l->rows[h.evidence].kernel, "recorded.out");
    assert_int_equal(h.verdict, VERDICT_WRONG);
}

static void test_rule_reference_shared(void **state)
{
    result_list_t *l = *state;
    result_t *o = add(l, "recorded.out", "R_exact", VERDICT_WRONG, 1.45, 0.0039);
    diagnosed(o, "input", "matches R_exact with WPERM undone: the weight is in fragment order, unmarked");
    result_t *o2 = add(l, "recorded.out", "R_source", VERDICT_WRONG, 1.45, 0.066);
    diagnosed(o2, "input", "matches R_source with WPERM undone");
    add(l, "recorded.ref", "R_exact", VERDICT_PASS, 0.0, 0.0039);
    const char *say[] = {"reference at fault", "recorded.out WRONG against R_exact",
                         "because the case's reference is wrong",
                         "the serve's reference read the operands as the case labels them",
                         "recorded.ref matches R_exact, rel_fro 0 <= 0.0039", "the kernel did not",
                         "the kernel's diagnosis: matches R_exact with WPERM undone", "(2 failing rows in all)",
                         NULL};
    expect(l, "reference-shared", PARTY_REFERENCE, "recorded.out", say);
    /* the input's misreading is the rule's evidence, not a contradiction */
    assert_false(headline(l).contradicted);
    assert_null(strstr(headline(l).line, "not trusted"));
}

static void test_rule_input_labels(void **state)
{
    result_list_t *l = *state;
    result_t *o = add(l, "recorded.out", "R_exact", VERDICT_WRONG, 1.45, 0.0039);
    diagnosed(o, "input", "matches R_exact with the scales read as [N, K/32]");
    /* no recorded reference: nothing says the serve's reference shared it */
    const char *say[] = {"input at fault", "because of the case's input, not the kernel",
                         "diagnosis: matches R_exact with the scales read as", NULL};
    expect(l, "input-labels", PARTY_INPUT, "recorded.out", say);
}

static void test_rule_reference_diag(void **state)
{
    result_list_t *l = *state;
    result_t *o = add(l, "recorded.out", "R_exact", VERDICT_WRONG, 0.2, 0.0039);
    diagnosed(o, "reference", "activations were quantized with 'traced', not 'vllm'");
    const char *say[] = {"reference at fault", "built from other operands than the kernel's output",
                         "quantized with 'traced'", NULL};
    expect(l, "reference-diag", PARTY_REFERENCE, "recorded.out", say);
}

static void test_rule_kernel_rerun(void **state)
{
    result_list_t *l = *state;
    result_t *r = add(l, "recorded.out", "out_rerun", VERDICT_NONDETERMINISTIC, 0.018, 0.0);
    r->ulp.identical = 509;
    result_t *k = add(l, "recorded.out_rerun", "R_exact", VERDICT_WRONG, 0.018, 0.0039);
    diagnosed(k, "kernel", "3 isolated elements are wrong");
    const char *say[] = {"kernel at fault", "recorded.out NONDETERMINISTIC (3 of 512 elements differ between runs)",
                         "the kernel is not deterministic", "recorded.out_rerun WRONG against R_exact",
                         "diagnosis: 3 isolated elements are wrong", NULL};
    expect(l, "kernel-rerun", PARTY_KERNEL, "recorded.out", say);
}

static void test_rule_kernel(void **state)
{
    result_list_t *l = *state;
    /* two failing rows: the R_exact one with a diagnosis is cited */
    add(l, "w4a8.decode", "R_source", VERDICT_WRONG, 0.9, 0.07);
    result_t *k = add(l, "w4a8.decode", "R_exact", VERDICT_MAGNITUDE, 0.63, 0.005);
    diagnosed(k, "kernel", "|out| is 1/2.7 of R_exact");
    /* a WRONG row under its rel_fro threshold: the judgement's clause says why */
    result_t *w = add(l, "w4a8.perblock", "R_exact", VERDICT_WRONG, 0.004, 0.005);
    snprintf(w->note, sizeof w->note, "worst_row_rel 0.3543 > 0.09313 (row 7) (policy default)");
    add(l, "recorded.ref", "R_exact", VERDICT_PASS, 0.0, 0.0039);
    const char *say[] = {"kernel at fault", "w4a8.decode MAGNITUDE against R_exact (rel_fro 0.63 > 0.005)",
                         "diagnosis: |out| is 1/2.7 of R_exact", "the serve's reference agrees with kreplay's",
                         "(3 failing rows in all)", NULL};
    expect(l, "kernel", PARTY_KERNEL, "w4a8.decode", say);
    /* the row under its threshold alone */
    result_list_t one = {0};
    clean_rows(&one);
    result_t *w1 = add(&one, "w4a8.perblock", "R_exact", VERDICT_WRONG, 0.004, 0.005);
    snprintf(w1->note, sizeof w1->note, "worst_row_rel 0.3543 > 0.09313 (row 7) (policy default)");
    const char *say1[] = {"w4a8.perblock WRONG against R_exact (worst_row_rel 0.3543 > 0.09313)", NULL};
    expect(&one, "kernel", PARTY_KERNEL, "w4a8.perblock", say1);
    result_list_free(&one);
}

static void test_rule_kernel_regressed(void **state)
{
    result_list_t *l = *state;
    result_t *g = add(l, "w4a8.folded", "R_exact", VERDICT_REGRESSED, 0.0016, 0.005);
    kr_strlcpy(g->regressed_metric, "identical_frac", sizeof g->regressed_metric);
    g->regressed_base = 0.934;
    g->regressed_run = 0.924;
    const char *say[] = {"kernel at fault", "w4a8.folded REGRESSED against R_exact "
                                            "(identical_frac 0.934 -> 0.924 since the baseline)", NULL};
    expect(l, "kernel", PARTY_KERNEL, "w4a8.folded", say);
}

static void test_rule_reference_alone(void **state)
{
    result_list_t *l = *state;
    /* only the reference output was compared, and it fails: no kernel rows */
    l->count = 0;
    add(l, "recorded.ref", "R_exact", VERDICT_WRONG, 1.5, 0.0039);
    add(l, "bf16.skinny", "-", VERDICT_UNSUPPORTED, NAN, NAN);
    const char *say[] = {"reference at fault", "the case's recorded reference disagrees with R_exact", NULL};
    expect(l, "reference-alone", PARTY_REFERENCE, "recorded.ref", say);
}

static void test_rule_input_poisoned(void **state)
{
    result_list_t *l = *state;
    for (int64_t i = 0; i < l->count; i++)
        if (strcmp(l->rows[i].reference, "-")) {
            l->rows[i].verdict = VERDICT_POISONED_INPUT;
            kr_strlcpy(l->rows[i].poison_where, "x: rows 0-16 x columns 1024-1151 (17 x 128 = 2176 NaN)",
                       sizeof l->rows[i].poison_where);
        }
    const char *say[] = {"input at fault (POISONED_INPUT)", "x holds non-finite values",
                         "poisoned input: x: rows 0-16 x columns 1024-1151 (17 x 128 = 2176 NaN)", NULL};
    expect(l, "input-poisoned", PARTY_INPUT, NULL, say);
    assert_int_equal(headline(l).verdict, VERDICT_POISONED_INPUT);
    /* a kernel failing on the finite rows of a poisoned case: the kernel, with the block */
    result_t *k = add(l, "w4a4.aiter", "R_exact", VERDICT_WRONG, 0.0016, 0.005);
    diagnosed(k, "kernel", "rows 0-4: the operands give NaN, the kernel wrote finite values there");
    const char *say2[] = {"kernel at fault", "w4a4.aiter WRONG", "poisoned input: x: rows 0-16", NULL};
    expect(l, "kernel", PARTY_KERNEL, "w4a4.aiter", say2);
}

static void test_rule_unsupported(void **state)
{
    result_list_t *l = *state;
    l->count = 0;
    result_t *u = add(l, "bf16.skinny", "-", VERDICT_UNSUPPORTED, NAN, NAN);
    kr_strlcpy(u->note, "the case has no bf16 weight", sizeof u->note);
    const char *say[] = {"no party at fault (UNSUPPORTED)", "no kernel could compare an output",
                         "the case has no bf16 weight", NULL};
    expect(l, "unsupported", PARTY_NONE, NULL, say);
}

/* Two cases in one list: a headline each, in the order of their first rows,
 * and the JSON form carries the same. */
static void test_two_cases_and_json(void **state)
{
    result_list_t *l = *state;
    l->count = 0;
    add(l, "w4a8.folded", "R_exact", VERDICT_WRONG, 0.5, 0.005);
    result_t *b = add(l, "w4a8.folded", "R_exact", VERDICT_PASS, 0.001, 0.005);
    kr_strlcpy(b->case_path, "cases/a0.h5", sizeof b->case_path);
    kr_strlcpy(b->case_name, "a0", sizeof b->case_name);
    case_headline_t *h = NULL;
    assert_int_equal(case_headlines(l, &h), 2);
    assert_int_equal(strncmp(h[0].line, "c1: kernel at fault", 19), 0);
    assert_int_equal(strncmp(h[1].line, "a0: no party at fault (PASS)", 28), 0);
    free(h);
    json_t *arr = case_headlines_json(l);
    assert_int_equal(json_array_size(arr), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(arr, 0), "party")), "kernel");
    assert_string_equal(json_string_value(json_object_get(json_array_get(arr, 0), "verdict")), "WRONG");
    assert_string_equal(json_string_value(json_object_get(json_array_get(arr, 1), "party")), "none");
    assert_string_equal(json_string_value(json_object_get(json_array_get(arr, 1), "rule")), "pass");
    json_decref(arr);
}

/* ------------------------------------------------ the diagnosis fixtures */

/* The first line (the headline) of `kreplay replay TARGET` at a width that
 * keeps it on one line, and its exit code (want_rc). */
static void first_line(const char *target, int want_rc, char *first, size_t cap)
{
    char cmd[2048], *out = NULL;
    snprintf(cmd, sizeof cmd, "COLUMNS=1000 '" KREPLAY_BINARY "' replay '%s' 2>&1", target);
    const int st = test_shell(cmd, &out);
    if (test_exit_code(st) != want_rc)
        fail_msg("%s: exit %d, wanted %d:\n%s", cmd, test_exit_code(st), want_rc, out);
    snprintf(first, cap, "%.*s", (int)strcspn(out, "\n"), out);
    /* the headline comes before the table */
    assert_non_null(strstr(out, "\ncase "));
    assert_true(strstr(out, first) < strstr(out, "\ncase "));
    free(out);
    print_message("%s\n", first);
}

static void must(const char *text, const char *what)
{
    if (!strstr(text, what))
        fail_msg("\"%s\" not in:\n%s", what, text);
}

/* The JSON "cases" entry of the only case, from `replay --json`. */
static void json_case(const char *target, const char *party, const char *rule)
{
    char cmd[2048], *out = NULL;
    snprintf(cmd, sizeof cmd, "replay --json '%s' 2>/dev/null", target);
    test_run_kreplay(cmd, &out);
    json_error_t jerr;
    json_t *root = json_loads(out ? out : "", 0, &jerr);
    if (!root)
        fail_msg("replay --json %s: not JSON (%s)", target, jerr.text);
    json_t *cases = json_object_get(root, "cases");
    assert_int_equal(json_array_size(cases), 1);
    json_t *c = json_array_get(cases, 0);
    assert_string_equal(json_string_value(json_object_get(c, "party")), party);
    assert_string_equal(json_string_value(json_object_get(c, "rule")), rule);
    assert_non_null(strstr(json_string_value(json_object_get(c, "headline")), "at fault"));
    json_decref(root);
    free(out);
}

static void test_wperm_fixture_both_ways(void **state)
{
    (void)state;
    char first[4096], dir[1024], h5[1200], cmd[4096];
    /* as dumped: the weight in fragment order, the case not saying so */
    first_line(DIAG "/wperm.pt", 1, first, sizeof first);
    must(first, "wperm: reference at fault: recorded.out WRONG against R_exact");
    must(first, "because the case's reference is wrong: the serve's reference read the operands as the case "
                "labels them (recorded.ref matches R_exact");
    must(first, "WPERM undone");
    json_case(DIAG "/wperm.pt", "reference", "reference-shared");

    /* imported as fragment order: now the recorded reference fails alone */
    assert_int_equal(test_tmp_dir(dir, sizeof dir, "headline"), 0);
    snprintf(h5, sizeof h5, "%s/wperm_frag.h5", dir);
    snprintf(cmd, sizeof cmd, "import '" DIAG "/wperm.pt' -o '%s' --weight-order fragment >/dev/null 2>&1", h5);
    char *out = NULL;
    assert_int_equal(test_run_kreplay(cmd, &out), 0);
    free(out);
    first_line(h5, 1, first, sizeof first);
    must(first, "wperm_frag: reference at fault: recorded.ref WRONG against R_exact");
    must(first, "the case's recorded reference is wrong, not the kernel (recorded.out matches R_exact");
    /* its diagnosis blames the case's labels: shown, and why it is not trusted */
    must(first, "its diagnosis blames the input; not trusted: the kernel's output matches R_exact built from the "
                "case as labelled");
    json_case(h5, "reference", "reference-wrong");
}

static void test_other_fixtures(void **state)
{
    (void)state;
    static const struct {
        const char *file, *party_line, *also, *party, *rule;
        int rc;
    } cases[] = {
        {"scale_const", "scale_const: kernel at fault: recorded.out MAGNITUDE against R_exact", "1/2.7 of R_exact",
         "kernel", "kernel", 1},
        {"race", "race: kernel at fault: recorded.out NONDETERMINISTIC", "the kernel is not deterministic", "kernel",
         "kernel-rerun", 1},
        {"nan_head", "nan_head: kernel at fault: w4a4.aiter WRONG against R_exact",
         "poisoned input: x: rows 0-4 x columns 128-255 (5 x 128 = 640 NaN)", "kernel", "kernel", 1},
        {"clean", "clean: no party at fault (PASS)", "compared rows pass", "none", "pass", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[512], first[4096];
        snprintf(path, sizeof path, DIAG "/%s.pt", cases[i].file);
        first_line(path, cases[i].rc, first, sizeof first);
        must(first, cases[i].party_line);
        must(first, cases[i].also);
        json_case(path, cases[i].party, cases[i].rule);
    }
}

/* Each rule's test starts from the rows of a clean dump (clean_rows). */
static int setup_rows(void **state)
{
    result_list_t *l = calloc(1, sizeof *l);
    if (!l)
        return -1;
    clean_rows(l);
    *state = l;
    return 0;
}

static int free_rows(void **state)
{
    result_list_free(*state);
    free(*state);
    return 0;
}

#define RULE_TEST(t) cmocka_unit_test_setup_teardown(t, setup_rows, free_rows)

int main(void)
{
    const struct CMUnitTest tests[] = {
        RULE_TEST(test_rule_pass),         RULE_TEST(test_rule_harness_error),   RULE_TEST(test_rule_reference_wrong),
        RULE_TEST(test_rule_reference_shared), RULE_TEST(test_rule_input_labels), RULE_TEST(test_rule_reference_diag),
        RULE_TEST(test_rule_kernel_rerun), RULE_TEST(test_rule_kernel),          RULE_TEST(test_rule_kernel_regressed),
        RULE_TEST(test_rule_reference_alone), RULE_TEST(test_rule_input_poisoned), RULE_TEST(test_rule_unsupported),
        RULE_TEST(test_two_cases_and_json), cmocka_unit_test(test_wperm_fixture_both_ways),
        cmocka_unit_test(test_other_fixtures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
