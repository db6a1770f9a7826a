/* Formats: every decoder against the spec formula evaluated in double, every
 * encoder against an exhaustive nearest-code search in double, on millions of
 * inputs plus every tie and every saturation boundary. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "formats.h"
#include "mx_oracle.h"
#include "test_main.h"
#include "test_support.h"

/* ------------------------------------------------------------------ */
/* Oracles                                                             */
/* ------------------------------------------------------------------ */

/* The spec formula: (-1)^s * 2^(e - bias) * (1 + m/8), or m/8 * 2^(1 - bias). */
static double e4m3_spec_magnitude(int mag, int bias)
{
    int e = (mag >> 3) & 15, m = mag & 7;
    if (e == 0)
        return (m / 8.0) * pow(2.0, 1 - bias);
    return (1.0 + m / 8.0) * pow(2.0, e - bias);
}

typedef struct {
    int bias;
    int max_mag;          /* largest finite magnitude code */
    double max;
    double beyond_max;    /* the value one fp8 ulp above max, as if unbounded */
    int beyond_is_even;   /* mantissa parity of that virtual code */
    int fnuz;
} fp8_spec_t;

static const fp8_spec_t spec_fn = {7, 0x7E, 448.0, 480.0, 0, 0};
static const fp8_spec_t spec_fnuz = {8, 0x7F, 240.0, 256.0, 1, 1};

/* Nearest magnitude code by |x - v| in double over every finite magnitude
 * plus the virtual code one ulp above max (returned as -1); ties go to the
 * even mantissa.  x is not NaN. */
static int oracle_fp8_nearest(const fp8_spec_t *f, double a)
{
    /* At or past the virtual code it is the nearest; testing this first
     * also keeps the distances below exact in double. */
    if (a >= f->beyond_max)
        return -1;
    int best = -1;
    double best_d = fabs(a - f->beyond_max);
    for (int c = 0; c <= f->max_mag; c++) {
        double d = fabs(a - e4m3_spec_magnitude(c, f->bias));
        int is_even = (c & 1) == 0;
        int best_even = best < 0 ? f->beyond_is_even : ((best & 1) == 0);
        if (d < best_d || (d == best_d && is_even && !best_even)) {
            best_d = d;
            best = c;
        }
    }
    return best;
}

/* The nearest code, then the format's rules: landing on the virtual code
 * saturates or is NaN, fnuz has no -0. */
static uint8_t oracle_fp8_finish(const fp8_spec_t *f, float x, int nearest, fp8_overflow_t ovf)
{
    uint8_t sign = signbit(x) ? 0x80 : 0;
    if (isnan(x))
        return f->fnuz ? 0x80 : (uint8_t)(0x7F | sign);
    uint8_t code;
    if (nearest < 0) {
        if (ovf == FP8_OVERFLOW_NAN)
            return f->fnuz ? 0x80 : (uint8_t)(0x7F | sign);
        code = (uint8_t)f->max_mag;
    } else {
        code = (uint8_t)nearest;
    }
    if (f->fnuz && code == 0)
        return 0;
    return (uint8_t)(code | sign);
}

static uint8_t encode_under_test(const fp8_spec_t *f, float x, fp8_overflow_t ovf)
{
    return f->fnuz ? e4m3fnuz_encode(x, ovf) : e4m3fn_encode(x, ovf);
}

static long long check_fp8_both_formats(float x)
{
    static const fp8_spec_t *const specs[2] = {&spec_fn, &spec_fnuz};
    long long failures = 0;
    for (int f = 0; f < 2; f++) {
        int nearest = isnan(x) ? 0 : oracle_fp8_nearest(specs[f], fabs((double)x));
        for (int ovf = FP8_SATURATE; ovf <= FP8_OVERFLOW_NAN; ovf++) {
            uint8_t want = oracle_fp8_finish(specs[f], x, nearest, (fp8_overflow_t)ovf);
            uint8_t got = encode_under_test(specs[f], x, (fp8_overflow_t)ovf);
            if (want != got) {
                if (failures < 5)
                    print_error("fp8 %s ovf=%d x=%a (bits %08x): want %02x got %02x\n",
                                specs[f]->fnuz ? "fnuz" : "fn", ovf, (double)x, f32_bits(x),
                                want, got);
                failures++;
            }
        }
    }
    return failures;
}

/* The two bf16 neighbours of x (truncation and one ulp further from zero),
 * compared in double; a tie goes to the even one.  Past the largest finite
 * bf16 the next step is 2^128, i.e. Inf, as IEEE's overflow rule says. */
static uint16_t oracle_bf16_encode(float x)
{
    uint32_t u = f32_bits(x);
    uint16_t lower = (uint16_t)(u >> 16);
    if ((u & 0xFFFF) == 0)
        return lower;
    uint16_t upper = (uint16_t)(lower + 1);
    double xl = fabs((double)bf16_decode(lower));
    double xu = (upper & 0x7FFF) == 0x7F80 ? ldexp(1.0, 128) : fabs((double)bf16_decode(upper));
    double a = fabs((double)x);
    double dl = a - xl, du = xu - a;
    if (dl < du)
        return lower;
    if (du < dl)
        return upper;
    return (lower & 1) ? upper : lower;
}

/* A float drawn to cover fp8's range densely: exponent field in [lo, hi]. */
static float random_float_exponent_range(test_rng_t *rng, unsigned lo, unsigned hi)
{
    uint64_t r = test_rng_u64(rng);
    uint32_t exponent = lo + (uint32_t)((r >> 32) % (hi - lo + 1));
    uint32_t bits = (uint32_t)(r & 0x807FFFFFu) | (exponent << 23);
    return f32_from_bits(bits);
}

/* ------------------------------------------------------------------ */
/* fp8                                                                 */
/* ------------------------------------------------------------------ */

static void test_e4m3fn_decode_all_codes(void **state)
{
    (void)state;
    for (int c = 0; c < 256; c++) {
        float v = e4m3fn_decode((uint8_t)c);
        if ((c & 0x7F) == 0x7F) {
            assert_true(isnan(v));
            continue;
        }
        double want = e4m3_spec_magnitude(c & 0x7F, 7) * ((c & 0x80) ? -1.0 : 1.0);
        assert_true((double)v == want);
        assert_int_equal(signbit(v) != 0, (c & 0x80) != 0);
    }
    assert_true(e4m3fn_decode(0x7E) == 448.0f);
    assert_true(e4m3fn_decode(0xFE) == -448.0f);
    assert_true(e4m3fn_decode(0x01) == 0x1p-9f);
    assert_true(e4m3fn_decode(0x08) == 0x1p-6f);
    assert_true(e4m3fn_decode(0x38) == 1.0f);
    assert_true(e4m3fn_decode(0x07) == 7 * 0x1p-9f);
    assert_true(e4m3fn_decode(0x80) == 0.0f && signbit(e4m3fn_decode(0x80)));
}

static void test_e4m3fnuz_decode_all_codes(void **state)
{
    (void)state;
    for (int c = 0; c < 256; c++) {
        float v = e4m3fnuz_decode((uint8_t)c);
        if (c == 0x80) {
            assert_true(isnan(v));
            continue;
        }
        assert_false(isnan(v));
        double want = e4m3_spec_magnitude(c & 0x7F, 8) * ((c & 0x80) ? -1.0 : 1.0);
        assert_true((double)v == want);
    }
    assert_true(e4m3fnuz_decode(0x7F) == 240.0f);
    assert_true(e4m3fnuz_decode(0xFF) == -240.0f);
    assert_true(e4m3fnuz_decode(0x7E) == 224.0f);
    assert_true(e4m3fnuz_decode(0x01) == 0x1p-10f);
    assert_true(e4m3fnuz_decode(0x40) == 1.0f);
}

static void test_fp8_encode_anchors(void **state)
{
    (void)state;
    /* e4m3fn, saturating */
    assert_int_equal(e4m3fn_encode(448.0f, FP8_SATURATE), 0x7E);
    assert_int_equal(e4m3fn_encode(464.0f, FP8_SATURATE), 0x7E);
    assert_int_equal(e4m3fn_encode(480.0f, FP8_SATURATE), 0x7E);
    assert_int_equal(e4m3fn_encode(1e30f, FP8_SATURATE), 0x7E);
    assert_int_equal(e4m3fn_encode(INFINITY, FP8_SATURATE), 0x7E);
    assert_int_equal(e4m3fn_encode(-INFINITY, FP8_SATURATE), 0xFE);
    assert_int_equal(e4m3fn_encode(NAN, FP8_SATURATE), 0x7F);
    assert_int_equal(e4m3fn_encode(-NAN, FP8_SATURATE), 0xFF);
    /* e4m3fn, torch's cast: 464 ties to 448 (even), anything above is NaN */
    assert_int_equal(e4m3fn_encode(464.0f, FP8_OVERFLOW_NAN), 0x7E);
    assert_int_equal(e4m3fn_encode(-464.0f, FP8_OVERFLOW_NAN), 0xFE);
    assert_int_equal(e4m3fn_encode(nextafterf(464.0f, INFINITY), FP8_OVERFLOW_NAN), 0x7F);
    assert_int_equal(e4m3fn_encode(nextafterf(480.0f, 0.0f), FP8_OVERFLOW_NAN), 0x7F);
    assert_int_equal(e4m3fn_encode(480.0f, FP8_OVERFLOW_NAN), 0x7F);
    assert_int_equal(e4m3fn_encode(-480.0f, FP8_OVERFLOW_NAN), 0xFF);
    assert_int_equal(e4m3fn_encode(INFINITY, FP8_OVERFLOW_NAN), 0x7F);
    assert_int_equal(e4m3fn_encode(-INFINITY, FP8_OVERFLOW_NAN), 0xFF);
    /* zeros and the subnormal ties */
    assert_int_equal(e4m3fn_encode(0.0f, FP8_SATURATE), 0x00);
    assert_int_equal(e4m3fn_encode(-0.0f, FP8_SATURATE), 0x80);
    assert_int_equal(e4m3fn_encode(0x1p-10f, FP8_SATURATE), 0x00);             /* tie -> 0 */
    assert_int_equal(e4m3fn_encode(nextafterf(0x1p-10f, 1.0f), FP8_SATURATE), 0x01);
    assert_int_equal(e4m3fn_encode(3 * 0x1p-10f, FP8_SATURATE), 0x02);         /* tie 1|2 -> 2 */
    assert_int_equal(e4m3fn_encode(15 * 0x1p-10f, FP8_SATURATE), 0x08);        /* tie 7|8 -> 8 */
    assert_int_equal(e4m3fn_encode(-0x1p-149f, FP8_SATURATE), 0x80);
    assert_int_equal(e4m3fn_encode(1.0625f, FP8_SATURATE), 0x38);              /* tie -> 1.0 */
    assert_int_equal(e4m3fn_encode(1.1875f, FP8_SATURATE), 0x3A);              /* tie 1.125|1.25 */

    /* e4m3fnuz */
    assert_int_equal(e4m3fnuz_encode(240.0f, FP8_SATURATE), 0x7F);
    assert_int_equal(e4m3fnuz_encode(1000.0f, FP8_SATURATE), 0x7F);
    assert_int_equal(e4m3fnuz_encode(-INFINITY, FP8_SATURATE), 0xFF);
    assert_int_equal(e4m3fnuz_encode(NAN, FP8_SATURATE), 0x80);
    assert_int_equal(e4m3fnuz_encode(-NAN, FP8_OVERFLOW_NAN), 0x80);
    /* 248 is the midpoint of 240 (odd mantissa) and 256 (even): RNE overflows */
    assert_int_equal(e4m3fnuz_encode(248.0f, FP8_OVERFLOW_NAN), 0x80);
    assert_int_equal(e4m3fnuz_encode(nextafterf(248.0f, 0.0f), FP8_OVERFLOW_NAN), 0x7F);
    assert_int_equal(e4m3fnuz_encode(-nextafterf(248.0f, 0.0f), FP8_OVERFLOW_NAN), 0xFF);
    assert_int_equal(e4m3fnuz_encode(248.0f, FP8_SATURATE), 0x7F);
    assert_int_equal(e4m3fnuz_encode(INFINITY, FP8_OVERFLOW_NAN), 0x80);
    assert_int_equal(e4m3fnuz_encode(224.0f, FP8_SATURATE), 0x7E);
    assert_int_equal(e4m3fnuz_encode(-0.0f, FP8_SATURATE), 0x00);
    assert_int_equal(e4m3fnuz_encode(-0x1p-12f, FP8_SATURATE), 0x00);
    assert_int_equal(e4m3fnuz_encode(-0x1p-11f, FP8_SATURATE), 0x00);          /* tie -> 0 */
    assert_int_equal(e4m3fnuz_encode(-nextafterf(0x1p-11f, 1.0f), FP8_SATURATE), 0x81);
}

static void test_fp8_encode_every_midpoint(void **state)
{
    (void)state;
    long long failures = 0, checked = 0;
    static const fp8_spec_t *const specs[2] = {&spec_fn, &spec_fnuz};
    for (int f = 0; f < 2; f++) {
        const fp8_spec_t *s = specs[f];
        for (int c = 0; c <= s->max_mag; c++) {
            double lo = e4m3_spec_magnitude(c, s->bias);
            double hi = c == s->max_mag ? s->beyond_max : e4m3_spec_magnitude(c + 1, s->bias);
            float mid = (float)((lo + hi) / 2);
            assert_true((double)mid == (lo + hi) / 2); /* midpoints need 5 bits: exact */
            const float probes[] = {mid, nextafterf(mid, 0.0f), nextafterf(mid, INFINITY),
                                    (float)lo, (float)hi};
            for (size_t p = 0; p < sizeof probes / sizeof probes[0]; p++) {
                failures += check_fp8_both_formats(probes[p]);
                failures += check_fp8_both_formats(-probes[p]);
                checked += 2;
            }
        }
    }
    const float boundaries[] = {448.0f, 464.0f, nextafterf(464.0f, INFINITY), 480.0f,
                                nextafterf(480.0f, 0.0f), 240.0f, 248.0f, 256.0f,
                                INFINITY, FLT_MAX, 0.0f, 0x1p-149f, 0x1p-126f, 0x1p-9f,
                                0x1p-10f, 0x1p-11f, 0x1p-7f, 0x1p-6f};
    for (size_t i = 0; i < sizeof boundaries / sizeof boundaries[0]; i++) {
        failures += check_fp8_both_formats(boundaries[i]);
        failures += check_fp8_both_formats(-boundaries[i]);
        checked += 2;
    }
    failures += check_fp8_both_formats(NAN);
    failures += check_fp8_both_formats(-NAN);
    assert_true(checked > 1000);
    assert_int_equal(failures, 0);
}

static void test_fp8_encode_random_vs_oracle(void **state)
{
    (void)state;
    test_rng_t rng = {0x5EEDF8F8ull};
    long long failures = 0, checked = 0;
    /* Random bit patterns: every exponent, NaNs and Infs included. */
    for (int i = 0; i < 600000; i++, checked++)
        failures += check_fp8_both_formats(f32_from_bits((uint32_t)test_rng_u64(&rng)));
    /* Exponents 2^-13 .. 2^10: the whole fp8 range and just past it. */
    for (int i = 0; i < 800000; i++, checked++)
        failures += check_fp8_both_formats(random_float_exponent_range(&rng, 114, 137));
    /* Uniform in [-500, 500]: the saturation region. */
    for (int i = 0; i < 500000; i++, checked++)
        failures += check_fp8_both_formats((float)(test_rng_uniform(&rng) * 1000.0 - 500.0));
    /* Subnormal range of both formats. */
    for (int i = 0; i < 300000; i++, checked++)
        failures += check_fp8_both_formats((float)((test_rng_uniform(&rng) - 0.5) * 0x1p-5));
    assert_true(checked >= 2000000);
    assert_int_equal(failures, 0);
}

/* ------------------------------------------------------------------ */
/* e2m1, e8m0, bf16                                                    */
/* ------------------------------------------------------------------ */

static void test_e2m1_decode_all_codes(void **state)
{
    (void)state;
    for (int c = 0; c < 16; c++) {
        int e = (c >> 1) & 3, m = c & 1;
        double mag = e == 0 ? m * 0.5 : (1.0 + m / 2.0) * pow(2.0, e - 1);
        double want = (c & 8) ? -mag : mag;
        assert_true((double)e2m1_decode((uint8_t)c) == want);
        assert_int_equal(signbit(e2m1_decode((uint8_t)c)) != 0, (c & 8) != 0);
    }
    assert_true(e2m1_decode(0x7) == 6.0f);
    assert_true(e2m1_decode(0xF) == -6.0f);
    assert_true(e2m1_decode(0x3) == 1.5f);
    assert_true(e2m1_decode(0x1) == 0.5f);
    assert_true(e2m1_decode(0xF7) == 6.0f); /* only the low 4 bits count */
}

static void test_e2m1_encode_ties_and_oracle(void **state)
{
    (void)state;
    /* Every tie of the e2m1 grid, by hand. */
    assert_int_equal(e2m1_encode_rne(0.25f), 0);
    assert_int_equal(e2m1_encode_rne(0.75f), 2);
    assert_int_equal(e2m1_encode_rne(1.25f), 2);
    assert_int_equal(e2m1_encode_rne(1.75f), 4);
    assert_int_equal(e2m1_encode_rne(2.5f), 4);
    assert_int_equal(e2m1_encode_rne(3.5f), 6);
    assert_int_equal(e2m1_encode_rne(5.0f), 6);
    assert_int_equal(e2m1_encode_rne(-5.0f), 0xE);
    assert_int_equal(e2m1_encode_rne(7.0f), 7);
    assert_int_equal(e2m1_encode_rne(INFINITY), 7);
    assert_int_equal(e2m1_encode_rne(-INFINITY), 0xF);
    assert_int_equal(e2m1_encode_rne(NAN), 0);
    assert_int_equal(e2m1_encode_rne(-NAN), 8);
    assert_int_equal(e2m1_encode_rne(-0.0f), 8);

    long long failures = 0;
    for (int c = 0; c < 8; c++) {
        double hi = c == 7 ? 8.0 : test_e2m1_grid[c + 1];
        float mid = (float)((test_e2m1_grid[c] + hi) / 2);
        const float probes[] = {mid, nextafterf(mid, 0.0f), nextafterf(mid, INFINITY),
                                (float)test_e2m1_grid[c]};
        for (size_t p = 0; p < 4; p++)
            for (int sgn = 0; sgn < 2; sgn++) {
                float x = sgn ? -probes[p] : probes[p];
                failures += e2m1_encode_rne(x) != test_e2m1_nearest_code(x);
            }
    }
    test_rng_t rng = {0xE2A1ull};
    for (int i = 0; i < 500000; i++) {
        float x = (float)((test_rng_uniform(&rng) - 0.5) * 16.0);
        failures += e2m1_encode_rne(x) != test_e2m1_nearest_code(x);
        float y = f32_from_bits((uint32_t)test_rng_u64(&rng));
        failures += e2m1_encode_rne(y) != test_e2m1_nearest_code(y);
    }
    assert_int_equal(failures, 0);
}

static void test_e8m0_decode(void **state)
{
    (void)state;
    for (int b = 0; b < 255; b++) {
        double want = pow(2.0, b - 127);
        assert_true((double)e8m0_decode((uint8_t)b, E8M0_SPEC) == want);
        if (b > 0)
            assert_true((double)e8m0_decode((uint8_t)b, E8M0_ZERO_IS_ZERO) == want);
    }
    assert_int_equal(f32_bits(e8m0_decode(0, E8M0_SPEC)), 0x00400000u); /* 2^-127 */
    assert_true(e8m0_decode(0, E8M0_ZERO_IS_ZERO) == 0.0f);
    assert_true(e8m0_decode(127, E8M0_SPEC) == 1.0f);
    assert_true(e8m0_decode(254, E8M0_SPEC) == 0x1p127f);
    assert_true(isnan(e8m0_decode(0xFF, E8M0_SPEC)));
    assert_true(isnan(e8m0_decode(0xFF, E8M0_ZERO_IS_ZERO)));
}

static void test_bf16(void **state)
{
    (void)state;
    /* Anchors */
    assert_int_equal(bf16_encode(1.0f), 0x3F80);
    assert_int_equal(bf16_encode(-2.0f), 0xC000);
    assert_int_equal(bf16_encode(f32_from_bits(0x3F808000u)), 0x3F80); /* tie, even stays */
    assert_int_equal(bf16_encode(f32_from_bits(0x3F818000u)), 0x3F82); /* tie, odd goes up */
    assert_int_equal(bf16_encode(f32_from_bits(0x7F7F8000u)), 0x7F80); /* tie toward Inf */
    assert_int_equal(bf16_encode(f32_from_bits(0x7F7F7FFFu)), 0x7F7F);
    assert_int_equal(bf16_encode(f32_from_bits(0xFF7F8000u)), 0xFF80);
    assert_int_equal(bf16_encode(FLT_MAX), 0x7F80);
    assert_int_equal(bf16_encode(INFINITY), 0x7F80);
    assert_int_equal(bf16_encode(-INFINITY), 0xFF80);
    assert_int_equal(bf16_encode(-0.0f), 0x8000);
    assert_int_equal(bf16_encode(NAN), 0x7FC0);
    assert_int_equal(bf16_encode(-NAN), 0xFFC0);
    assert_int_equal(bf16_encode(f32_from_bits(0x7F800001u)), 0x7FC0);    /* sNaN stays NaN */
    assert_int_equal(bf16_encode(f32_from_bits(0x7FFFFFFFu)), 0x7FC0);
    assert_int_equal(f32_bits(bf16_decode(0x3F80)), 0x3F800000u);
    assert_true(isnan(bf16_decode(0x7FC1)));

    test_rng_t rng = {0xBF16ull};
    long long failures = 0, checked = 0;
    for (int i = 0; i < 2000000; i++) {
        uint32_t u = (uint32_t)test_rng_u64(&rng);
        if (i & 1) /* every other one an exact tie */
            u = (u & 0xFFFF0000u) | 0x8000u;
        float x = f32_from_bits(u);
        if (isnan(x)) {
            failures += !isnan(bf16_decode(bf16_encode(x)));
            continue;
        }
        failures += bf16_encode(x) != oracle_bf16_encode(x);
        checked++;
    }
    for (uint32_t hi = 0x7F70; hi <= 0x7F7F; hi++) /* around overflow */
        for (uint32_t lo = 0x7FF0; lo <= 0x8010; lo++) {
            float x = f32_from_bits((hi << 16) | lo);
            failures += bf16_encode(x) != oracle_bf16_encode(x);
            failures += bf16_encode(-x) != oracle_bf16_encode(-x);
        }
    assert_true(checked > 1900000);
    assert_int_equal(failures, 0);
}

static void test_bit_helpers(void **state)
{
    (void)state;
    assert_int_equal(f32_bits(1.0f), 0x3F800000u);
    assert_int_equal(f32_bits(-0.0f), 0x80000000u);
    assert_true(f32_from_bits(0x40490FDBu) == 3.14159274101257324f);
    test_rng_t rng = {7};
    for (int i = 0; i < 1000; i++) {
        uint32_t u = (uint32_t)test_rng_u64(&rng);
        assert_int_equal(f32_bits(f32_from_bits(u)), u);
    }
}

KR_TEST_MAIN(
    test_e4m3fn_decode_all_codes, test_e4m3fnuz_decode_all_codes, test_fp8_encode_anchors,
    test_fp8_encode_every_midpoint, test_fp8_encode_random_vs_oracle, test_e2m1_decode_all_codes,
    test_e2m1_encode_ties_and_oracle, test_e8m0_decode, test_bf16, test_bit_helpers);
