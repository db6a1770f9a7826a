/* MXFP4 dynamic quantizers: each variant against a double-precision oracle
 * written from its rule (not from the bit tricks), plus hand-worked blocks
 * for every special case: the 1.75 round-up, NaN, Inf, zero, subnormal and
 * FLT_MAX blocks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "formats.h"
#include "quant_mxfp4.h"
#include "spec_formats.h"
#include "test_main.h"
#include "test_support.h"

/* ------------------------------------------------------------------ */
/* Oracles                                                             */
/* ------------------------------------------------------------------ */

/* k with 2^k <= a < 2^(k+1), by scanning (a > 0, finite). */
static int oracle_floor_log2(double a)
{
    for (int k = -160; k < 130; k++)
        if (ldexp(1.0, k) <= a && a < ldexp(1.0, k + 1))
            return k;
    fail_msg("no binade for %a", a);
    return 0;
}

static int oracle_clamp(int e) { return e < -127 ? -127 : (e > 127 ? 127 : e); }

/* docs/NUMERICS.md: amax (NaN ignored) rounded up to the next power of two when
 * its significand is >= 1.75, e = clamp(log2 - 2), then plain RNE of x/2^e
 * with saturation; a quiet NaN (0x7FC00000) lands on +-1.5.  For blocks
 * with at least one non-NaN element. */
static void oracle_aiter_even(const float *x, uint8_t codes[MX_BLOCK], uint8_t *scale)
{
    double amax = 0;
    for (int i = 0; i < MX_BLOCK; i++)
        if (!isnan(x[i]) && fabs((double)x[i]) > amax)
            amax = fabs((double)x[i]);
    int e;
    if (amax == 0) {
        e = -127;
    } else if (isinf(amax)) {
        e = 127;
    } else {
        int k = oracle_floor_log2(amax);
        if (amax / ldexp(1.0, k) >= 1.75)
            k++;
        e = oracle_clamp(k - 2);
    }
    *scale = (uint8_t)(e + 127);
    for (int i = 0; i < MX_BLOCK; i++) {
        uint8_t sign = signbit(x[i]) ? 8 : 0;
        if (isnan(x[i]))
            codes[i] = 3 | sign;
        else
            codes[i] = spec_e2m1_nearest((double)x[i] / ldexp(1.0, e)) | sign;
    }
}

/* OCP MX v1.0 scale (floor(log2 amax) - 2) or the ceil rule (smallest e with
 * 6 * 2^e >= amax); a block with a NaN or Inf gets the NaN scale. */
static void oracle_spec(const float *x, int ceil_rule, uint8_t codes[MX_BLOCK], uint8_t *scale)
{
    double amax = 0;
    for (int i = 0; i < MX_BLOCK; i++) {
        if (!isfinite(x[i])) {
            memset(codes, 0, MX_BLOCK);
            *scale = 0xFF;
            return;
        }
        if (fabs((double)x[i]) > amax)
            amax = fabs((double)x[i]);
    }
    int e = -127;
    if (amax > 0) {
        if (ceil_rule) {
            e = -200;
            while (6.0 * ldexp(1.0, e) < amax)
                e++;
        } else {
            e = oracle_floor_log2(amax) - 2;
        }
        e = oracle_clamp(e);
    }
    *scale = (uint8_t)(e + 127);
    for (int i = 0; i < MX_BLOCK; i++)
        codes[i] = spec_e2m1_nearest((double)x[i] / ldexp(1.0, e));
}

static void oracle_block(const float *x, mxfp4_variant_t v, uint8_t codes[MX_BLOCK],
                         uint8_t *scale)
{
    if (v == MXFP4_AITER_EVEN)
        oracle_aiter_even(x, codes, scale);
    else
        oracle_spec(x, v == MXFP4_CEIL, codes, scale);
}

static void quant_block(const float *x, mxfp4_variant_t v, uint8_t codes[MX_BLOCK], uint8_t *scale)
{
    memset(codes, 0xAA, MX_BLOCK);
    *scale = 0xAA;
    mxfp4_quant_block(x, v, codes, scale);
}

/* quant_block of x under v gives scale byte WANT_S and, in its first n
 * elements, the codes WANT. */
static void expect_block(const float *x, mxfp4_variant_t v, uint8_t want_s, const uint8_t *want, int n)
{
    uint8_t codes[MX_BLOCK], s;
    quant_block(x, v, codes, &s);
    assert_int_equal(s, want_s);
    for (int i = 0; i < n; i++)
        assert_int_equal(codes[i], want[i]);
}

/* ------------------------------------------------------------------ */
/* Tests                                                               */
/* ------------------------------------------------------------------ */

static void test_variant_names(void **state)
{
    (void)state;
    const char *names[] = {"aiter-even", "ocp", "ceil"};
    for (int v = 0; v < MXFP4_VARIANT_COUNT; v++) {
        mxfp4_variant_t got;
        assert_string_equal(mxfp4_variant_name((mxfp4_variant_t)v), names[v]);
        assert_int_equal(mxfp4_variant_from_name(names[v], &got), 0);
        assert_int_equal(got, v);
    }
    mxfp4_variant_t dummy;
    assert_int_equal(mxfp4_variant_from_name("aiter", &dummy), -1);
}

/* amax 6: no round-up (significand 1.5), e = 0 in every variant. */
static void test_block_amax_6(void **state)
{
    (void)state;
    float x[MX_BLOCK] = {6.0f, -3.0f, 1.25f, 0.25f, 0.75f, 5.0f, 0.1f, -0.0f, 1.75f, -2.5f};
    const uint8_t want[10] = {7, 0xD, 2, 0, 2, 6, 0, 8, 4, 0xC};
    for (int v = 0; v < MXFP4_VARIANT_COUNT; v++) {
        uint8_t codes[MX_BLOCK], s;
        quant_block(x, (mxfp4_variant_t)v, codes, &s);
        assert_int_equal(s, 127);
        assert_memory_equal(codes, want, 10);
        for (int i = 10; i < MX_BLOCK; i++)
            assert_int_equal(codes[i], 0);
    }
}

/* amax 7 = 1.75 * 4: aiter rounds it up to 8 (e = 1); OCP keeps e = 0 and
 * saturates; ceil needs 2 * 6 >= 7, e = 1. */
static void test_block_significand_175(void **state)
{
    (void)state;
    float x[MX_BLOCK] = {7.0f, 1.0f, -0.5f};
    uint8_t codes[MX_BLOCK], s;
    /* 3.5 ties to 4, 0.5, -0.25 ties to -0 */
    expect_block(x, MXFP4_AITER_EVEN, 128, (const uint8_t[]){6, 1, 8}, 3);
    expect_block(x, MXFP4_OCP, 127, (const uint8_t[]){7, 2, 9}, 3);
    expect_block(x, MXFP4_CEIL, 128, (const uint8_t[]){6}, 1);

    /* just below 1.75: no round-up, 6.9999995 saturates to 6 */
    x[0] = nextafterf(7.0f, 0.0f);
    quant_block(x, MXFP4_AITER_EVEN, codes, &s);
    assert_int_equal(s, 127);
    assert_int_equal(codes[0], 7);

    /* 1.75 * 2^-3 -> 2^-2, e = -4 */
    float y[MX_BLOCK] = {0.21875f, -0.03125f};
    quant_block(y, MXFP4_AITER_EVEN, codes, &s);
    assert_int_equal(s, 123);
    assert_int_equal(codes[0], 6);   /* 3.5 -> 4 */
    assert_int_equal(codes[1], 9);   /* -0.5 */
}

static void test_block_nan(void **state)
{
    (void)state;
    float x[MX_BLOCK] = {0};
    x[0] = f32_from_bits(0x7FC00000u);
    x[1] = f32_from_bits(0xFFC00000u);
    x[2] = 1.0f;
    uint8_t codes[MX_BLOCK], s;
    quant_block(x, MXFP4_AITER_EVEN, codes, &s);
    assert_int_equal(s, 125);         /* amax 1 ignores the NaNs: e = -2 */
    assert_int_equal(codes[0], 3);    /* +1.5 */
    assert_int_equal(codes[1], 0xB);  /* -1.5 */
    assert_int_equal(codes[2], 6);    /* 4 */
    for (int i = 3; i < MX_BLOCK; i++)
        assert_int_equal(codes[i], 0);
    for (int v = MXFP4_OCP; v <= MXFP4_CEIL; v++) {
        quant_block(x, (mxfp4_variant_t)v, codes, &s);
        assert_int_equal(s, 0xFF);
        for (int i = 0; i < MX_BLOCK; i++)
            assert_int_equal(codes[i], 0);
        float out[MX_BLOCK];
        mxfp4_act_dequant(codes, &s, 1, MX_BLOCK, out);
        for (int i = 0; i < MX_BLOCK; i++)
            assert_true(isnan(out[i]));
    }

    /* The code follows the payload: 0x7FFFFFFF takes the "normal" path to
     * 0x104, whose low bits are 4.  Every payload stays inside 4 bits. */
    x[0] = f32_from_bits(0x7FFFFFFFu);
    quant_block(x, MXFP4_AITER_EVEN, codes, &s);
    assert_int_equal(codes[0], 4);
    test_rng_t rng = {0x4A4Aull};
    for (int i = 0; i < 10000; i++) {
        uint32_t payload = 0x7FC00000u | ((uint32_t)test_rng_u64(&rng) & 0x803FFFFFu);
        x[0] = f32_from_bits(payload);
        quant_block(x, MXFP4_AITER_EVEN, codes, &s);
        assert_int_equal(s, 125);
        assert_true(codes[0] < 16);
    }

    /* All NaN: Triton's max has no NaN-free start value, so amax is NaN,
     * whose bits round to +Inf: scale 254; each NaN still lands on 1.5. */
    for (int i = 0; i < MX_BLOCK; i++)
        x[i] = f32_from_bits(0x7FC00000u);
    quant_block(x, MXFP4_AITER_EVEN, codes, &s);
    assert_int_equal(s, 254);
    for (int i = 0; i < MX_BLOCK; i++)
        assert_int_equal(codes[i], 3);
}

static void test_block_inf(void **state)
{
    (void)state;
    float x[MX_BLOCK] = {INFINITY, -1.0f, 2.0f, -INFINITY, 1e30f};
    uint8_t codes[MX_BLOCK], s;
    /* -1 * 2^-127: -0; 1e30 * 2^-127 ~ 6e-9: 0 */
    expect_block(x, MXFP4_AITER_EVEN, 254, (const uint8_t[]){7, 8, 0, 0xF, 0}, 5);
    for (int v = MXFP4_OCP; v <= MXFP4_CEIL; v++) {
        quant_block(x, (mxfp4_variant_t)v, codes, &s);
        assert_int_equal(s, 0xFF);
    }
}

static void test_block_zero_tiny_huge(void **state)
{
    (void)state;
    float x[MX_BLOCK] = {0};
    uint8_t codes[MX_BLOCK], s;
    for (int v = 0; v < MXFP4_VARIANT_COUNT; v++) {
        quant_block(x, (mxfp4_variant_t)v, codes, &s);
        assert_int_equal(s, 0);
        for (int i = 0; i < MX_BLOCK; i++)
            assert_int_equal(codes[i], 0);
    }

    /* amax 1.5 * 2^-125: every rule gives e = -127 (scale byte 0) and 6 */
    x[0] = 0x1.8p-125f;
    x[1] = -0x1p-128f;
    x[2] = 0x1p-149f;
    for (int v = 0; v < MXFP4_VARIANT_COUNT; v++) {
        quant_block(x, (mxfp4_variant_t)v, codes, &s);
        assert_int_equal(s, 0);
        assert_int_equal(codes[0], 7);
        assert_int_equal(codes[1], 9);  /* -0.5 */
        assert_int_equal(codes[2], 0);
    }

    /* FLT_MAX: aiter's rounded amax is +Inf (e = 127); OCP e = 125; ceil 126 */
    x[0] = FLT_MAX;
    x[1] = -0x1p126f;
    x[2] = 0.0f;
    quant_block(x, MXFP4_AITER_EVEN, codes, &s);
    assert_int_equal(s, 254);
    assert_int_equal(codes[0], 4);     /* ~1.99999988 -> 2 */
    assert_int_equal(codes[1], 9);     /* -0.5 */
    quant_block(x, MXFP4_OCP, codes, &s);
    assert_int_equal(s, 252);
    assert_int_equal(codes[0], 7);     /* ~7.99999952 saturates */
    assert_int_equal(codes[1], 0xC);   /* -2 */
    quant_block(x, MXFP4_CEIL, codes, &s);
    assert_int_equal(s, 253);
    assert_int_equal(codes[0], 6);     /* ~3.99999976 -> 4 */
}

/* A block whose values sit at one magnitude, with amax optionally pinned at
 * or just below a significand of 1.75, and some zeros and sign flips. */
static void random_block(test_rng_t *rng, float x[MX_BLOCK])
{
    int exponent = -140 + (int)(test_rng_u64(rng) % 265);
    for (int i = 0; i < MX_BLOCK; i++) {
        double v = test_rng_normal(rng);
        if (test_rng_u64(rng) % 8 == 0)
            v = 0.0;
        x[i] = (float)ldexp(v, exponent);
        if (isinf(x[i]))
            x[i] = copysignf(FLT_MAX, x[i]);
    }
    uint64_t shape = test_rng_u64(rng) % 6;
    int j = (int)(test_rng_u64(rng) % MX_BLOCK);
    float pinned = (float)ldexp(1.75, exponent > 120 ? 120 : exponent);
    if (shape == 0)
        x[j] = pinned;
    else if (shape == 1)
        x[j] = -nextafterf(pinned, 0.0f);
    else if (shape == 2)
        x[j] = (float)ldexp(1.5, exponent > 120 ? 120 : exponent); /* 6 * 2^(k-2) */
}

static void test_random_blocks_vs_oracle(void **state)
{
    (void)state;
    test_rng_t rng = {0x3EF4ull};
    long long failures = 0;
    for (int b = 0; b < 200000; b++) {
        float x[MX_BLOCK];
        random_block(&rng, x);
        if (b % 50 == 0) /* a quiet NaN somewhere, still at least one number */
            x[b % 31] = (b & 64) ? f32_from_bits(0xFFC00000u) : f32_from_bits(0x7FC00000u);
        for (int v = 0; v < MXFP4_VARIANT_COUNT; v++) {
            uint8_t got[MX_BLOCK], want[MX_BLOCK], gs, ws;
            quant_block(x, (mxfp4_variant_t)v, got, &gs);
            oracle_block(x, (mxfp4_variant_t)v, want, &ws);
            if (gs != ws || memcmp(got, want, MX_BLOCK) != 0) {
                if (failures < 5) {
                    int i = 0;
                    while (i < MX_BLOCK - 1 && got[i] == want[i])
                        i++;
                    print_error("variant %d block %d: scale %d/%d, elem %d x=%a code %x/%x\n",
                                v, b, gs, ws, i, (double)x[i], got[i], want[i]);
                }
                failures++;
            }
        }
    }
    assert_int_equal(failures, 0);
}

/* Matrix entry points: [M, K] codes, [M, K/32] scales, dequant by formula. */
static void test_matrix_quant_and_dequant(void **state)
{
    (void)state;
    enum { M = 5, K = 128, B = K / 32 };
    float x[M * K], out[M * K];
    uint8_t codes[M * K], scales[M * B];
    test_rng_t rng = {0xD00Dull};
    for (int i = 0; i < M * K; i++)
        x[i] = (float)(test_rng_normal(&rng) * pow(2.0, (i / 32) % 7 - 3));
    for (int v = 0; v < MXFP4_VARIANT_COUNT; v++) {
        mxfp4_quant(x, M, K, (mxfp4_variant_t)v, codes, scales);
        mxfp4_act_dequant(codes, scales, M, K, out);
        for (int m = 0; m < M; m++) {
            for (int b = 0; b < B; b++) {
                uint8_t want[MX_BLOCK], ws;
                oracle_block(x + m * K + b * 32, (mxfp4_variant_t)v, want, &ws);
                assert_int_equal(scales[m * B + b], ws);
                assert_memory_equal(codes + m * K + b * 32, want, MX_BLOCK);
                for (int i = 0; i < MX_BLOCK; i++) {
                    uint8_t c = want[i];
                    double mag = spec_e2m1((uint8_t)(c & 7)) * ldexp(1.0, ws - 127);
                    double expect = (c & 8) ? -mag : mag;
                    assert_true((double)out[m * K + b * 32 + i] == expect);
                    /* and within the block's largest half step or saturation gap */
                    double err = fabs(out[m * K + b * 32 + i] - (double)x[m * K + b * 32 + i]);
                    assert_true(err <= ldexp(2.0, ws - 127)); /* OCP saturates (6, 8) */
                }
            }
        }
    }

    /* dequant anchors: scale 0 is 2^-127 (spec), 0xFF is NaN */
    uint8_t c2[64] = {7, 0xD, 1};
    uint8_t s2[2] = {128, 0};
    c2[32] = 1;
    float o2[64];
    mxfp4_act_dequant(c2, s2, 1, 64, o2);
    assert_true(o2[0] == 12.0f);
    assert_true(o2[1] == -6.0f);
    assert_true(o2[2] == 1.0f);
    assert_true(o2[32] == 0x1p-128f);
    s2[1] = 0xFF;
    mxfp4_act_dequant(c2, s2, 1, 64, o2);
    assert_true(isnan(o2[33]));
}

KR_TEST_MAIN(
    test_variant_names, test_block_amax_6, test_block_significand_175, test_block_nan,
    test_block_inf, test_block_zero_tiny_huge, test_random_blocks_vs_oracle,
    test_matrix_quant_and_dequant);
