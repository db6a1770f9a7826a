/* ctest-labels: blas-bits */
/* kreplay compare and the shape catalogue. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shape_catalog.h"
#include "test_main.h"
#include "test_support.h"

static void test_catalogue(void **state)
{
    (void)state;
    shape_catalog_t cat;
    kr_error_t err;
    assert_int_equal(shape_catalog_load(KREPLAY_SOURCE_DIR "/cases/shapes.csv", &cat, &err), 0);
    shape_t s[64];
    /* The two N=5120 layers are told apart only by K. */
    assert_int_equal(shape_catalog_resolve(&cat, "mlp_down,gdn_out_proj", s, 64, &err), 2);
    assert_int_equal(s[0].N, 5120);
    assert_int_equal(s[0].K, 8704);
    assert_int_equal(s[1].K, 3072);
    /* A bare NxK in the catalogue keeps its name; one outside it is named NxK. */
    assert_int_equal(shape_catalog_resolve(&cat, "17408x5120,64x128", s, 64, &err), 2);
    assert_string_equal(s[0].name, "mlp_gate_up");
    assert_string_equal(s[1].name, "64x128");
    assert_int_equal(shape_catalog_resolve(&cat, "production", s, 64, &err), cat.count);
    assert_true(cat.count >= 8);
    assert_int_equal(shape_catalog_resolve(&cat, "no_such_layer", s, 64, &err), -1);
    assert_non_null(strstr(err.msg, "no_such_layer"));
    shape_catalog_free(&cat);

    char path[1024];
    test_tmp_path(path, sizeof path, "shapes.csv");
    FILE *fp = fopen(path, "w");
    fputs("# comment\nok,16,64,mxfp4,fine\nbad,16,sixty-four,mxfp4,oops\n", fp);
    fclose(fp);
    assert_int_equal(shape_catalog_load(path, &cat, &err), -1);
    char where[1100];
    snprintf(where, sizeof where, "%s:3:", path);
    assert_non_null(strstr(err.msg, where));
}

static void test_compare_table(void **state)
{
    (void)state;
    char *out = NULL;
    int rc = test_run_kreplay("compare --json --synth gdn_in_proj_ba_tp2,moe_gate --m 8,300", &out);
    assert_int_equal(rc, 0);
    json_t *root = json_loads(out, 0, NULL);
    assert_non_null(root);
    json_t *groups = json_object_get(root, "groups");
    assert_int_equal(json_array_size(groups), 4); /* 2 shapes x 2 bands */
    for (size_t i = 0; i < json_array_size(groups); i++) {
        json_t *g = json_array_get(groups, i);
        double a = json_real_value(json_object_get(g, "a_vs_source"));
        double b = json_real_value(json_object_get(g, "b_vs_source"));
        double ratio = json_real_value(json_object_get(g, "ratio_b_over_a"));
        /* fp8 activations carry 3 mantissa bits, e2m1 one: W4A8 must be the
         * more accurate of the two against the unquantized product. */
        assert_true(a > 0.001 && a < 0.05);
        assert_true(b > a);
        assert_true(fabs(ratio - b / a) < 1e-6 * ratio); /* JSON keeps 9 digits */
        /* Each kernel against its own operands is only output rounding. */
        assert_true(json_real_value(json_object_get(g, "a_vs_own_exact")) < 0.004);
    }
    json_decref(root);
    free(out);

    assert_int_equal(test_run_kreplay("compare w4a8.perblock quant.mxfp4 --synth moe_gate", &out), 2);
    assert_non_null(strstr(out, "must both be"));
    free(out);
    assert_int_equal(test_run_kreplay("compare", &out), 2);
    free(out);
}

KR_TEST_MAIN(test_catalogue, test_compare_table);
