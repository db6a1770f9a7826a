/* The W4A8 folded family of CPU models (support/w4a8_cases.c): w4a8.folded
 * and its layouts (.folded.wperm, .atiled) bit-identical to a plain scalar
 * re-implementation of the split-K order and to each other, .partitioned
 * identical to folded runs on each copy, .decode and .r4d against the same
 * scalar oracle, and the descriptors.  The only model-against-model
 * comparisons are those required bit-identities.  w4a8.folded against
 * hand-worked cases and fp64: test_models_w4a8.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "act_prepare.h"
#include "formats.h"
#include "registry.h"
#include "spec_formats.h"
#include "test_cases.h"
#include "test_main.h"
#include "test_support.h"
#include "w4a8_cases.h"

/* ---------------------------------------------------------------- layouts */

static void test_layouts_bit_identical(void **state)
{
    (void)state;
    const int64_t shapes[][3] = {{1, 48, 64}, {17, 48, 320}, {33, 96, 1024}, {5, 64, 128},
                                 {16, 16, 64}, {31, 80, 192}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        for (uint64_t seed = 0; seed < 3; seed++) {
            tcase_t c;
            tcase_random(&c, 100 + 10 * s + seed, shapes[s][0], shapes[s][1], shapes[s][2],
                         seed == 0 ? 4 : 12);
            const int64_t count = c.M * c.N;
            uint16_t *f = run_model(&kernel_w4a8_folded, &c, 0, NULL);
            uint16_t *wp = run_model(&kernel_w4a8_folded_wperm, &c, 0, NULL);
            uint16_t *at = run_model(&kernel_w4a8_atiled, &c, 0, NULL);
            uint16_t *oracle = oracle_split(&c, 1);
            assert_same_bits(f, oracle, count, "folded vs scalar oracle");
            assert_same_bits(wp, f, count, "folded.wperm vs folded");
            assert_same_bits(at, f, count, "atiled vs folded");
            TEST_FREE_ALL(f, wp, at, oracle);
            tcase_free(&c);
        }
    }
}

static void test_fragment_order_needs_n16(void **state)
{
    (void)state;
    tcase_t c;
    tcase_random(&c, 5, 3, 40, 128, 2);
    kernel_inputs_t in = tcase_inputs(&c);
    uint16_t *out = malloc((size_t)(c.M * c.N) * sizeof(uint16_t));
    char note[256];
    assert_int_not_equal(run_model_in(&kernel_w4a8_folded_wperm, &in, 0, NULL, out, note), 0);
    assert_non_null(strstr(note, "fragment order needs N % 16 == 0"));
    assert_int_not_equal(run_model_in(&kernel_w4a8_r4d, &in, 0, NULL, out, note), 0);
    assert_non_null(strstr(note, "fragment order needs N % 16 == 0"));
    /* The row-major models take N = 40 (production masks partial N tiles). */
    assert_int_equal(run_model_in(&kernel_w4a8_folded, &in, 0, NULL, out, note), 0);
    free(out);
    tcase_free(&c);
}

/* ---------------------------------------------------------------- partitioned */

static void test_partitioned_identical_copies(void **state)
{
    (void)state;
    tcase_t c;
    tcase_random(&c, 31, 9, 96, 256, 10);
    char note[256];
    uint16_t *f = run_model(&kernel_w4a8_folded, &c, 0, NULL);
    uint16_t *p = run_model(&kernel_w4a8_partitioned, &c, 0, note);
    print_message("%s\n", note);
    assert_same_bits(p, f, c.M * c.N, "partitioned (1 copy) vs folded");
    assert_non_null(strstr(note, "3 identical activation copies"));
    assert_non_null(strstr(note, "partitions n<32, n<64, n<96"));
    free(f);
    free(p);
    tcase_free(&c);
}

static void check_three_copies(int64_t M, int64_t N, int64_t K, const int64_t *bounds,
                               int64_t pb1, int64_t pb2, uint64_t seed)
{
    tcase_t c;
    tcase_random(&c, seed, M, N, K, 10);
    tcase_add_parts(&c, seed + 1);
    kernel_inputs_t in = tcase_inputs(&c);
    uint16_t *p = malloc((size_t)(M * N) * sizeof(uint16_t));
    uint16_t *f = malloc((size_t)(M * N) * sizeof(uint16_t));
    char note[256];
    assert_int_equal(run_model_in(&kernel_w4a8_partitioned, &in, 0, bounds, p, note), 0);
    print_message("N=%lld bounds %lld,%lld: %s\n", (long long)N, (long long)pb1, (long long)pb2,
                  note);
    const int64_t lo[3] = {0, pb1, pb2}, hi[3] = {pb1, pb2, N};
    for (int part = 0; part < 3; part++) {
        /* folded run on copy `part` alone */
        kernel_inputs_t one = tcase_inputs(&c);
        one.x_fp8 = c.parts + part * M * K;
        one.x_scale = c.parts_scale + part * M;
        one.x_fp8_parts = NULL;
        one.x_scale_parts = NULL;
        one.parts = 0;
        assert_int_equal(run_model_in(&kernel_w4a8_folded, &one, 0, NULL, f, NULL), 0);
        int64_t columns = 0;
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = lo[part]; n < hi[part]; n++, columns++)
                if (p[m * N + n] != f[m * N + n])
                    fail_msg("partition %d, (%lld, %lld): 0x%04x vs folded on copy 0x%04x", part,
                             (long long)m, (long long)n, p[m * N + n], f[m * N + n]);
        /* The copies really differ: outside partition `part` the folded run
         * on this copy disagrees with the partitioned output somewhere. */
        if (hi[part] - lo[part] < N) {
            int64_t differ = 0;
            for (int64_t m = 0; m < M; m++)
                for (int64_t n = 0; n < N; n++)
                    if ((n < lo[part] || n >= hi[part]) && p[m * N + n] != f[m * N + n])
                        differ++;
            assert_true(differ > 0);
        }
    }
    free(p);
    free(f);
    tcase_free(&c);
}

static void test_partitioned_three_copies(void **state)
{
    (void)state;
    check_three_copies(6, 96, 256, NULL, 32, 64, 41);
    check_three_copies(5, 48, 128, NULL, 16, 32, 42);
    const int64_t mid_tile[2] = {16, 80};        /* bounds inside 32-column tiles */
    check_three_copies(7, 96, 192, mid_tile, 16, 80, 43);
    const int64_t uneven[2] = {40, 41};
    check_three_copies(3, 100, 128, uneven, 40, 41, 44);
}

/* ---------------------------------------------------------------- decode, r4d */

static void test_decode_vs_folded(void **state)
{
    (void)state;
    const int64_t M = 16, N = 256, K = 2048;
    int seeds_with_differences = 0, max_ulps = 0;
    for (uint64_t seed = 0; seed < 4; seed++) {
        tcase_t c;
        tcase_random(&c, 50 + seed, M, N, K, 6);
        char note[256];
        uint16_t *f = run_model(&kernel_w4a8_folded, &c, 0, NULL);
        uint16_t *d4 = run_model(&kernel_w4a8_decode, &c, 0, note);    /* default SK = 4 */
        uint16_t *d1 = run_model(&kernel_w4a8_decode, &c, 1, NULL);
        uint16_t *o4 = oracle_split(&c, 4);
        assert_non_null(strstr(note, "decode SK=4 (4 x 512 k)"));
        assert_same_bits(d1, f, M * N, "decode SK=1 vs folded");
        assert_same_bits(d4, o4, M * N, "decode SK=4 vs scalar split-K oracle");
        int64_t hist[6] = {0};
        for (int64_t i = 0; i < M * N; i++) {
            int u = (int)spec_bf16_ulps(d4[i], f[i]);
            hist[u < 5 ? u : 5]++;
            if (u > max_ulps)
                max_ulps = u;
        }
        print_message("seed %llu decode SK=4 vs folded, ULP histogram: 0:%lld 1:%lld 2:%lld "
                      "3:%lld 4:%lld >4:%lld\n",
                      (unsigned long long)seed, (long long)hist[0], (long long)hist[1],
                      (long long)hist[2], (long long)hist[3], (long long)hist[4],
                      (long long)hist[5]);
        if (hist[0] != M * N)
            seeds_with_differences++;
        TEST_FREE_ALL(f, d4, d1, o4);
        tcase_free(&c);
    }
    assert_true(seeds_with_differences > 0);   /* the order matters ... */
    assert_true(max_ulps <= 4);                /* ... by a few ULP at most */
}

static void test_decode_split_constraint(void **state)
{
    (void)state;
    tcase_t c;
    tcase_random(&c, 61, 2, 32, 64, 3);
    kernel_inputs_t in = tcase_inputs(&c);
    uint16_t out[64];
    char note[256];
    assert_int_not_equal(run_model_in(&kernel_w4a8_decode, &in, 4, NULL, out, note), 0);
    assert_non_null(strstr(note, "SK*32"));
    assert_int_equal(run_model_in(&kernel_w4a8_decode, &in, 2, NULL, out, note), 0);
    uint16_t *o2 = oracle_split(&c, 2);
    assert_same_bits(out, o2, 64, "decode SK=2 vs oracle");
    free(o2);
    tcase_free(&c);
}

static void test_r4d_config(void **state)
{
    (void)state;
    /* _r4d_cfg: sk = 8 if M <= 16 else 4, halved while sk > 1 and K % (sk*32);
     * mb = max(1, min(4, (M + 15) // 16)).  5120 = 2^10 * 5 and 3072 = 2^10 * 3
     * take sk * 32 <= 256; 96 = 32 * 3 takes only sk = 1. */
    const int64_t Ms[4] = {1, 16, 17, 64}, Ks[3] = {5120, 3072, 96};
    const int expect_sk[4][3] = {{8, 8, 1}, {8, 8, 1}, {4, 4, 1}, {4, 4, 1}};
    const int expect_mb[4] = {1, 1, 2, 4};
    for (int i = 0; i < 4; i++) {
        for (int j = 0; j < 3; j++) {
            tcase_t c;
            tcase_random(&c, 70 + 3 * i + j, Ms[i], 16, Ks[j], 9);
            char note[256], want[64];
            uint16_t *out = run_model(&kernel_w4a8_r4d, &c, 0, note);
            snprintf(want, sizeof want, "r4d cfg WV=2 SK=%d MB=%d NPW=2", expect_sk[i][j],
                     expect_mb[i]);
            print_message("M=%lld K=%lld: %s\n", (long long)Ms[i], (long long)Ks[j], note);
            assert_non_null(strstr(note, want));
            uint16_t *o = oracle_split(&c, expect_sk[i][j]);
            assert_same_bits(out, o, c.M * c.N, "r4d vs scalar split-K oracle");
            free(o);
            free(out);
            tcase_free(&c);
        }
    }
}

/* Descriptors: the constraints the registry reads. */
static void test_descriptors(void **state)
{
    (void)state;
    const kernel_desc_t *models[] = {&kernel_w4a8_folded, &kernel_w4a8_folded_wperm,
                                     &kernel_w4a8_atiled, &kernel_w4a8_decode, &kernel_w4a8_r4d,
                                     &kernel_w4a8_partitioned};
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        const kernel_desc_t *k = models[i];
        assert_string_equal(k->family, "w4a8");
        assert_int_equal(k->k_multiple, 64);
        assert_int_equal(k->m_min, 1);
        assert_int_equal(k->refs, REF_EXACT | REF_SOURCE);
        assert_true(k->rel_tol_exact == 0.01 && k->rel_tol_source == 0.08);
        assert_true(k->prepare_act == act_prepare_fp8_token);
        assert_non_null(k->accumulation);
        assert_non_null(k->summary);
    }
    assert_int_equal(kernel_w4a8_decode.m_max, 64);
    assert_int_equal(kernel_w4a8_r4d.m_max, 64);
    assert_int_equal(kernel_w4a8_folded.m_max, 0);
    assert_int_equal(kernel_w4a8_atiled.m_max, 0);
}

KR_TEST_MAIN(
    test_layouts_bit_identical, test_fragment_order_needs_n16, test_partitioned_identical_copies,
    test_partitioned_three_copies, test_decode_vs_folded, test_decode_split_constraint,
    test_r4d_config, test_descriptors);
