/* Per-token fp8 quantizers: hand-worked rows (scales worked out in fp32 by
 * hand, bit patterns written down), NaN and Inf under every variant, a
 * random round-trip error bound in double, and the one-code tie difference
 * between division and reciprocal multiplication. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "formats.h"
#include "quant_fp8.h"
#include "test_main.h"
#include "test_support.h"

static int is_fn_nan_code(uint8_t c) { return (c & 0x7F) == 0x7F; }

/* Row X of N elements quantized by V into F gives exactly the scale WANT_S
 * and the codes WANT. */
static void expect_row(const float *x, int n, fp8_token_variant_t v, fp8_format_t f, float want_s,
                       const uint8_t *want)
{
    uint8_t q[8];
    float s;
    assert_true(n <= (int)sizeof q);
    fp8_token_quant_row(x, n, v, f, q, &s);
    assert_true(s == want_s);
    assert_memory_equal(q, want, (size_t)n);
}

static void test_variant_names(void **state)
{
    (void)state;
    const char *names[] = {"vllm", "traced", "pure", "reciprocal"};
    for (int v = 0; v < FP8_TOKEN_VARIANT_COUNT; v++) {
        fp8_token_variant_t got;
        assert_string_equal(fp8_token_variant_name((fp8_token_variant_t)v), names[v]);
        assert_int_equal(fp8_token_variant_from_name(names[v], &got), 0);
        assert_int_equal(got, v);
    }
    fp8_token_variant_t dummy = FP8_TOKEN_VLLM;
    assert_int_equal(fp8_token_variant_from_name("VLLM", &dummy), -1);
    assert_int_equal(fp8_token_variant_from_name("", &dummy), -1);
}

/* amax 448 -> scale exactly 1 in every variant (448 * fp32(1/448) rounds
 * to 1.0f), codes are the plain encodings. */
static void test_row_amax_448(void **state)
{
    (void)state;
    const float x[6] = {448.0f, -224.0f, 1.0f, 0.5f, -0.0f, 0x1p-9f};
    const uint8_t want[6] = {0x7E, 0xF6, 0x38, 0x30, 0x80, 0x01};
    for (int v = 0; v < FP8_TOKEN_VARIANT_COUNT; v++)
        expect_row(x, 6, (fp8_token_variant_t)v, FP8_E4M3FN, 1.0f, want);
}

/* Scale constants: vLLM divides (3/448 -> 0x3bdb6db7), torch multiplies by
 * fp32(1/448) = 0x3b124925 (3 * that -> 0x3bdb6db8, one ulp above). */
static void test_scale_division_vs_reciprocal_constant(void **state)
{
    (void)state;
    const float x[2] = {3.0f, -1.0f};
    uint8_t q[2];
    float s;
    fp8_token_quant_row(x, 2, FP8_TOKEN_VLLM, FP8_E4M3FN, q, &s);
    assert_int_equal(f32_bits(s), 0x3BDB6DB7u);
    fp8_token_quant_row(x, 2, FP8_TOKEN_RECIPROCAL, FP8_E4M3FN, q, &s);
    assert_int_equal(f32_bits(s), 0x3BDB6DB7u);
    fp8_token_quant_row(x, 2, FP8_TOKEN_TRACED, FP8_E4M3FN, q, &s);
    assert_int_equal(f32_bits(s), 0x3BDB6DB8u);
    fp8_token_quant_row(x, 2, FP8_TOKEN_PURE, FP8_E4M3FN, q, &s);
    assert_int_equal(f32_bits(s), 0x3BDB6DB8u);
}

/* A row of 2^-20: amax/448 is far below 1/(448*512) = 0x36924925.
 * vllm/traced/reciprocal take the floor: x/s = 0.21874999 -> 0.21875 = 0x26.
 * pure has no floor: s = 2^-20 * fp32(1/448), x/s = 447.99997 -> 448 = 0x7E. */
static void test_row_min_scale_floor(void **state)
{
    (void)state;
    float x[4] = {0x1p-20f, -0x1p-20f, 0x1p-21f, 0.0f};
    uint8_t q[4];
    float s;
    for (int v = 0; v < FP8_TOKEN_VARIANT_COUNT; v++) {
        fp8_token_quant_row(x, 4, (fp8_token_variant_t)v, FP8_E4M3FN, q, &s);
        if (v == FP8_TOKEN_PURE) {
            assert_int_equal(f32_bits(s), 0x31124925u);
            assert_int_equal(q[0], 0x7E);
            assert_int_equal(q[1], 0xFE);
            assert_int_equal(q[2], 0x76); /* 224 */
        } else {
            assert_int_equal(f32_bits(s), 0x36924925u);
            assert_int_equal(q[0], 0x26);
            assert_int_equal(q[1], 0xA6);
            assert_int_equal(q[2], 0x1E); /* 0.109375 = 1.75 * 2^-4 */
        }
        assert_int_equal(q[3], 0x00);
    }
    /* pure's own floor: an all-zero row gets 1e-12f * fp32(1/448) */
    float zeros[3] = {0.0f, 0.0f, 0.0f};
    fp8_token_quant_row(zeros, 3, FP8_TOKEN_PURE, FP8_E4M3FN, q, &s);
    assert_true(s == 1e-12f * f32_from_bits(0x3B124925u));
    assert_int_equal(q[0], 0);
}

static void test_row_with_nan(void **state)
{
    (void)state;
    const float x[4] = {1.0f, NAN, -2.0f, 448.0f};
    uint8_t q[4];
    float s;
    /* vLLM: amax ignores the NaN (fmaxf); fminf(NaN, 448) = 448 */
    const uint8_t want_vllm[4] = {0x38, 0x7E, 0xC0, 0x7E};
    expect_row(x, 4, FP8_TOKEN_VLLM, FP8_E4M3FN, 1.0f, want_vllm);
    expect_row(x, 4, FP8_TOKEN_RECIPROCAL, FP8_E4M3FN, 1.0f, want_vllm);
    /* torch: amax is NaN, so the scale and every code are NaN */
    const fp8_token_variant_t torch_variants[2] = {FP8_TOKEN_TRACED, FP8_TOKEN_PURE};
    for (int i = 0; i < 2; i++) {
        fp8_token_quant_row(x, 4, torch_variants[i], FP8_E4M3FN, q, &s);
        assert_true(isnan(s));
        for (int k = 0; k < 4; k++)
            assert_true(is_fn_nan_code(q[k]));
        fp8_token_quant_row(x, 4, torch_variants[i], FP8_E4M3FNUZ, q, &s);
        assert_true(isnan(s));
        for (int k = 0; k < 4; k++)
            assert_int_equal(q[k], 0x80);
    }
    /* -NaN also becomes +Q under vLLM */
    const float y[2] = {-NAN, 1.0f};
    fp8_token_quant_row(y, 2, FP8_TOKEN_VLLM, FP8_E4M3FN, q, &s);
    assert_int_equal(q[0], 0x7E);
}

static void test_row_with_inf(void **state)
{
    (void)state;
    const float x[4] = {INFINITY, 1.0f, -3.0f, -INFINITY};
    uint8_t q[4];
    float s;
    /* vLLM: s = Inf; Inf/Inf = NaN -> +448 (for -Inf too); finite/Inf = +-0 */
    fp8_token_quant_row(x, 4, FP8_TOKEN_VLLM, FP8_E4M3FN, q, &s);
    assert_true(isinf(s) && s > 0);
    const uint8_t want_vllm[4] = {0x7E, 0x00, 0x80, 0x7E};
    assert_memory_equal(q, want_vllm, 4);
    /* torch: Inf/Inf = NaN survives the clamp; finite elements become +-0 */
    fp8_token_quant_row(x, 4, FP8_TOKEN_TRACED, FP8_E4M3FN, q, &s);
    assert_true(isinf(s));
    assert_true(is_fn_nan_code(q[0]) && is_fn_nan_code(q[3]));
    assert_int_equal(q[1], 0x00);
    assert_int_equal(q[2], 0x80);
}

/* fnuz: Q = 224, floor 1/(224*512). */
static void test_row_fnuz(void **state)
{
    (void)state;
    const float x[4] = {224.0f, -112.0f, 1.0f, NAN};
    uint8_t q[4];
    float s;
    const uint8_t want[4] = {0x7E, 0xF6, 0x40, 0x7E};
    expect_row(x, 4, FP8_TOKEN_VLLM, FP8_E4M3FNUZ, 1.0f, want);
    const float tiny[1] = {0x1p-20f};
    fp8_token_quant_row(tiny, 1, FP8_TOKEN_VLLM, FP8_E4M3FNUZ, q, &s);
    assert_true(s == 1.0f / (224.0f * 512.0f));
}

/* The dequantized row is x to within half an fp8 step (relative 2^-4 for
 * normals, 2^-10 * s for fnuz/2^-9 * s halves for subnormals), judged in
 * double, for every variant and both formats. */
static void test_random_rows_round_trip(void **state)
{
    (void)state;
    enum { M = 64, K = 256 };
    float *x = malloc(sizeof(float) * M * K), *back = malloc(sizeof(float) * M * K);
    uint8_t *q = malloc(M * K);
    float scale[M];
    test_rng_t rng = {0xF8F8ull};
    for (int m = 0; m < M; m++) {
        double magnitude = pow(10.0, -4.0 + 8.0 * test_rng_uniform(&rng));
        for (int k = 0; k < K; k++)
            x[m * K + k] = (float)(test_rng_normal(&rng) * magnitude);
    }
    for (int f = FP8_E4M3FN; f <= FP8_E4M3FNUZ; f++) {
        int min_normal_exp = f == FP8_E4M3FN ? -6 : -7;
        for (int v = 0; v < FP8_TOKEN_VARIANT_COUNT; v++) {
            fp8_token_quant(x, M, K, (fp8_token_variant_t)v, (fp8_format_t)f, q, scale);
            fp8_token_dequant(q, scale, M, K, (fp8_format_t)f, back);
            long long bad = 0;
            for (int m = 0; m < M; m++) {
                double s = scale[m];
                assert_true(isfinite(s) && s > 0);
                for (int k = 0; k < K; k++) {
                    double xv = x[m * K + k], r = fabs(xv / s);
                    int ex = r > 0 ? (int)floor(log2(r)) : min_normal_exp;
                    if (ex < min_normal_exp)
                        ex = min_normal_exp;
                    double half_step = ldexp(1.0, ex - 4);
                    double bound = s * half_step * (1 + 0x1p-18) + fabs(xv) * 0x1p-21;
                    if (!(fabs((double)back[m * K + k] - xv) <= bound))
                        bad++;
                }
            }
            assert_int_equal(bad, 0);
        }
    }
    TEST_FREE_ALL(x, back, q);
}

/* Rows found offline: amax = 448 * s exactly, x = m * s for an fp8
 * midpoint m, so x / s is exactly the tie (to the even code) while
 * x * fp32(1/s) is one fp32 ulp off it and rounds to the odd neighbour. */
static void test_reciprocal_differs_on_ties(void **state)
{
    (void)state;
    struct { uint32_t amax, x; uint8_t vllm, reciprocal; } cases[] = {
        {0x445253C8u, 0x423BCACEu, 0x5C, 0x5D}, /* s = 1.87792206, x/s = 25: 24 | 26 */
        {0x445DB0F0u, 0x42D5C60Cu, 0x66, 0x65}, /* s = 1.97938538, x/s = 54: 52 | 56 */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        float row[2] = {f32_from_bits(cases[i].amax), f32_from_bits(cases[i].x)};
        uint8_t qv[2], qr[2];
        float sv, sr;
        fp8_token_quant_row(row, 2, FP8_TOKEN_VLLM, FP8_E4M3FN, qv, &sv);
        fp8_token_quant_row(row, 2, FP8_TOKEN_RECIPROCAL, FP8_E4M3FN, qr, &sr);
        assert_true(sv == sr);
        assert_int_equal(qv[1], cases[i].vllm);
        assert_int_equal(qr[1], cases[i].reciprocal);
        assert_int_equal(qv[0], 0x7E);
    }

    /* On random rows the two agree except for codes one apart. */
    enum { M = 512, K = 128 };
    float *x = malloc(sizeof(float) * M * K);
    uint8_t *a = malloc(M * K), *b = malloc(M * K);
    float sa[M], sb[M];
    test_rng_t rng = {0x4EC1ull};
    for (int i = 0; i < M * K; i++)
        x[i] = (float)(test_rng_normal(&rng) * 3.0);
    fp8_token_quant(x, M, K, FP8_TOKEN_VLLM, FP8_E4M3FN, a, sa);
    fp8_token_quant(x, M, K, FP8_TOKEN_RECIPROCAL, FP8_E4M3FN, b, sb);
    long long differ = 0;
    for (int i = 0; i < M * K; i++) {
        if (a[i] != b[i]) {
            differ++;
            assert_int_equal(a[i] & 0x80, b[i] & 0x80);
            assert_int_equal(abs((a[i] & 0x7F) - (b[i] & 0x7F)), 1);
        }
    }
    assert_true(differ < M * K / 100);
    TEST_FREE_ALL(x, a, b);
}

static void test_dequant(void **state)
{
    (void)state;
    const uint8_t q[6] = {0x38, 0xC0, 0x7E, 0x01, 0x7F, 0x40};
    const float scale[2] = {2.5f, 0.125f};
    float out[6];
    fp8_token_dequant(q, scale, 2, 3, FP8_E4M3FN, out);
    assert_true(out[0] == 2.5f);
    assert_true(out[1] == -5.0f);
    assert_true(out[2] == 1120.0f);
    assert_true(out[3] == 0x1p-12f);
    assert_true(isnan(out[4]));
    assert_true(out[5] == 0.25f);
    fp8_token_dequant(q, scale, 2, 3, FP8_E4M3FNUZ, out);
    assert_true(out[0] == 1.25f);   /* fnuz 0x38 = 0.5 */
    assert_true(out[2] == 560.0f);  /* fnuz 0x7E = 224 */
    assert_true(out[4] == 30.0f);   /* fnuz 0x7F = 240 */
}

KR_TEST_MAIN(
    test_variant_names, test_row_amax_448, test_scale_division_vs_reciprocal_constant,
    test_row_min_scale_floor, test_row_with_nan, test_row_with_inf, test_row_fnuz,
    test_random_rows_round_trip, test_reciprocal_differs_on_ties, test_dequant);
