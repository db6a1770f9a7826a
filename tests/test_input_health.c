/* Input health maps: per-row / per-column non-finite counts, the blocks
 * they form, and what each quantizer makes of them, checked against counts
 * worked out by hand from docs/NUMERICS.md. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "input_health.h"
#include "test_main.h"
#include "test_support.h"

static float *random_x(int64_t M, int64_t K, uint64_t seed)
{
    float *x = malloc((size_t)(M * K) * sizeof(float));
    assert_non_null(x);
    test_rng_t rng = {seed};
    for (int64_t i = 0; i < M * K; i++)
        x[i] = (float)test_rng_normal(&rng);
    return x;
}

static void fill(float *x, int64_t K, int64_t r0, int64_t r1, int64_t c0, int64_t c1, float v)
{
    for (int64_t r = r0; r <= r1; r++)
        for (int64_t c = c0; c <= c1; c++)
            x[r * K + c] = v;
}

static void expect_in(const char *text, const char *phrase)
{
    if (!strstr(text, phrase)) {
        print_error("missing \"%s\" in:\n%s\n", phrase, text);
        fail();
    }
}

/* The input map of x [M, K]; fails the test if it cannot be computed. */
static void map_of(const float *x, int64_t M, int64_t K, input_map_t *m)
{
    kr_error_t err = {{0}};
    if (input_map_compute(x, M, K, m, &err) != 0)
        fail_msg("input_map_compute %lld x %lld: %s", (long long)M, (long long)K, err.msg);
}

/* Block i of the map spans rows r0..r1 x columns c0..c1 (inclusive). */
static void expect_block(const input_map_t *m, int i, int64_t r0, int64_t r1, int64_t c0,
                         int64_t c1)
{
    assert_int_equal(m->blocks[i].r0, r0);
    assert_int_equal(m->blocks[i].r1, r1);
    assert_int_equal(m->blocks[i].c0, c0);
    assert_int_equal(m->blocks[i].c1, c1);
}

/* The dispatch's measured case: one rank's out_proj input at M=17 carries
 * 2176 NaN = 17 rows x 128 columns, one whole GDN head. */
static void test_nan_head_block(void **state)
{
    (void)state;
    const int64_t M = 17, K = 3072;
    float *x = random_x(M, K, 1);
    fill(x, K, 0, 16, 1024, 1151, NAN);
    input_map_t m;
    map_of(x, M, K, &m);
    assert_int_equal(m.nf.nan, 2176);
    assert_int_equal(m.nf.pos_inf + m.nf.neg_inf, 0);
    assert_int_equal(m.rows_hit, 17);
    assert_int_equal(m.cols_hit, 128);
    for (int64_t r = 0; r < M; r++)
        assert_int_equal(m.row_count[r], 128);
    for (int64_t k = 0; k < K; k++)
        assert_int_equal(m.col_count[k], (k >= 1024 && k <= 1151) ? 17 : 0);
    assert_int_equal(m.block_count, 1);
    assert_int_equal(m.blocks_stored, 1);
    expect_block(&m, 0, 0, 16, 1024, 1151);
    assert_int_equal(m.blocks[0].nf.nan, 2176);

    /* Propagation, by hand: vLLM ignores NaN in amax and its clamp sends
     * NaN to +448 (2176 codes); traced's amax is NaN in every hit row (17);
     * aiter-even: 128 / 32 = 4 all-NaN blocks per row x 17 rows = 68, each
     * amax NaN -> (0x7FC00000 + 0x200000) & 0xFF800000 = Inf -> e = 127 ->
     * byte 254. */
    assert_true(m.propagation_done);
    assert_int_equal(m.prop.vllm_to_pos_max, 2176);
    assert_int_equal(m.prop.vllm_from_nan_to_pos_max, 2176);
    assert_int_equal(m.prop.vllm_to_nan + m.prop.vllm_to_neg_max + m.prop.vllm_to_other, 0);
    assert_int_equal(m.prop.vllm_scale_nonfinite, 0);
    assert_int_equal(m.prop.traced_rows_all_nan, 17);
    assert_int_equal(m.prop.traced_rows_some_nan, 0);
    assert_int_equal(m.prop.traced_nan_codes, 17 * 3072);
    assert_int_equal(m.prop.mx_blocks_hit, 68);
    assert_int_equal(m.prop.mx_blocks_all_nan, 68);
    assert_int_equal(m.prop.mx_all_nan_scale_254, 68);
    assert_int_equal(m.prop.mx_blocks_inf + m.prop.mx_blocks_partial_nan, 0);
    assert_int_equal(m.prop.ocp_nan_scale_blocks, 68);

    char text[2048];
    input_map_describe(&m, text, sizeof text);
    expect_in(text, "x: 2176 non-finite (2176 NaN, 0 +Inf, 0 -Inf) in 17 rows x 128 columns");
    expect_in(text, "block: rows 0-16 x columns 1024-1151 (17 x 128 = 2176 NaN): one 128-wide "
                    "block, a whole GDN head if heads are 128 wide");
    expect_in(text, "rows hit: 0-16 (all 17); columns hit: 1024-1151");
    expect_in(text, "fp8 vllm: 2176 NaN -> +448 (finite); fp8 traced: 17 of 17 rows entirely NaN; "
                    "mxfp4 aiter-even: finite codes, 68 all-NaN blocks got scale 2^127");
    input_map_free(&m);

    /* The one-line summary keeps its wording (the CLI test greps it). */
    case_t c;
    memset(&c, 0, sizeof c);
    c.M = M;
    c.K = K;
    c.N = 16;
    c.x = x;
    input_health_t h;
    input_health_compute(&c, &h);
    input_health_describe(&h, text, sizeof text);
    assert_string_equal(text, "x: 2176 non-finite (2176 NaN, 0 +Inf, 0 -Inf) in 17 rows x 128 columns");
    free(x);
}

static void test_two_blocks_are_two(void **state)
{
    (void)state;
    const int64_t M = 8, K = 256;
    float *x = random_x(M, K, 2);
    fill(x, K, 0, 3, 64, 127, NAN);
    fill(x, K, 5, 6, 200, 231, INFINITY);
    input_map_t m;
    map_of(x, M, K, &m);
    assert_int_equal(m.block_count, 2);
    expect_block(&m, 0, 0, 3, 64, 127);
    assert_int_equal(m.blocks[0].nf.nan, 256);
    expect_block(&m, 1, 5, 6, 200, 231);
    assert_int_equal(m.blocks[1].nf.pos_inf, 64);
    assert_int_equal(m.rows_hit, 6);
    assert_int_equal(m.cols_hit, 64 + 32);
    char text[2048];
    input_map_describe(&m, text, sizeof text);
    expect_in(text, "blocks: 2");
    expect_in(text, "rows 0-3 x columns 64-127 (4 x 64 = 256 NaN): one 64-wide block");
    expect_in(text, "rows 5-6 x columns 200-231 (2 x 32 = 64 +Inf)");
    expect_in(text, "rows hit: 0-3, 5-6");
    input_map_free(&m);

    /* Side by side in the same rows: still two; touching: one. */
    free(x);
    x = random_x(M, K, 3);
    fill(x, K, 1, 2, 0, 31, NAN);
    fill(x, K, 1, 2, 96, 127, NAN);
    map_of(x, M, K, &m);
    assert_int_equal(m.block_count, 2);
    assert_int_equal(m.blocks[0].c1, 31);
    assert_int_equal(m.blocks[1].c0, 96);
    input_map_free(&m);
    fill(x, K, 1, 2, 32, 95, NAN);
    map_of(x, M, K, &m);
    assert_int_equal(m.block_count, 1);
    expect_block(&m, 0, 1, 2, 0, 127);
    input_map_free(&m);
    free(x);
}

/* Mixed NaN / Inf, worked by hand (M = 3, K = 64, two 32-blocks a row):
 *   row 0: x[0][5] = NaN
 *   row 1: x[1][0] = +Inf, x[1][32..63] = NaN
 *   row 2: x[2][10] = -Inf
 * vLLM: row 0's scale is finite and NaN/s clamps to +448; rows 1 and 2 have
 *   amax = Inf, so s = Inf (non-finite: 2 rows), +-Inf/Inf = NaN and
 *   NaN/Inf = NaN, each clamped to +448: all 35 -> +448 (33 from NaN), even
 *   the -Inf.
 * traced: rows 0 and 1 hold a NaN, amax NaN, whole row NaN (2 x 64 codes);
 *   row 2: amax Inf, finite/Inf = 0, -Inf/Inf = NaN: 1 NaN code, partly.
 * aiter-even: row 0 block 0 partly NaN (finite scale); row 1 block 0 has
 *   +Inf -> amax Inf -> byte 254, block 1 all NaN -> 254; row 2 block 0
 *   -Inf -> 254.  ocp gives each of the 4 blocks the NaN scale 0xFF. */
static void test_propagation_by_hand(void **state)
{
    (void)state;
    const int64_t M = 3, K = 64;
    float *x = random_x(M, K, 4);
    x[0 * K + 5] = NAN;
    x[1 * K + 0] = INFINITY;
    fill(x, K, 1, 1, 32, 63, NAN);
    x[2 * K + 10] = -INFINITY;
    input_map_t m;
    map_of(x, M, K, &m);
    assert_int_equal(m.nf.nan, 33);
    assert_int_equal(m.nf.pos_inf, 1);
    assert_int_equal(m.nf.neg_inf, 1);
    assert_int_equal(m.block_count, 4);
    const input_propagation_t *p = &m.prop;
    assert_int_equal(p->vllm_to_pos_max, 35);
    assert_int_equal(p->vllm_from_nan_to_pos_max, 33);
    assert_int_equal(p->vllm_to_neg_max + p->vllm_to_nan + p->vllm_to_other, 0);
    assert_int_equal(p->vllm_scale_nonfinite, 2);
    assert_int_equal(p->traced_rows_all_nan, 2);
    assert_int_equal(p->traced_rows_some_nan, 1);
    assert_int_equal(p->traced_nan_codes, 64 + 64 + 1);
    assert_int_equal(p->mx_blocks_hit, 4);
    assert_int_equal(p->mx_blocks_all_nan, 1);
    assert_int_equal(p->mx_all_nan_scale_254, 1);
    assert_int_equal(p->mx_blocks_inf, 2);
    assert_int_equal(p->mx_inf_scale_254, 2);
    assert_int_equal(p->mx_blocks_partial_nan, 1);
    assert_int_equal(p->ocp_nan_scale_blocks, 4);
    char text[2048];
    input_map_describe(&m, text, sizeof text);
    expect_in(text, "fp8 vllm: 35 non-finite -> 35 +448 (33 of them NaN), 2 rows with a non-finite scale");
    expect_in(text, "fp8 traced: 2 of 3 rows entirely NaN, 1 partly NaN");
    expect_in(text, "1 all-NaN blocks got scale 2^127, 2 blocks with an Inf got scale 2^127");
    expect_in(text, "1 partly-NaN blocks keep a finite scale");
    expect_in(text, "row 1 x columns 32-63 (1 x 32 = 32 NaN)");
    input_map_free(&m);
    free(x);
}

static void test_all_finite(void **state)
{
    (void)state;
    float *x = random_x(4, 64, 5);
    input_map_t m;
    map_of(x, 4, 64, &m);
    assert_int_equal(m.block_count, 0);
    assert_int_equal(m.rows_hit + m.cols_hit, 0);
    assert_false(m.propagation_done);
    char text[256];
    input_map_describe(&m, text, sizeof text);
    assert_string_equal(text, "x: all finite");
    input_map_free(&m);
    free(x);
}

/* Scattered single NaNs: more blocks than are stored, all counted. */
static void test_many_blocks(void **state)
{
    (void)state;
    const int64_t M = 20, K = 64;
    float *x = random_x(M, K, 6);
    for (int64_t r = 0; r < M; r++)
        for (int64_t k = r % 2; k < K; k += 8)
            x[r * K + k] = NAN;
    input_map_t m;
    map_of(x, M, K, &m);
    assert_int_equal(m.nf.nan, M * 8);
    assert_int_equal(m.block_count, M * 8);     /* alternate rows shift: nothing continues */
    assert_int_equal(m.blocks_stored, INPUT_MAP_MAX_BLOCKS);
    char text[4096];
    input_map_describe(&m, text, sizeof text);
    expect_in(text, "blocks: 160");
    expect_in(text, "... and 144 more");
    input_map_free(&m);
    free(x);
}

static void test_index_ranges(void **state)
{
    (void)state;
    unsigned char mask[12] = {1, 1, 1, 0, 1, 0, 0, 1, 1, 0, 0, 1};
    char buf[128];
    assert_int_equal(index_ranges_format(mask, 12, 8, buf, sizeof buf), 4);
    assert_string_equal(buf, "0-2, 4, 7-8, 11");
    assert_int_equal(index_ranges_format(mask, 12, 2, buf, sizeof buf), 4);
    assert_string_equal(buf, "0-2, 4, ... (4 ranges)");
}

KR_TEST_MAIN(
    test_nan_head_block, test_two_blocks_are_two, test_propagation_by_hand, test_all_finite,
    test_many_blocks, test_index_ranges);
