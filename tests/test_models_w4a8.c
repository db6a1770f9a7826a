/* The W4A8 folded family of CPU models (w4a8.folded, .folded.wperm, .atiled,
 * .decode, .r4d and .partitioned; cases and models in support/w4a8_cases.c):
 * w4a8.folded against hand-worked cases and an fp64 oracle.  The layouts,
 * partitions and split-K variants: test_models_w4a8_variants.c.
 *
 * Oracles, all independent of the models' code: hand-worked cases whose
 * expected bf16 bits are derived in the comments, and an fp64/long double GEMM
 * on operands this file decodes itself from the spec's formulas (fp8, e2m1,
 * e8m0, the e4m3 rounding of the pre-shifted weight), and a plain scalar
 * re-implementation of the split-K order (support/w4a8_cases.c). */
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

/* ---------------------------------------------------------------- oracles */

/* W in double [N][K]: exact MXFP4 values, or (folded) the pre-shifted,
 * e4m3-rounded weight times 2^(ref - 127). */
static double *oracle_weight(const tcase_t *c, int folded)
{
    const int64_t N = c->N, K = c->K;
    double *w = malloc((size_t)(N * K) * sizeof(double));
    for (int64_t n = 0; n < N; n++) {
        const int ref = row_ref(c, n);
        for (int64_t k = 0; k < K; k++) {
            const int e = c->scales[n * (K / 32) + k / 32];
            const double v = spec_e2m1(c->wcodes[n * K + k]);
            w[n * K + k] = folded ? spec_e4m3_round(ldexp(v, e - ref)) * ldexp(1.0, ref - 127)
                                  : ldexp(v, e - 127);
        }
    }
    return w;
}

/* Activation copy of column n's partition (p = 0 when there are no parts). */
static void oracle_act(const tcase_t *c, int p, const uint8_t **codes, const float **scale)
{
    if (c->parts) {
        *codes = c->parts + p * c->M * c->K;
        *scale = c->parts_scale + p * c->M;
    } else {
        *codes = c->x;
        *scale = c->xs;
    }
}

/* Each element of `out` within 2^-8 bf16 rounding plus fp32 accumulation
 * error ((K + 2) u sum|x w|) of the long double product of the operands
 * (with W from oracle_weight).  Returns the number of elements outside. */
static int64_t oracle_check(const tcase_t *c, const double *W, const uint16_t *out,
                            const int64_t *pb, double *rel_fro)
{
    const int64_t M = c->M, N = c->N, K = c->K;
    int64_t bad = 0;
    long double num = 0, den = 0;
    for (int64_t n = 0; n < N; n++) {
        const int p = pb ? (n < pb[0] ? 0 : n < pb[1] ? 1 : 2) : 0;
        const uint8_t *codes;
        const float *scale;
        oracle_act(c, p, &codes, &scale);
        for (int64_t m = 0; m < M; m++) {
            long double acc = 0, mag = 0;
            for (int64_t k = 0; k < K; k++) {
                long double t = (long double)spec_e4m3fn(codes[m * K + k]) * scale[m] * W[n * K + k];
                acc += t;
                mag += fabsl(t);
            }
            const double o = spec_bf16(out[m * N + n]);
            const long double e1 = (long double)(K + 2) * ldexp(1.0, -24) * mag;
            const long double bound = ldexp(1.0, -8) * (fabsl(acc) + e1) + e1 + 1e-38L;
            if (fabsl((long double)o - acc) > bound * 1.0001L)
                bad++;
            num += ((long double)o - acc) * ((long double)o - acc);
            den += acc * acc;
        }
    }
    if (rel_fro)
        *rel_fro = (double)sqrtl(num / den);
    return bad;
}
/* ---------------------------------------------------------------- hand-worked cases */

/* M=2, N=2, K=64 (two blocks per row).
 *   x row 0: x[0] = 2^-6 (0x08), x[32..37] = 1 (0x38), else 0; x_scale[0] = 0.5
 *   x row 1: x[0] = -448 (0xFE), x[36] = 448 (0x7E), else 0;     x_scale[1] = 1
 * Row n=0: E = {130, 120}: ref = 130, block 1 sits 10 binades below.
 *   w[0] = 1; w[32..37] = 0.5, 1, 1.5, 0, 6, -2.  Pre-shifted by 2^-10 into e4m3fn
 *   (subnormal step 2^-9, half step 2^-10):
 *     0.5 * 2^-10 = 2^-11  -> 0          (below half a step)
 *     1   * 2^-10 = 2^-10  -> 0          (tie, to even)
 *     1.5 * 2^-10          -> 2^-9       (0.75 step rounds up: lost bits)
 *     6   * 2^-10 = 3*2^-9 -> exact
 *    -2   * 2^-10 = -2^-9  -> exact
 *   (0,0): acc = 2^-6 + 0 + 0 + 2^-9 + 0 + 3*2^-9 - 2^-9 = 11*2^-9 (exact sums);
 *          scale = 0.5 * 2^(130-127) = 4; out = 11*2^-7 = 1.375*2^-4 -> bf16 0x3DB0.
 *          The exact product is (2^-6 + 7*2^-10) * 4 = 23*2^-8 -> 0x3DB8 (per-block's answer).
 *   (1,0): acc = -448*1 + 448*(3*2^-9) = -445.375; scale 1 * 8 -> -3563
 *          = -1.7397...*2^11 -> 7 fraction bits: 94.69 -> 95 -> bf16 0xC55F.
 * Row n=1: E = {127, 119}: ref = 127, block 1 exactly 8 binades below (exact).
 *   w[0] = 6; w[32] = 0.5 -> 2^-9, w[33] = 1.5 -> 3*2^-9, w[35] = -6 -> -12*2^-9.
 *   (0,1): acc = 6*2^-6 (= 48*2^-9) + 1*2^-9 + 3*2^-9 - 12*2^-9 = 40*2^-9 = 5*2^-6;
 *          scale 0.5 * 1 -> 5*2^-7 = 1.25*2^-5 -> bf16 0x3D20.
 *   (1,1): acc = -448*6 = -2688 (w[36] = 0); scale 1 -> -1.3125*2^11 -> bf16 0xC528.
 * Statistic: 1 of 4 blocks > 8 binades below; nonzero weights 6 + 4 = 10, of
 * which 3 changed (0.5 and 1 -> 0, 1.5 -> 2^-9): 30.00%. */
static void hand_case_1(tcase_t *c)
{
    tcase_alloc(c, 2, 2, 64);
    c->x[0] = 0x08;
    for (int k = 32; k <= 37; k++)
        c->x[k] = 0x38;
    c->xs[0] = 0.5f;
    c->x[64 + 0] = 0xFE;
    c->x[64 + 36] = 0x7E;
    c->xs[1] = 1.0f;
    c->scales[0] = 130;
    c->scales[1] = 120;
    c->scales[2] = 127;
    c->scales[3] = 119;
    uint8_t *w0 = c->wcodes, *w1 = c->wcodes + 64;
    w0[0] = 0x2;                                    /* 1 */
    w0[32] = 0x1;                                   /* 0.5 */
    w0[33] = 0x2;                                   /* 1 */
    w0[34] = 0x3;                                   /* 1.5 */
    w0[36] = 0x7;                                   /* 6 */
    w0[37] = 0xC;                                   /* -2 */
    w1[0] = 0x7;                                    /* 6 */
    w1[32] = 0x1;                                   /* 0.5 */
    w1[33] = 0x3;                                   /* 1.5 */
    w1[35] = 0xF;                                   /* -6 */
    tcase_pack(c);
}

static void test_hand_underflow_10_binades(void **state)
{
    (void)state;
    tcase_t c;
    hand_case_1(&c);
    /* out[m][n], row-major [M][N]. */
    const uint16_t expected[4] = {0x3DB0, 0x3D20, 0xC55F, 0xC528};
    char note[256];
    const kernel_desc_t *models[] = {&kernel_w4a8_folded, &kernel_w4a8_atiled,
                                     &kernel_w4a8_partitioned};
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        uint16_t *out = run_model(models[i], &c, 0, note);
        print_message("%s: %04x %04x %04x %04x | %s\n", models[i]->name, out[0], out[1], out[2],
                      out[3], note);
        assert_same_bits(out, expected, 4, models[i]->name);
        assert_non_null(strstr(note, "folded underflow: 1/4 blocks (25.00%)"));
        assert_non_null(strstr(note, "30.00% of nonzero weights lost bits"));
        free(out);
    }
    /* Decode with 2 splits (K = 2 x 32): every partial sum above is exact, so
     * the split order cannot change these bits. */
    uint16_t *out = run_model(&kernel_w4a8_decode, &c, 2, note);
    assert_same_bits(out, expected, 4, "w4a8.decode SK=2");
    free(out);
    /* The per-block path keeps the lost bits: (0,0) is the exact 23*2^-8. */
    out = run_model(&kernel_w4a8_perblock, &c, 0, NULL);
    assert_int_equal(out[0], 0x3DB8);
    assert_int_equal(out[2], 0xC55F);
    free(out);
    tcase_free(&c);
}

/* The case's weight_ref is honoured, including inconsistent values.
 * M=1, N=2, K=64; x[0] = 1 (0x38), x[1] = 0.5 (0x30), x[32] = 2 (0x40); x_scale = 1.
 * Row 0: E = {130, 130}, weight_ref = 123 (7 binades BELOW the blocks):
 *   w[0] = 6 -> 6*2^7 = 768 > 448: saturates to 448; w[1] = 2 -> 256 (exact);
 *   w[32] = -1 -> -128 (exact).
 *   acc = 448*1 + 256*0.5 - 128*2 = 320; scale 2^(123-127) = 2^-4 -> 20 -> bf16 0x41A0
 *   (the unsaturated product is 40 -> 0x4220).
 * Row 1: E = {127, 127}, weight_ref = 137 (every block 10 binades below):
 *   w[0] = 3 -> 3*2^-10 = 1.5*2^-9 -> tie, to even: 2*2^-9 = 2^-8;
 *   w[1] = 1 -> 2^-10 -> tie -> 0;  w[32] = 6 -> 3*2^-9 (exact).
 *   acc = 2^-8 + 0 + 2 * 3*2^-9 = 8*2^-9 = 2^-6; scale 2^10 -> 16 -> bf16 0x4180
 *   (the exact product is 15.5 -> 0x4178).
 * Statistic: blocks 2/4 below by > 8, 2 above weight_ref; nonzero 6, changed 3 (50.00%). */
static void test_hand_weight_ref_saturation(void **state)
{
    (void)state;
    tcase_t c;
    tcase_alloc(&c, 1, 2, 64);
    c.x[0] = 0x38;
    c.x[1] = 0x30;
    c.x[32] = 0x40;
    c.xs[0] = 1.0f;
    c.scales[0] = c.scales[1] = 130;
    c.scales[2] = c.scales[3] = 127;
    c.wcodes[0] = 0x7;
    c.wcodes[1] = 0x4;
    c.wcodes[32] = 0xA;
    c.wcodes[64 + 0] = 0x5;
    c.wcodes[64 + 1] = 0x2;
    c.wcodes[64 + 32] = 0x7;
    tcase_pack(&c);
    c.wref = malloc(2);
    c.wref[0] = 123;
    c.wref[1] = 137;
    char note[256];
    uint16_t *out = run_model(&kernel_w4a8_folded, &c, 0, note);
    print_message("w4a8.folded: %04x %04x | %s\n", out[0], out[1], note);
    assert_int_equal(out[0], 0x41A0);
    assert_int_equal(out[1], 0x4180);
    assert_non_null(strstr(note, "ref = case weight_ref"));
    assert_non_null(strstr(note, "2/4 blocks (50.00%)"));
    assert_non_null(strstr(note, "50.00% of nonzero weights lost bits"));
    assert_non_null(strstr(note, "2 blocks above weight_ref"));
    free(out);
    /* A weight_ref of another length (1 = aiter's marker, 2 = the per-block
     * marker) is not a row reference: ref falls back to the row max and
     * nothing is lost here: (0,0) = (6 + 1 - 2) * 2^3 = 40 -> 0x4220;
     * (0,1) = 3 + 0.5 + 12 = 15.5 -> 0x4178. */
    kernel_inputs_t in = tcase_inputs(&c);
    in.weight_ref_len = 1;
    uint16_t out2[2] = {0};
    assert_int_equal(run_model_in(&kernel_w4a8_folded, &in, 0, NULL, out2, note), 0);
    assert_int_equal(out2[0], 0x4220);
    assert_int_equal(out2[1], 0x4178);
    assert_null(strstr(note, "weight_ref"));
    tcase_free(&c);
}

/* One 16-column group whose lanes take every decode path at once: rows whose
 * blocks are exact, rows that round (blocks 9..12 binades below the row ref),
 * rows with a weight_ref below their top block (negative shifts: looked up
 * from the table, some saturating at 448).  The vector decode splits such a
 * group lane by lane, so it is checked bit for bit against the scalar
 * spec order (oracle_split, one K range) and its statistic is counted here. */
static void test_folded_mixed_lanes(void **state)
{
    (void)state;
    const int64_t M = 5, N = 48, K = 256, nb = K / 32;
    tcase_t c;
    tcase_random(&c, 31, M, N, K, 12);
    c.wref = malloc((size_t)N);
    int rows_below = 0;
    for (int64_t n = 0; n < N; n++) {
        const int top = c.scales[n * nb];          /* block 0 holds the row max */
        if (n % 3 == 2) {
            c.wref[n] = (uint8_t)(top - 1 - (n / 3) % 8);   /* 1..8 binades under the top */
            rows_below++;
        } else {
            c.wref[n] = (uint8_t)(top + (n % 3) + (n / 3) % 2);
        }
    }
    char note[256];
    uint16_t *out = run_model(&kernel_w4a8_folded, &c, 0, note);
    uint16_t *spec = oracle_split(&c, 1);
    print_message("%s\n", note);
    assert_same_bits(out, spec, M * N, "folded vs scalar spec order, mixed lanes");
    double *W_folded = oracle_weight(&c, 1);
    assert_int_equal(oracle_check(&c, W_folded, out, NULL, NULL), 0);
    int64_t nonzero = 0, changed = 0, over = 0, saturated = 0;
    for (int64_t n = 0; n < N; n++) {
        const int ref = row_ref(&c, n);
        for (int64_t b = 0; b < nb; b++)
            over += c.scales[n * nb + b] > ref;
        for (int64_t k = 0; k < K; k++) {
            const uint8_t code = c.wcodes[n * K + k];
            if (!(code & 7))
                continue;
            nonzero++;
            const double v = ldexp(spec_e2m1(code), c.scales[n * nb + k / 32] - ref);
            changed += spec_e4m3_round(v) != v;
            saturated += fabs(v) > 448;
        }
    }
    /* The case reaches every path: saturation, rounding and exact rows. */
    assert_true(rows_below > 0 && over > 0 && saturated > 0);
    assert_true(changed > saturated);
    char expect[96];
    snprintf(expect, sizeof expect, "%.2f%% of nonzero weights lost bits",
             100.0 * (double)changed / (double)nonzero);
    assert_non_null(strstr(note, expect));
    snprintf(expect, sizeof expect, "%lld blocks above weight_ref", (long long)over);
    assert_non_null(strstr(note, expect));
    TEST_FREE_ALL(out, spec, W_folded);
    tcase_free(&c);
}

/* ---------------------------------------------------------------- fp64 oracle */

static void test_oracle_exact_folding(void **state)
{
    (void)state;
    /* spread <= 8: folding is exact, so every model must be within bf16 +
     * fp32-accumulation error of the exact MXFP4 product. */
    tcase_t c;
    tcase_random(&c, 11, 7, 64, 512, 8);
    double *W = oracle_weight(&c, 0);
    const kernel_desc_t *models[] = {&kernel_w4a8_folded, &kernel_w4a8_folded_wperm,
                                     &kernel_w4a8_atiled, &kernel_w4a8_decode, &kernel_w4a8_r4d,
                                     &kernel_w4a8_partitioned, &kernel_w4a8_perblock};
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        char note[256];
        uint16_t *out = run_model(models[i], &c, 0, note);
        double rel;
        int64_t bad = oracle_check(&c, W, out, NULL, &rel);
        print_message("%-18s rel_fro vs exact %.3e, %lld outside the bound | %s\n",
                      models[i]->name, rel, (long long)bad, note);
        assert_int_equal(bad, 0);
        assert_true(rel > 0 && rel < ldexp(1.0, -8));
        if (models[i] != &kernel_w4a8_perblock)
            assert_non_null(strstr(note, "folded underflow: 0/1024 blocks (0.00%)"));
        free(out);
    }
    /* Partitioned with three different copies: column n against copy p(n). */
    tcase_add_parts(&c, 12);
    char note[256];
    uint16_t *out = run_model(&kernel_w4a8_partitioned, &c, 0, note);
    const int64_t pb[2] = {16, 32};     /* 64/3 = 21 -> 16; 128/3 = 42 -> 32 */
    double rel;
    int64_t bad = oracle_check(&c, W, out, pb, &rel);
    print_message("w4a8.partitioned (3 copies) rel_fro %.3e, %lld outside | %s\n", rel,
                  (long long)bad, note);
    assert_int_equal(bad, 0);
    assert_non_null(strstr(note, "partitions n<16, n<32, n<64"));
    assert_non_null(strstr(note, "3 recorded activation copies"));
    free(out);
    free(W);
    tcase_free(&c);
}

/* Spread exponents whose low blocks carry most of the product: the model is
 * far from the exact MXFP4 product, and the whole deviation is the folded
 * underflow: against the product of the pre-shifted-then-rounded weights it
 * is within bf16 rounding everywhere. */
static void test_oracle_underflow_explained(void **state)
{
    (void)state;
    const int64_t M = 4, N = 32, K = 256, nb = K / 32;
    tcase_t c;
    tcase_random(&c, 21, M, N, K, 0);
    test_rng_t r = {22};
    for (int64_t n = 0; n < N; n++)
        for (int64_t b = 1; b < nb; b++)    /* 9..12 binades below the row max */
            c.scales[n * nb + b] = (uint8_t)(c.scales[n * nb] - 9 - (int)(test_rng_u64(&r) % 4));
    for (int64_t m = 0; m < M; m++)
        for (int64_t k = 0; k < K; k++) {
            uint8_t mag = k < 32 ? (uint8_t)(test_rng_u64(&r) % 0x18)          /* <= 2^-4 */
                                 : (uint8_t)(0x60 + test_rng_u64(&r) % 0x1F);  /* 16 .. 448 */
            c.x[m * K + k] = mag | (uint8_t)(test_rng_u64(&r) & 0x80);
        }
    char note[256];
    uint16_t *out = run_model(&kernel_w4a8_folded, &c, 0, note);
    double *W_exact = oracle_weight(&c, 0), *W_folded = oracle_weight(&c, 1);
    double rel_exact, rel_folded;
    int64_t bad_exact = oracle_check(&c, W_exact, out, NULL, &rel_exact);
    int64_t bad_folded = oracle_check(&c, W_folded, out, NULL, &rel_folded);
    print_message("vs exact MXFP4: rel %.3e, %lld/%lld outside bf16+fp32 bound; "
                  "vs pre-shifted e4m3 weights: rel %.3e, %lld outside | %s\n",
                  rel_exact, (long long)bad_exact, (long long)(M * N), rel_folded,
                  (long long)bad_folded, note);
    assert_int_equal(bad_folded, 0);
    assert_true(bad_exact > M * N / 2);
    assert_true(rel_exact > 0.01);
    /* The statistic, counted here from the spec. */
    int64_t nonzero = 0, changed = 0;
    for (int64_t n = 0; n < N; n++) {
        const int ref = row_ref(&c, n);
        for (int64_t k = 0; k < K; k++) {
            const uint8_t code = c.wcodes[n * K + k];
            if (!(code & 7))
                continue;
            nonzero++;
            double v = ldexp(spec_e2m1(code), c.scales[n * nb + k / 32] - ref);
            changed += spec_e4m3_round(v) != v;
        }
    }
    char expect[160];
    snprintf(expect, sizeof expect,
             "folded underflow: %lld/%lld blocks (87.50%%) >8 binades below row ref; "
             "%.2f%% of nonzero weights lost bits",
             (long long)(N * (nb - 1)), (long long)(N * nb), 100.0 * (double)changed / (double)nonzero);
    print_message("expected note: %s\n", expect);
    assert_non_null(strstr(note, expect));
    TEST_FREE_ALL(W_exact, W_folded, out);
    tcase_free(&c);
}

KR_TEST_MAIN(
    test_hand_underflow_10_binades, test_hand_weight_ref_saturation, test_folded_mixed_lanes,
    test_oracle_exact_folding, test_oracle_underflow_explained);
