/* ctest-labels: slow */
/* Every one of the 2^32 fp32 bit patterns through each branch-free encoder
 * and against the formula it replaced (fast_path_oracles.h), bit for bit:
 * bf16_encode, e2m1_encode_rne, aiter's e2m1 conversion, and the in-range
 * e4m3fn / e4m3fnuz encoders (on every float they accept, |x| <= 448 or 240,
 * against the general encoders in both overflow modes); and the accumulation
 * models' roundings (harness/judge/diagnosis/acc_round.h), whose 8-lane forms
 * give the one-value forms' bits, NaNs included, while the one-value fp16
 * rounding gives the compiler's own conversion, (float)(_Float16)x (any NaN
 * for a NaN).  Compiled as acc_fit.c is (tests/CMakeLists.txt).  The space is cut
 * into slices run on two threads; about a minute on one core.  A sanitizer
 * build runs some twenty times slower, so there it checks the patterns
 * that are 0, 1 or 15 mod 16: every sign and exponent, and every tie of
 * these formats (their low bits are multiples of 16) with its neighbours
 * one ulp above and below. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>

#include "diagnosis/acc_round.h"
#include "fast_path_oracles.h"
#include "formats.h"
#include "quant_mxfp4.h"
#include "test_main.h"
#include "test_support.h"

#define SLICES 2

/* The low 4 bits of the patterns checked. */
#if TEST_UNDER_ASAN
static const uint32_t low_bits[] = {0, 1, 15};
#else
static const uint32_t low_bits[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
#endif

typedef struct {
    uint64_t begin, end;
    long long failures;
    uint32_t first_failure;
} slice_t;

/* acc_round.h on n patterns (n <= 16), 8 lanes at a time (a short last
 * vector repeats its first pattern): nonzero when a pattern differs. */
static int acc_round_differs(const uint32_t *bits, size_t n, uint32_t *which)
{
    for (size_t at = 0; at < n; at += ACC_LANES) {
        acc_f32x8 h, b;
        for (size_t l = 0; l < ACC_LANES; l++)
            h[l] = b[l] = f32_from_bits(bits[at + l < n ? at + l : at]);
        acc_fp16_round_x8(&h);
        acc_bf16_round_x8(&b);
        for (size_t l = 0; l < ACC_LANES && at + l < n; l++) {
            const float x = f32_from_bits(bits[at + l]), one = acc_fp16_round(x);
            if (f32_bits(h[l]) != f32_bits(one) || f32_bits(b[l]) != f32_bits(acc_bf16_round(x)) ||
                (isnan(x) ? !isnan(one) : f32_bits(one) != f32_bits((float)(_Float16)x))) {
                *which = bits[at + l];
                return 1;
            }
        }
    }
    return 0;
}

static void *check_slice(void *arg)
{
    slice_t *s = arg;
    const uint32_t fn_max = f32_bits(E4M3FN_MAX), fnuz_max = f32_bits(E4M3FNUZ_MAX);
    const size_t lows = sizeof low_bits / sizeof low_bits[0];
    for (uint64_t high = s->begin; high < s->end; high += 16) {
        uint32_t group[16], which;
        for (size_t l = 0; l < lows; l++)
            group[l] = (uint32_t)high | low_bits[l];
        if (acc_round_differs(group, lows, &which)) {
            if (s->failures == 0)
                s->first_failure = which;
            s->failures++;
        }
        for (size_t l = 0; l < lows; l++) {
            const uint32_t bits = (uint32_t)high | low_bits[l], mag = bits & 0x7FFFFFFFu;
            const float x = f32_from_bits(bits);
            int bad = bf16_encode(x) != oracle_bf16_encode(x);
            bad |= e2m1_encode_rne(x) != oracle_e2m1_encode_rne(x);
            bad |= mxfp4_aiter_e2m1_code(x) != oracle_aiter_e2m1_from_scaled(x);
            if (mag <= fn_max)
                bad |= e4m3fn_encode_in_range(x) != e4m3fn_encode(x, FP8_SATURATE) ||
                       e4m3fn_encode_in_range(x) != e4m3fn_encode(x, FP8_OVERFLOW_NAN);
            if (mag <= fnuz_max)
                bad |= e4m3fnuz_encode_in_range(x) != e4m3fnuz_encode(x, FP8_SATURATE) ||
                       e4m3fnuz_encode_in_range(x) != e4m3fnuz_encode(x, FP8_OVERFLOW_NAN);
            if (bad) {
                if (s->failures == 0)
                    s->first_failure = bits;
                s->failures++;
            }
        }
    }
    return NULL;
}

static void test_every_fp32(void **state)
{
    (void)state;
    slice_t slices[SLICES];
    pthread_t tids[SLICES];
    const uint64_t total = 1ull << 32;
    for (int i = 0; i < SLICES; i++) {
        slices[i] = (slice_t){.begin = total / SLICES * (uint64_t)i,
                              .end = total / SLICES * (uint64_t)(i + 1)};
        assert_int_equal(pthread_create(&tids[i], NULL, check_slice, &slices[i]), 0);
    }
    long long failures = 0;
    for (int i = 0; i < SLICES; i++) {
        pthread_join(tids[i], NULL);
        if (slices[i].failures)
            print_error("%lld mismatches from bits %08x on\n", slices[i].failures,
                        slices[i].first_failure);
        failures += slices[i].failures;
    }
    assert_int_equal(failures, 0);
}

KR_TEST_MAIN(test_every_fp32);
