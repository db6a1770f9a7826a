/* The diagnosis fixtures (tests/fixtures/pt/diag, written by real torch with
 * scripts/fixtures/make_diag_fixtures.py): bad-case dumps in the MXFP4
 * dispatch's own torch.save layout, one per fault, each named by `kreplay
 * replay DUMP.pt` alone -- the recorded output's row against R_exact:
 *   scale_const  MAGNITUDE with the factor (0.37)
 *   wperm        WRONG, the weight's WPERM fragment order named
 *   race         out vs out_rerun NONDETERMINISTIC
 *   nan_head     POISONED_INPUT, the NaN block named, the finite rows judged (by
 *                the judgement's note; a passing poisoned row gets no diagnosis)
 *   clean        PASS with no diagnosis */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kreplay_checks.h"
#include "test_main.h"
#include "test_support.h"

static json_t *replay(const char *fixture)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' replay --json '%s/tests/fixtures/pt/diag/%s.pt' 2>/dev/null",
             KREPLAY_BINARY, KREPLAY_SOURCE_DIR, fixture);
    return test_command_json(cmd);
}

/* The row of `kernel` against `reference`; fails when there is none. */
static json_t *row_of(json_t *root, const char *kernel, const char *reference)
{
    json_t *rows = json_object_get(root, "results");
    for (size_t i = 0; i < json_array_size(rows); i++) {
        json_t *r = json_array_get(rows, i);
        if (strcmp(test_json_str(r, "kernel"), kernel) == 0 &&
            strcmp(test_json_str(r, "reference"), reference) == 0)
            return r;
    }
    print_error("no row %s vs %s\n", kernel, reference);
    fail();
    return NULL;
}

/* The replayed fixture's recorded.out row against `reference` (printed with
 * its verdict and note); *root holds the whole JSON (caller json_decref's). */
static json_t *fixture_row(const char *fixture, const char *reference, json_t **root)
{
    *root = replay(fixture);
    json_t *r = row_of(*root, "recorded.out", reference);
    printf("  %s: recorded.out vs %s: %s | %s | %s\n", fixture, reference,
           test_json_str(r, "verdict"), test_json_str(r, "note"), test_json_str(r, "diagnosis"));
    return r;
}

static void expect_row(const char *fixture, const char *reference, const char *verdict,
                       const char *phrase)
{
    json_t *root;
    json_t *r = fixture_row(fixture, reference, &root);
    const char *v = test_json_str(r, "verdict"), *diag = test_json_str(r, "diagnosis");
    assert_string_equal(v, verdict);
    if (phrase) {
        if (!strstr(diag, phrase)) {
            print_error("%s: diagnosis \"%s\" lacks \"%s\"\n", fixture, diag, phrase);
            fail();
        }
    } else {
        assert_string_equal(diag, "");
    }
    json_decref(root);
}

static void test_scale_const(void **state)
{
    (void)state;
    expect_row("scale_const", "R_exact", "MAGNITUDE", "least squares c = 0.370");
}

static void test_wperm(void **state)
{
    (void)state;
    expect_row("wperm", "R_exact", "WRONG",
               "matches R_exact with WPERM undone: the case's weight is in fragment order but not "
               "marked so");
}

static void test_race(void **state)
{
    (void)state;
    json_t *root;
    json_t *r = fixture_row("race", "out_rerun", &root);
    assert_string_equal(test_json_str(r, "verdict"), "NONDETERMINISTIC");
    /* out itself is right: the fault is the rerun's disagreement, not a wrong value. */
    assert_string_equal(test_json_str(row_of(root, "recorded.out", "R_exact"), "verdict"), "PASS");
    json_decref(root);
}

static void test_nan_head(void **state)
{
    (void)state;
    /* The judgement names the block and judges the finite rows; a poisoned
     * row that does not fail carries no diagnosis (nothing blames the kernel). */
    json_t *root;
    json_t *r = fixture_row("nan_head", "R_exact", &root);
    assert_string_equal(test_json_str(r, "verdict"), "POISONED_INPUT");
    assert_non_null(strstr(test_json_str(r, "note"),
                           "(x: rows 0-4 x columns 128-255 (5 x 128 = 640 NaN))"));
    assert_non_null(strstr(test_json_str(row_of(root, "recorded.out", "R_source"), "note"),
                           "the rows with finite inputs pass"));
    assert_string_equal(test_json_str(r, "diagnosis"), "");
    json_decref(root);
}

static void test_clean(void **state)
{
    (void)state;
    expect_row("clean", "R_exact", "PASS", NULL);
    json_t *root = replay("clean");
    json_t *rows = json_object_get(root, "results");
    for (size_t i = 0; i < json_array_size(rows); i++) {
        json_t *r = json_array_get(rows, i);
        if (strncmp(test_json_str(r, "kernel"), "recorded.", 9) == 0) {
            assert_string_equal(test_json_str(r, "verdict"), "PASS");
            assert_string_equal(test_json_str(r, "diagnosis"), "");
        }
    }
    json_decref(root);
}

KR_TEST_MAIN(test_scale_const, test_wperm, test_race, test_nan_head, test_clean);
