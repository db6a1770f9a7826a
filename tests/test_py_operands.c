/* Named operands for Python kernels (`--py MODULE:FUNCTION@KERNEL`, plugin.h's
 * launch_named): numpy emulations in tests/python/py_operand_kernels.py, which
 * decode every byte format from its definition there, must be bit-identical to
 * the model whose operands they take (--vs, every element), proving the operands
 * carry the model's exact values:
 *  - w4a4.aiter from x_mxfp4 / x_mxfp4_scale (the model's own prepare_act, also
 *    under --mxfp4-quant) and the MXFP4 weight;
 *  - w4a8.folded from x_fp8 / x_scale and w_folded / w_folded_scale;
 *  - bf16.sequential from x_bf16 / weight_bf16 on a bf16 layer case;
 * and independent checks inside Python kernels (an AssertionError is an ERROR row):
 *  - e4m3fn(w_folded) * w_folded_scale equals the MXFP4 weight wherever folding is
 *    exact, and its fp64 GEMM passes w4a8.folded's R_exact;
 *  - x is the fp32 source and x_bf16 its RNE bf16 rounding;
 *  - an operand the declared kernel cannot give is an ERROR row saying why;
 *  - an unknown @KERNEL is refused with exit 2, naming it.
 * Skipped (77) when /usr/bin/python3 cannot import torch and numpy. */
/* ctest-labels: interop;slow */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "json_rows.h"
#include "python_ready.h"
#include "test_main.h"
#include "test_support.h"

#define KERNELS KREPLAY_SOURCE_DIR "/tests/python/py_operand_kernels.py"

static char g_mx[1024], g_bf16[1024];

static int setup(void **state)
{
    (void)state;
    char mx[2048], bf16[2048];
    test_tmp_path(g_mx, sizeof g_mx, "opcases_mx");
    test_tmp_path(g_bf16, sizeof g_bf16, "opcases_bf16");
    snprintf(mx, sizeof mx, "synth --shape 96x256 --m 5,16 --seed 3 --out '%s'", g_mx);
    snprintf(bf16, sizeof bf16, "synth --shape 256x2048 --m 4 --weight-format bf16 --seed 2 --out '%s'",
             g_bf16);
    return test_run_kreplay(mx, NULL) == 0 && test_run_kreplay(bf16, NULL) == 0 ? 0 : -1;
}

/* `kreplay replay --json ARGS TARGET` with the Python kernels' interpreter. */
static int replay_json(const char *args, const char *target, json_t **root, char *err_text,
                       size_t cap)
{
    return test_replay_json_py(args, target, root, err_text, cap);
}

/* Rows of kernel k whose reference contains ref; each must have verdict v and, for
 * a "model:" reference, identical_frac 1. */
static int check_rows(json_t *root, const char *k, const char *ref, const char *v)
{
    const json_rows_want_t want = {k, ref, 1, v, NULL, NULL, IDENTICAL_MODEL_ROWS};
    return json_rows_count(root, &want);
}

static json_t *run_ok(const char *args, const char *target)
{
    return json_rows_replay_py(args, target, NULL);
}

static void test_w4a4_from_x_mxfp4_bit_identical(void **state)
{
    (void)state;
    const char *k = "py.py_operand_kernels.w4a4_blocks";
    json_t *root = run_ok("--py " KERNELS ":w4a4_blocks@w4a4.aiter --kernels 'py.*' "
                          "--vs w4a4.aiter", g_mx);
    assert_int_equal(check_rows(root, k, "model:w4a4.aiter", "PASS"), 2);
    assert_int_equal(check_rows(root, k, "R_exact", "PASS"), 2);
    json_decref(root);
    /* The quantizer option reaches the operands: the model under the same option. */
    root = run_ok("--py " KERNELS ":w4a4_blocks@w4a4.aiter --kernels 'py.*' --vs w4a4.aiter "
                  "--mxfp4-quant ocp", g_mx);
    assert_int_equal(check_rows(root, k, "model:w4a4.aiter", "PASS"), 2);
    json_decref(root);
}

static void test_w4a8_folded_from_w_folded_bit_identical(void **state)
{
    (void)state;
    const char *k = "py.py_operand_kernels.w4a8_folded_seq";
    json_t *root = run_ok("--py " KERNELS ":w4a8_folded_seq@w4a8.folded "
                          "--py " KERNELS ":folded_decode_check@w4a8.folded "
                          "--kernels 'py.*' --vs w4a8.folded", g_mx);
    assert_int_equal(check_rows(root, k, "model:w4a8.folded", "PASS"), 2);
    assert_int_equal(check_rows(root, k, "R_exact", "PASS"), 2);
    assert_int_equal(check_rows(root, "py.py_operand_kernels.folded_decode_check", "R_exact",
                                "PASS"), 2);
    json_decref(root);
}

static void test_bf16_from_x_bf16_bit_identical(void **state)
{
    (void)state;
    json_t *root = run_ok("--py " KERNELS ":bf16_seq@bf16.sequential "
                          "--py " KERNELS ":x_fp32_check@bf16.sequential "
                          "--kernels 'py.*' --vs bf16.sequential", g_bf16);
    assert_int_equal(check_rows(root, "py.py_operand_kernels.bf16_seq", "model:bf16.sequential",
                                "PASS"), 1);
    assert_int_equal(check_rows(root, "py.py_operand_kernels.x_fp32_check", "R_source", "PASS"),
                     1);
    json_decref(root);
}

static void test_missing_operand_is_an_error_row(void **state)
{
    (void)state;
    int rc;
    json_t *root = json_rows_replay_py("--py " KERNELS ":wants_missing@w4a8.folded --kernels 'py.*'",
                                       g_mx, &rc);
    /* every row, whatever its kernel */
    const json_rows_want_t error = {NULL, NULL, 0, "ERROR", "operand 'x_mxfp4' is not available",
                                    "not MXFP4 here", IDENTICAL_UNCHECKED};
    assert_int_equal(json_rows_count(root, &error), 2);
    json_decref(root);
}

static void test_unknown_kernel_refused(void **state)
{
    (void)state;
    json_t *root = NULL;
    char err[8192];
    int rc = replay_json("--py " KERNELS ":w4a4_blocks@no.such.kernel", g_mx, &root, err,
                         sizeof err);
    json_decref(root);
    assert_int_equal(rc, 2);
    assert_non_null(strstr(err, "no.such.kernel"));
    rc = replay_json("--py " KERNELS ":w4a4_blocks@", g_mx, &root, err, sizeof err);
    json_decref(root);
    assert_int_equal(rc, 2);
    assert_non_null(strstr(err, "MODULE:FUNCTION[@KERNEL]"));
}

KR_TEST_MAIN_FULL(test_python_missing("torch, numpy"), setup, NULL,
    test_w4a4_from_x_mxfp4_bit_identical, test_w4a8_folded_from_w_folded_bit_identical,
    test_bf16_from_x_bf16_bit_identical, test_missing_operand_is_an_error_row,
    test_unknown_kernel_refused);
