/* The fast forms of the decoders, encoders and quantizers (decode tables,
 * bit-built powers of two, branch-free encoders, integer amax, fmaxf/fminf
 * as selects) against the straightforward formulas they replaced
 * (fast_path_oracles.h), bit for bit, NaN payloads and signs included:
 * every code and byte exhaustively, the encoders on a structured sweep of
 * fp32 (every exponent, every rounding position with its tie and both
 * neighbours, both signs) plus random bit patterns, and the quantizers on
 * blocks and rows built to hit every special case.  test_format_exhaustive
 * (label slow) runs the encoders over all 2^32 floats. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fast_path_oracles.h"
#include "formats.h"
#include "quant_fp8.h"
#include "quant_mxfp4.h"
#include "test_main.h"
#include "test_support.h"

static int same_bits(float a, float b)
{
    return f32_bits(a) == f32_bits(b);
}

/* Every sign, every exponent field, and for every rounding position p (the
 * number of mantissa bits below the kept ones) the patterns around the tie
 * at p: the tie itself, one ulp either side, zero and all ones below p; the
 * bits above p are zero, all ones or random.  Returns the count. */
static size_t structured_sweep(float **out)
{
    const size_t cap = 2 * 256 * 24 * 5 * 5;
    float *v = malloc(cap * sizeof *v);
    assert_non_null(v);
    test_rng_t rng = {0x5EE9ull};
    size_t n = 0;
    for (uint32_t sign = 0; sign < 2; sign++)
        for (uint32_t field = 0; field < 256; field++)
            for (int p = 1; p <= 24; p++) {
                const uint32_t below = p >= 23 ? 0x7FFFFFu : (1u << p) - 1;
                const uint32_t half = p >= 24 ? 0 : 1u << (p - 1);
                const uint32_t above_mask = 0x7FFFFFu & ~below;
                const uint32_t tops[5] = {0, above_mask, (uint32_t)test_rng_u64(&rng) & above_mask,
                                          (uint32_t)test_rng_u64(&rng) & above_mask,
                                          (uint32_t)test_rng_u64(&rng) & above_mask};
                const uint32_t lows[5] = {0, below, half, half ? half - 1 : 0,
                                          (half + 1) & below};
                for (int t = 0; t < 5; t++)
                    for (int l = 0; l < 5; l++)
                        v[n++] = f32_from_bits(sign << 31 | field << 23 | tops[t] | lows[l]);
            }
    assert_int_equal(n, cap);
    *out = v;
    return n;
}

/* The sweep plus random bit patterns, NaNs and Infs included. */
static size_t test_inputs(float **out)
{
    float *sweep;
    const size_t n_sweep = structured_sweep(&sweep);
    const size_t n_random = 1000000;
    float *v = realloc(sweep, (n_sweep + n_random) * sizeof *v);
    assert_non_null(v);
    test_rng_t rng = {0xF00Dull};
    for (size_t i = 0; i < n_random; i++)
        v[n_sweep + i] = f32_from_bits((uint32_t)test_rng_u64(&rng));
    *out = v;
    return n_sweep + n_random;
}

/* Fails the test unless COUNT_FAILURES finds none on the inputs of test_inputs. */
static void expect_no_failures(long long (*count_failures)(const float *v, size_t n))
{
    float *v;
    const size_t n = test_inputs(&v);
    const long long failures = count_failures(v, n);
    free(v);
    assert_int_equal(failures, 0);
}

/* ------------------------------------------------------------------ */
/* Decoders: every code                                                */
/* ------------------------------------------------------------------ */

static void test_decode_every_code(void **state)
{
    (void)state;
    for (int c = 0; c < 256; c++) {
        const uint8_t b = (uint8_t)c;
        assert_int_equal(f32_bits(e4m3fn_decode(b)), f32_bits(oracle_e4m3fn_decode(b)));
        assert_int_equal(f32_bits(e4m3fnuz_decode(b)), f32_bits(oracle_e4m3fnuz_decode(b)));
        assert_int_equal(f32_bits(e2m1_decode(b)), f32_bits(oracle_e2m1_decode(b)));
        assert_int_equal(f32_bits(e8m0_decode(b, E8M0_SPEC)),
                         f32_bits(oracle_e8m0_decode(b, E8M0_SPEC)));
        assert_int_equal(f32_bits(e8m0_decode(b, E8M0_ZERO_IS_ZERO)),
                         f32_bits(oracle_e8m0_decode(b, E8M0_ZERO_IS_ZERO)));
        assert_int_equal(f32_bits(e4m3fn_decode_bits_of(b)), f32_bits(oracle_e4m3fn_decode(b)));
        assert_int_equal(f32_bits(e4m3fnuz_decode_bits_of(b)), f32_bits(oracle_e4m3fnuz_decode(b)));
        assert_int_equal(e4m3fn_decode_bits[c], f32_bits(oracle_e4m3fn_decode(b)));
        assert_int_equal(e4m3fnuz_decode_bits[c], f32_bits(oracle_e4m3fnuz_decode(b)));
        assert_int_equal(e8m0_decode_bits[c], f32_bits(oracle_e8m0_decode(b, E8M0_SPEC)));
    }
    for (uint32_t h = 0; h < 65536; h++)
        assert_int_equal(f32_bits(bf16_decode((uint16_t)h)), h << 16);
}

/* ------------------------------------------------------------------ */
/* Encoders                                                            */
/* ------------------------------------------------------------------ */

static void test_encoders_on_sweep(void **state)
{
    (void)state;
    float *v;
    const size_t n = test_inputs(&v);
    long long failures = 0, in_range_fn = 0, in_range_fnuz = 0;
    for (size_t i = 0; i < n; i++) {
        const float x = v[i];
        const uint32_t mag = f32_bits(x) & 0x7FFFFFFFu;
        failures += bf16_encode(x) != oracle_bf16_encode(x);
        failures += e2m1_encode_rne(x) != oracle_e2m1_encode_rne(x);
        failures += mxfp4_aiter_e2m1_code(x) != oracle_aiter_e2m1_from_scaled(x);
        if (mag <= f32_bits(E4M3FN_MAX)) {
            in_range_fn++;
            failures += e4m3fn_encode_in_range(x) != e4m3fn_encode(x, FP8_SATURATE);
            failures += e4m3fn_encode_in_range(x) != e4m3fn_encode(x, FP8_OVERFLOW_NAN);
        }
        if (mag <= f32_bits(E4M3FNUZ_MAX)) {
            in_range_fnuz++;
            failures += e4m3fnuz_encode_in_range(x) != e4m3fnuz_encode(x, FP8_SATURATE);
            failures += e4m3fnuz_encode_in_range(x) != e4m3fnuz_encode(x, FP8_OVERFLOW_NAN);
        }
        if (failures && failures < 5)
            print_error("mismatch at x = %a (bits %08x)\n", (double)x, f32_bits(x));
    }
    free(v);
    assert_true(in_range_fn > 500000 && in_range_fnuz > 500000);
    assert_int_equal(failures, 0);
}

/* Every fp8 grid point, midpoint and their neighbours, for the in-range
 * encoders (the sweep has them too; this names them). */
static void test_in_range_fp8_every_midpoint(void **state)
{
    (void)state;
    long long failures = 0;
    for (int bias = 7; bias <= 8; bias++) {
        const float max = bias == 7 ? E4M3FN_MAX : E4M3FNUZ_MAX;
        for (int c = 0; c < 0x7F; c++) {
            const float lo = oracle_e4m3_magnitude((uint8_t)c, bias);
            const float hi = oracle_e4m3_magnitude((uint8_t)(c + 1), bias);
            const float mid = (lo + hi) / 2;     /* exact: 5 significant bits */
            const float probes[] = {lo, nextafterf(lo, 0.0f), nextafterf(lo, INFINITY), mid,
                                    nextafterf(mid, 0.0f), nextafterf(mid, INFINITY)};
            for (size_t p = 0; p < sizeof probes / sizeof probes[0]; p++)
                for (int sgn = 0; sgn < 2; sgn++) {
                    const float x = sgn ? -probes[p] : probes[p];
                    if (fabsf(x) > max)
                        continue;
                    if (bias == 7)
                        failures += e4m3fn_encode_in_range(x) != e4m3fn_encode(x, FP8_SATURATE);
                    else
                        failures +=
                            e4m3fnuz_encode_in_range(x) != e4m3fnuz_encode(x, FP8_SATURATE);
                }
        }
    }
    assert_int_equal(failures, 0);
}

/* ------------------------------------------------------------------ */
/* MXFP4 quantizer and dequant                                         */
/* ------------------------------------------------------------------ */

static long long check_block(const float *x)
{
    long long failures = 0;
    for (int v = 0; v < MXFP4_VARIANT_COUNT; v++) {
        uint8_t codes[32], want_codes[32], scale = 0, want_scale = 1;
        mxfp4_quant_block(x, (mxfp4_variant_t)v, codes, &scale);
        oracle_mxfp4_quant_block(x, (mxfp4_variant_t)v, want_codes, &want_scale);
        if (scale != want_scale || memcmp(codes, want_codes, 32) != 0) {
            if (failures < 3)
                print_error("variant %d: block starting %a: scale %u want %u\n", v, (double)x[0],
                            scale, want_scale);
            failures++;
        }
    }
    return failures;
}

static long long mxfp4_block_failures(const float *v, size_t n)
{
    long long failures = 0;
    /* Consecutive slices of the inputs: blocks mixing every magnitude with
     * NaN, Inf, zeros and subnormals. */
    for (size_t i = 0; i + 32 <= n; i += 32)
        failures += check_block(v + i);
    /* The element step at scale 1: x[0] = 4 fixes e = 0, the rest are the
     * inputs of magnitude below 4 (and NaNs, which amax skips). */
    float block[32];
    size_t filled = 1;
    block[0] = 4.0f;
    for (size_t i = 0; i < n; i++) {
        const uint32_t mag = f32_bits(v[i]) & 0x7FFFFFFFu;
        if (mag >= 0x40800000u && mag <= 0x7F800000u)
            continue;
        block[filled++] = v[i];
        if (filled == 32) {
            failures += check_block(block);
            filled = 1;
        }
    }
    /* Normal-looking blocks at every scale, the 1.75 round-up included. */
    test_rng_t rng = {0xB10Cull};
    for (int b = 0; b < 20000; b++) {
        const double scale = ldexp(1.0, (int)(test_rng_u64(&rng) % 300) - 150);
        for (int i = 0; i < 32; i++)
            block[i] = (float)(test_rng_normal(&rng) * scale);
        if (b % 3 == 0)
            block[b % 32] = (float)(1.75 * scale);
        failures += check_block(block);
    }
    /* NaN and Inf blocks: quiet and signaling NaNs of both signs and several
     * payloads, alone, first, last, everywhere. */
    static const uint32_t nans[] = {0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFF800001u,
                                    0x7FFFFFFFu, 0xFFFFFFFFu, 0x7FA00000u, 0x7FC00001u};
    for (size_t a = 0; a < sizeof nans / sizeof nans[0]; a++)
        for (size_t b = 0; b < sizeof nans / sizeof nans[0]; b++) {
            for (int i = 0; i < 32; i++)
                block[i] = f32_from_bits(i % 2 ? nans[a] : nans[b]);
            failures += check_block(block);
            for (int i = 0; i < 32; i++)
                block[i] = (float)i - 16.0f;
            block[0] = f32_from_bits(nans[a]);
            block[31] = f32_from_bits(nans[b]);
            failures += check_block(block);
            block[0] = 3.0f;
            block[1] = f32_from_bits(nans[a]);
            failures += check_block(block);
            block[5] = b % 2 ? INFINITY : -INFINITY;
            failures += check_block(block);
        }
    for (int i = 0; i < 32; i++)
        block[i] = i % 2 ? -0.0f : 0.0f;
    failures += check_block(block);
    for (int i = 0; i < 32; i++)
        block[i] = f32_from_bits((uint32_t)i * 0x1234u);       /* subnormals */
    failures += check_block(block);
    for (int i = 0; i < 32; i++)
        block[i] = i % 2 ? FLT_MAX : -FLT_MAX;
    failures += check_block(block);
    return failures;
}

static void test_mxfp4_dequant(void **state)
{
    (void)state;
    /* Every code byte under every scale byte. */
    const int64_t M = 256, K = 256;
    uint8_t *codes = malloc((size_t)(M * K)), *scales = malloc((size_t)(M * K / 32));
    float *got = malloc((size_t)(M * K) * sizeof(float)), *want = malloc((size_t)(M * K) * sizeof(float));
    assert_true(codes && scales && got && want);
    for (int64_t m = 0; m < M; m++) {
        for (int64_t k = 0; k < K; k++)
            codes[m * K + k] = (uint8_t)k;
        for (int64_t b = 0; b < K / 32; b++)
            scales[m * (K / 32) + b] = (uint8_t)m;
    }
    mxfp4_act_dequant(codes, scales, M, K, got);
    oracle_mxfp4_act_dequant(codes, scales, M, K, want);
    for (int64_t i = 0; i < M * K; i++)
        assert_int_equal(f32_bits(got[i]), f32_bits(want[i]));
    TEST_FREE_ALL(codes, scales, got, want);
}

/* ------------------------------------------------------------------ */
/* fp8 per-token quantizer and dequant                                 */
/* ------------------------------------------------------------------ */

static long long check_row(const float *x, int64_t K)
{
    long long failures = 0;
    uint8_t *q = malloc((size_t)K), *want = malloc((size_t)K);
    assert_true(q && want);
    for (int v = 0; v < FP8_TOKEN_VARIANT_COUNT; v++)
        for (int f = FP8_E4M3FN; f <= FP8_E4M3FNUZ; f++) {
            float s = 0.0f, want_s = 1.0f;
            fp8_token_quant_row(x, K, (fp8_token_variant_t)v, (fp8_format_t)f, q, &s);
            oracle_fp8_token_quant_row(x, K, (fp8_token_variant_t)v, (fp8_format_t)f, want,
                                       &want_s);
            if (!same_bits(s, want_s) || memcmp(q, want, (size_t)K) != 0) {
                if (failures < 3)
                    print_error("variant %d format %d: row starting %a: scale %a want %a\n", v, f,
                                (double)x[0], (double)s, (double)want_s);
                failures++;
            }
        }
    free(q);
    free(want);
    return failures;
}

static long long fp8_row_failures(const float *v, size_t n)
{
    long long failures = 0;
    /* Slices of the inputs, of several lengths: every special value, in rows
     * whose amax is anything from a subnormal to Inf or NaN. */
    const int64_t lengths[] = {1, 7, 64, 300};
    for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++)
        for (size_t i = 0; i + (size_t)lengths[li] <= n; i += (size_t)lengths[li] * 7)
            failures += check_row(v + i, lengths[li]);
    /* Rows whose scale is a power of two (amax = Q * 2^j), so x / s is exact
     * and the elements land on every fp8 tie; Q = 448 and 224. */
    float row[257];
    for (int qi = 0; qi < 2; qi++) {
        const float q_max = qi ? 224.0f : 448.0f;
        for (int j = -20; j <= 20; j += 5) {
            row[0] = ldexpf(q_max, j);
            for (int c = 0; c < 256; c++) {
                const float lo = oracle_e4m3_magnitude((uint8_t)(c & 0x7E), 7 + qi);
                const float hi = oracle_e4m3_magnitude((uint8_t)((c & 0x7E) + 1), 7 + qi);
                const float mid = (lo + hi) / 2;
                row[1 + c] = ldexpf(c & 1 ? mid : nextafterf(mid, 0.0f), j) * (c & 0x80 ? -1 : 1);
            }
            failures += check_row(row, 257);
        }
    }
    /* NaN, Inf and signaling NaN rows; zero rows; rows below the scale floor. */
    static const uint32_t specials[] = {0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFF800001u,
                                        0x7FFFFFFFu, 0x7F800000u, 0xFF800000u, 0x80000000u};
    test_rng_t rng = {0xF8F8ull};
    for (size_t a = 0; a < sizeof specials / sizeof specials[0]; a++)
        for (int pos = 0; pos < 4; pos++) {
            for (int i = 0; i < 64; i++)
                row[i] = (float)test_rng_normal(&rng);
            row[pos == 3 ? 63 : pos * 10] = f32_from_bits(specials[a]);
            failures += check_row(row, 64);
            row[1] = f32_from_bits(specials[(a + 1) % 8]);
            failures += check_row(row, 64);
        }
    for (int i = 0; i < 64; i++)
        row[i] = i % 2 ? -0.0f : 0.0f;
    failures += check_row(row, 64);
    for (int i = 0; i < 64; i++)
        row[i] = (float)test_rng_normal(&rng) * 1e-9f;
    failures += check_row(row, 64);
    for (int r = 0; r < 3000; r++) {
        const float scale = ldexpf(1.0f, (int)(test_rng_u64(&rng) % 80) - 40);
        for (int i = 0; i < 128; i++)
            row[i] = (float)test_rng_normal(&rng) * scale * (i == r % 128 ? 100.0f : 1.0f);
        failures += check_row(row, 128);
    }
    return failures;
}

static void test_mxfp4_blocks(void **state)
{
    (void)state;
    expect_no_failures(mxfp4_block_failures);
}

static void test_fp8_rows(void **state)
{
    (void)state;
    expect_no_failures(fp8_row_failures);
}

static void test_fp8_dequant(void **state)
{
    (void)state;
    static const float scales[] = {1.0f, 0x1p-20f, 3.0e-3f, 0.0f, -0.0f, 0x1p-140f, 1e30f,
                                   INFINITY, NAN};
    const int64_t M = sizeof scales / sizeof scales[0], K = 256;
    uint8_t q[256];
    for (int c = 0; c < 256; c++)
        q[c] = (uint8_t)c;
    uint8_t *codes = malloc((size_t)(M * K));
    float *got = malloc((size_t)(M * K) * sizeof(float)), *want = malloc((size_t)(M * K) * sizeof(float));
    assert_true(codes && got && want);
    for (int64_t m = 0; m < M; m++)
        memcpy(codes + m * K, q, 256);
    for (int f = FP8_E4M3FN; f <= FP8_E4M3FNUZ; f++) {
        fp8_token_dequant(codes, scales, M, K, (fp8_format_t)f, got);
        oracle_fp8_token_dequant(codes, scales, M, K, (fp8_format_t)f, want);
        for (int64_t i = 0; i < M * K; i++) {
            /* NaN code times NaN scale: which NaN the multiply returns depends
             * on the operand order the compiler chose, so compare a NaN as a
             * NaN; everything else bit for bit. */
            if (isnan(got[i]) && isnan(want[i]))
                continue;
            assert_int_equal(f32_bits(got[i]), f32_bits(want[i]));
        }
    }
    TEST_FREE_ALL(codes, got, want);
}

KR_TEST_MAIN(
    test_decode_every_code, test_encoders_on_sweep, test_in_range_fp8_every_midpoint,
    test_mxfp4_blocks, test_mxfp4_dequant, test_fp8_rows, test_fp8_dequant);
