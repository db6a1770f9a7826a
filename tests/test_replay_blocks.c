/* ctest-labels: blas-bits */
/* Replaying a case in blocks of rows gives the rows of replaying it whole.
 *
 * The case has everything a block boundary could disturb: a NaN head
 * (R_sanitized rows, POISONED verdicts, diagnoses), zero rows, both weight
 * kinds (MXFP4 and bf16 kernels), recorded outputs with a rerun that differs
 * in known elements (the race-check row), --vs rows, and a fragment-order
 * weight with the [K/32, N] scale layout.  Blocks of 10 rows do not divide
 * M = 96, so the last block is short; the references' row panel is set to 2
 * rows so that 10-row blocks are whole panels (one test keeps the default
 * panel, on a case with more rows than one).  The oracle is the whole-case
 * replay: every count, index, histogram, digest and verdict must be equal,
 * and the norms equal to fp64 rounding (the sums are associated by block).
 * The references are OpenBLAS sgemm, whose bits depend on each call's shape:
 * scripts/test.sh runs this test under every OpenBLAS core the CPU has. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "case_io.h"
#include "gemm_ref.h"
#include "replay.h"
#include "synth.h"
#include "test_cases.h"
#include "test_main.h"
#include "test_support.h"

enum { N = 256, K = 2048 };

static void assert_rel(double got, double want, double rtol, const char *what)
{
    if (isnan(want) && isnan(got))
        return;
    if (!(fabs(got - want) <= rtol * fabs(want)) && got != want) {
        print_error("%s: got %.17g want %.17g\n", what, got, want);
        fail();
    }
}

/* A recorded output: w4a8.perblock's bits on the case, as production's. */
static uint16_t *model_output(const case_t *c, const char *name)
{
    const kernel_desc_t *k = kernel_find(name);
    assert_non_null(k);
    kernel_inputs_t in = {
        .M = c->M, .N = c->N, .K = c->K, .x = c->x, .x_fp8 = c->x_fp8, .x_scale = c->x_scale,
        .x_fp8_format = c->x_fp8_format,
        .weight = {.packed = c->weight, .scales = c->weight_scale, .layout = c->scale_layout,
                   .e8m0_mode = E8M0_SPEC, .N = c->N, .K = c->K},
        .weight_ref = c->weight_ref, .weight_ref_len = c->weight_ref_len,
    };
    kernel_options_t ko;
    kernel_options_default(&ko);
    kernel_act_t act;
    kr_error_t err = {{0}};
    assert_int_equal(k->prepare_act(k, &in, &ko, &act, &err), 0);
    uint16_t *out = malloc((size_t)(c->M * c->N) * sizeof *out);
    kernel_run_info_t info = {{0}};
    assert_int_equal(k->run_cpu(k, &in, &act, &ko, out, &info, &err), 0);
    kernel_act_free(&act);
    return out;
}

static void compare_runs(const result_list_t *whole, const result_list_t *blocks)
{
    assert_int_equal(blocks->count, whole->count);
    for (int64_t i = 0; i < whole->count; i++) {
        const result_t *a = &whole->rows[i], *b = &blocks->rows[i];
        char what[160];
        snprintf(what, sizeof what, "%s vs %s", a->kernel, a->reference);
        assert_string_equal(b->kernel, a->kernel);
        assert_string_equal(b->reference, a->reference);
        assert_int_equal(b->M, a->M);
        assert_string_equal(b->band, a->band);
        if (b->verdict != a->verdict) {
            print_error("%s: verdict %s, whole %s\n", what, verdict_name(b->verdict),
                        verdict_name(a->verdict));
            fail();
        }
        assert_string_equal(b->out_digest, a->out_digest);
        assert_int_equal(b->metrics.count, a->metrics.count);
        assert_int_equal(b->metrics.finite_count, a->metrics.finite_count);
        assert_int_equal(b->metrics.max_abs_index, a->metrics.max_abs_index);
        assert_int_equal(b->metrics.worst_row, a->metrics.worst_row);
        assert_memory_equal(&b->metrics.out_nf, &a->metrics.out_nf, sizeof a->metrics.out_nf);
        assert_memory_equal(&b->metrics.ref_nf, &a->metrics.ref_nf, sizeof a->metrics.ref_nf);
        assert_memory_equal(&b->input_nf, &a->input_nf, sizeof a->input_nf);
        assert_int_equal(b->ulp.count, a->ulp.count);
        assert_int_equal(b->ulp.identical, a->ulp.identical);
        assert_true(b->ulp.max_ulp == a->ulp.max_ulp);
        assert_memory_equal(b->ulp.bins, a->ulp.bins, sizeof a->ulp.bins);
        assert_rel(b->metrics.rel_fro, a->metrics.rel_fro, 1e-12, what);
        assert_rel(b->metrics.nmse, a->metrics.nmse, 1e-12, what);
        assert_rel(b->metrics.cosine, a->metrics.cosine, 1e-12, what);
        assert_rel(b->metrics.mag_ratio, a->metrics.mag_ratio, 1e-12, what);
        assert_rel(b->metrics.max_abs, a->metrics.max_abs, 0, what);
        assert_rel(b->metrics.worst_row_rel, a->metrics.worst_row_rel, 0, what);
        /* Notes too: a quantizer's counts are summed over the blocks. */
        assert_string_equal(b->note, a->note);
        /* A diagnosis names the rows it saw. */
        if ((b->diagnosis[0] != '\0') != (a->diagnosis[0] != '\0')) {
            print_error("%s: diagnosis \"%s\", whole \"%s\"\n", what, b->diagnosis, a->diagnosis);
            fail();
        }
    }
}

/* Replays c whole and in blocks of block_rows rows (whole panels of
 * panel_rows; 0: the default panel) and compares; expect_nondet: the case's
 * recorded rerun differs from its output in 3 elements. */
static void replay_both_ways_in(case_t *c, const char *vs, int expect_nondet, int64_t panel_rows,
                                int64_t block_rows)
{
    const int64_t M = c->M;
    replay_options_t opt;
    replay_options_default(&opt);
    opt.vs_kernel = vs;
    opt.ref_panel_rows = panel_rows;
    opt.block_bytes = (int64_t)1 << 40;
    assert_int_equal(replay_block_rows(c, &opt), M);
    result_list_t whole = {0}, blocks = {0};
    kr_error_t err = {{0}};
    assert_int_equal(replay_case(c, &opt, &whole, &err), 0);

    /* block_rows a block: the smallest budget that gives them by the
     * replay's own estimate, found by search so the test does not restate
     * it; one byte less must give a panel fewer. */
    replay_options_t probe = {.ref_panel_rows = panel_rows};
    int64_t bytes = 1;
    for (probe.block_bytes = bytes; replay_block_rows(c, &probe) < block_rows;
         probe.block_bytes = bytes)
        bytes *= 2;
    int64_t lo = bytes / 2, hi = bytes;
    while (hi - lo > 1) {
        probe.block_bytes = lo + (hi - lo) / 2;
        if (replay_block_rows(c, &probe) >= block_rows)
            hi = probe.block_bytes;
        else
            lo = probe.block_bytes;
    }
    opt.block_bytes = hi;
    assert_int_equal(replay_block_rows(c, &opt), block_rows);
    assert_int_equal(replay_case(c, &opt, &blocks, &err), 0);
    assert_true(whole.count > 30);
    compare_runs(&whole, &blocks);

    int poisoned = 0, nondet = 0, diagnosed = 0;
    for (int64_t i = 0; i < blocks.count; i++) {
        poisoned += blocks.rows[i].verdict == VERDICT_POISONED_INPUT;
        nondet += blocks.rows[i].verdict == VERDICT_NONDETERMINISTIC;
        diagnosed += blocks.rows[i].diagnosis[0] != '\0';
        assert_true(blocks.rows[i].diagnosis[0] == '\0' || verdict_is_failure(blocks.rows[i].verdict));
        if (!strcmp(blocks.rows[i].reference, "out_rerun")) {
            /* Three elements were changed, one in each of three blocks. */
            assert_int_equal(blocks.rows[i].ulp.count - blocks.rows[i].ulp.identical, 3);
        }
    }
    assert_true(poisoned > 0);
    assert_int_equal(nondet, expect_nondet);
    /* Only failing rows carry a diagnosis (a POISONED_INPUT row's rows with
     * finite inputs pass: nothing to blame). */
    int failing = 0;
    for (int64_t i = 0; i < blocks.count; i++)
        failing += verdict_is_failure(blocks.rows[i].verdict);
    assert_true(diagnosed <= failing);
    result_list_free(&whole);
    result_list_free(&blocks);
}

static void replay_both_ways(case_t *c, const char *vs, int expect_nondet)
{
    replay_both_ways_in(c, vs, expect_nondet, 2, 10);
}

static void test_blocks_match_whole(void **state)
{
    (void)state;
    enum { M = 96 };
    synth_params_t p = test_synth_params(M, N, K, 11);
    p.nan_rows = 13;  /* rows 0-12: the NaN head crosses the first block boundary */
    p.nan_cols = 64;
    p.nan_col0 = 128;
    p.zero_rows = 3;
    p.weight_format = SYNTH_WEIGHT_BOTH;
    case_t c;
    test_synth_or_fail(&p, &c);
    c.out = model_output(&c, "w4a8.perblock");
    c.out_rerun = malloc((size_t)(M * N) * sizeof(uint16_t));
    memcpy(c.out_rerun, c.out, (size_t)(M * N) * sizeof(uint16_t));
    c.out_rerun[0 * N + 5] ^= 1;
    c.out_rerun[45 * N + 200] ^= 1;
    c.out_rerun[95 * N + 255] ^= 2;
    replay_both_ways(&c, "w4a8.folded", 1);
    case_free(&c);
}

static void test_blocks_fragment_order(void **state)
{
    (void)state;
    enum { M = 96 };
    synth_params_t p = test_synth_params(M, N, K, 12);
    p.nan_rows = 2;
    p.nan_cols = 32;
    p.scale_layout = SCALE_LAYOUT_KN;
    p.weight_order = WEIGHT_ORDER_FRAGMENT;
    case_t c;
    test_synth_or_fail(&p, &c);
    c.out = calloc((size_t)(M * N), sizeof(uint16_t));
    c.out_rerun = calloc((size_t)(M * N), sizeof(uint16_t));
    for (int64_t i = 0; i < M * N; i++)
        c.out[i] = c.out_rerun[i] = (uint16_t)(0x3F80 + (i % 97));
    c.out_rerun[0 * N + 1] = 0x4000;
    c.out_rerun[45 * N + 2] = 0x4000;
    c.out_rerun[95 * N + 3] = 0x4000;
    replay_both_ways(&c, NULL, 1);
    case_free(&c);
}

/* The decode band, where the r4d dispatch picks split-K by M (8 splits up
 * to M = 16, 4 above): a block of 10 rows of a 40-row case must be summed
 * with the case's 4 splits, or its output bits change. */
static void test_blocks_decode_band(void **state)
{
    (void)state;
    synth_params_t p = test_synth_params(40, N, K, 13);
    p.nan_rows = 1;
    p.nan_cols = 32;
    case_t c;
    test_synth_or_fail(&p, &c);
    replay_both_ways(&c, "w4a8.r4d", 0);
    case_free(&c);
}

/* The default panel: a budget too small for one panel still replays whole
 * panels, and a case of 1.4 panels replays as one panel and a short one. */
static void test_blocks_default_panel(void **state)
{
    (void)state;
    const int64_t M = GEMM_REF_PANEL_ROWS + GEMM_REF_PANEL_ROWS * 2 / 5;
    synth_params_t p = test_synth_params(M, 48, 128, 14);
    p.nan_rows = 3;
    p.nan_cols = 32;
    p.weight_format = SYNTH_WEIGHT_BOTH;
    case_t c;
    test_synth_or_fail(&p, &c);
    replay_options_t tiny = {.block_bytes = 1};
    assert_int_equal(replay_block_rows(&c, &tiny), GEMM_REF_PANEL_ROWS);
    const int64_t N48 = 48;
    c.out = model_output(&c, "w4a8.perblock");
    c.out_rerun = malloc((size_t)(M * N48) * sizeof(uint16_t));
    memcpy(c.out_rerun, c.out, (size_t)(M * N48) * sizeof(uint16_t));
    c.out_rerun[0 * N48 + 5] ^= 1;
    c.out_rerun[(GEMM_REF_PANEL_ROWS - 1) * N48 + 20] ^= 1;
    c.out_rerun[(M - 1) * N48 + 47] ^= 2;
    replay_both_ways_in(&c, "w4a8.folded", 1, 0, GEMM_REF_PANEL_ROWS);
    case_free(&c);
}

KR_TEST_MAIN(
    test_blocks_match_whole, test_blocks_fragment_order, test_blocks_decode_band,
    test_blocks_default_panel);
