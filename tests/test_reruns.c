/* Every kernel kind is rerun and compared bit for bit (harness/engine/external_launch.h).
 *
 * kreplay's own models are deterministic, so the test makes flaky ones: a
 * copy of w4a8.perblock's descriptor whose run flips the lowest bit of
 * element (0, 5) on its 2nd call and of (1, 77) on its 3rd, and a copy of
 * quant.fp8_token's whose 2nd preparation flips the lowest bit of operand (2, 3).  Replayed
 * with model_reruns 3 on a synthetic 64 x 256 x 256 case, whole and in row
 * blocks of 10, the GEMM's row is NONDETERMINISTIC with exactly 2 of 16384
 * elements, at [0, 5] and [1, 77], and the quantizer's with 1, at [2, 3]:
 * counts and positions known from the flips, not from the code under test.
 * With model_reruns 1 the same flaky model runs once and passes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "case_io.h"
#include "replay.h"
#include "synth.h"
#include "test_cases.h"
#include "test_main.h"
#include "test_support.h"

enum { M = 64, N = 256, K = 256 };

/* Calls of the flaky model and the flaky quantizer in the current test
 * (test-only state: a descriptor's functions take no context). */
static int g_runs, g_preps;

static int flaky_run(const kernel_desc_t *k, const kernel_inputs_t *in, const kernel_act_t *act,
                     const kernel_options_t *opt, uint16_t *out, kernel_run_info_t *info,
                     kr_error_t *err)
{
    (void)k;
    const kernel_desc_t *real = kernel_find("w4a8.perblock");
    const int rc = real->run_cpu(real, in, act, opt, out, info, err);
    const int call = ++g_runs;
    if (rc == 0 && call == 2 && in->M > 0)
        out[0 * in->N + 5] ^= 1;
    if (rc == 0 && call == 3 && in->M > 1)
        out[1 * in->N + 77] ^= 1;
    return rc;
}

static int flaky_prepare(const kernel_desc_t *k, const kernel_inputs_t *in,
                         const kernel_options_t *opt, kernel_act_t *act, kr_error_t *err)
{
    (void)k;
    const kernel_desc_t *real = kernel_find("quant.fp8_token");
    const int rc = real->prepare_act(real, in, opt, act, err);
    if (rc == 0 && ++g_preps == 2 && in->M > 2) {
        float *v = &act->dequant[2 * in->K + 3];
        uint32_t bits;
        memcpy(&bits, v, sizeof bits);
        bits ^= 1u;
        memcpy(v, &bits, sizeof bits);
    }
    return rc;
}

static case_t make_case(void)
{
    case_t c;
    test_synth_default_or_fail(M, N, K, 5, &c);
    return c;
}

static const result_t *row_of(const result_list_t *rows, const char *kernel)
{
    for (int64_t i = 0; i < rows->count; i++)
        if (strcmp(rows->rows[i].kernel, kernel) == 0)
            return &rows->rows[i];
    fail_msg("no row for %s", kernel);
    return NULL;
}

static void replay_flaky(const case_t *c, int reruns, int64_t block_bytes, result_list_t *rows)
{
    static kernel_desc_t gemm, quant;
    gemm = *kernel_find("w4a8.perblock");
    gemm.name = "test.flaky_perblock";
    gemm.run_cpu = flaky_run;
    quant = *kernel_find("quant.fp8_token");
    quant.name = "test.flaky_quant";
    quant.prepare_act = flaky_prepare;
    const kernel_desc_t *extra[] = {&gemm, &quant};
    replay_options_t opt;
    replay_options_default(&opt);
    opt.kernel_patterns = "test.*";
    opt.refs = REF_EXACT;
    opt.include_recorded = 0;
    opt.diagnose = 0;
    opt.extra_kernels = extra;
    opt.n_extra_kernels = 2;
    opt.model_reruns = reruns;
    opt.block_bytes = block_bytes;
    opt.ref_panel_rows = 1;     /* blocks of any row count (the default panel is 512 rows) */
    g_runs = g_preps = 0;
    kr_error_t err = {{0}};
    assert_int_equal(replay_case(c, &opt, rows, &err), 0);
}

static void check_nondeterministic(const result_list_t *rows)
{
    const result_t *g = row_of(rows, "test.flaky_perblock");
    if (g->verdict != VERDICT_NONDETERMINISTIC)
        fail_msg("gemm: %s: %s", verdict_name(g->verdict), g->note);
    assert_int_equal(g->reruns, 3);
    assert_int_equal(g->rerun_diff, 2);
    assert_non_null(strstr(g->note, "reruns differ: 2 of 16384 elements changed bits across 3 runs "
                                    "on the same inputs, first at [0, 5] [1, 77]; run 1 alone: PASS"));
    const result_t *q = row_of(rows, "test.flaky_quant");
    if (q->verdict != VERDICT_NONDETERMINISTIC)
        fail_msg("quant: %s: %s", verdict_name(q->verdict), q->note);
    assert_int_equal(q->rerun_diff, 1);
    assert_non_null(strstr(q->note, "1 of 16384 elements changed bits across 3 runs on the same "
                                    "inputs, first at [2, 3]"));
}

static void test_models_rerun_whole_case(void **state)
{
    (void)state;
    case_t c = make_case();
    result_list_t rows = {0};
    replay_flaky(&c, 3, 0, &rows);
    assert_int_equal(g_runs, 3);
    check_nondeterministic(&rows);
    result_list_free(&rows);

    replay_flaky(&c, 1, 0, &rows);
    assert_int_equal(g_runs, 1);
    assert_int_equal(row_of(&rows, "test.flaky_perblock")->verdict, VERDICT_PASS);
    assert_int_equal(row_of(&rows, "test.flaky_quant")->verdict, VERDICT_PASS);
    result_list_free(&rows);
    case_free(&c);
}

static void test_models_rerun_in_row_blocks(void **state)
{
    (void)state;
    case_t c = make_case();
    /* 10 rows a block, found by search so the test does not restate the
     * replay's own estimate. */
    int64_t bytes = 1;
    while (replay_block_rows(&c, &(replay_options_t){.block_bytes = bytes * 2, .ref_panel_rows = 1}) < 10)
        bytes *= 2;
    while (replay_block_rows(&c, &(replay_options_t){.block_bytes = bytes, .ref_panel_rows = 1}) < 10)
        bytes++;
    assert_int_equal(replay_block_rows(&c, &(replay_options_t){.block_bytes = bytes, .ref_panel_rows = 1}),
                     10);
    result_list_t rows = {0};
    replay_flaky(&c, 3, bytes, &rows);
    assert_int_equal(g_runs, 3 * 7);    /* 3 runs in each of 7 blocks (64 = 6 x 10 + 4) */
    check_nondeterministic(&rows);
    result_list_free(&rows);
    case_free(&c);
}

KR_TEST_MAIN(test_models_rerun_whole_case, test_models_rerun_in_row_blocks);
