/* Unit tests of harness/metrics' bf16 ULPs: distances and bins on hand
 * pairs and against enumeration of every code, the ULP statistics and
 * their merge, and the apart bands and finite rows against a plain pass,
 * all against oracles that do not share code or formulas with metrics.c.
 * The norms and their conventions: test_metrics.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "assert_close.h"
#include "metrics.h"
#include "test_main.h"
#include "test_support.h"

#define BF16_ONE 0x3F80
#define BF16_PINF 0x7F80
#define BF16_NINF 0xFF80
#define BF16_MAXF 0x7F7F

static void test_ulp_hand_pairs(void **state)
{
    (void)state;
    assert_true(bf16_ulp_distance(BF16_ONE, BF16_ONE) == 0);
    assert_true(bf16_ulp_distance(BF16_ONE, 0x3F81) == 1);        /* 1.0 vs nextafter */
    assert_true(bf16_ulp_distance(0x3F81, BF16_ONE) == 1);        /* symmetric */
    assert_true(bf16_ulp_distance(BF16_ONE, 0x3F7F) == 1);        /* 1.0 vs nextbelow (binade edge) */
    assert_true(bf16_ulp_distance(0x0000, 0x8000) == 0);          /* +0 vs -0 */
    assert_true(bf16_ulp_distance(0x0001, 0x8001) == 2);          /* +-min subnormal */
    assert_true(bf16_ulp_distance(0x0001, 0x0000) == 1);
    assert_true(bf16_ulp_distance(0x8001, 0x0000) == 1);
    assert_true(bf16_ulp_distance(0x0080, 0x007F) == 1);          /* min normal vs max subnormal */
    /* 1.0 and -1.0: 0x3F80 codes on each side of zero -> 2 * 16256. */
    assert_true(bf16_ulp_distance(BF16_ONE, 0xBF80) == 32512);
    assert_true(bf16_ulp_distance(BF16_MAXF, 0xFF7F) == 65278);   /* the largest distance */
    /* Non-finite. */
    assert_true(bf16_ulp_distance(BF16_MAXF, BF16_PINF) == UINT64_MAX);
    assert_true(bf16_ulp_distance(BF16_PINF, BF16_PINF) == 0);
    assert_true(bf16_ulp_distance(BF16_NINF, BF16_NINF) == 0);
    assert_true(bf16_ulp_distance(BF16_PINF, BF16_NINF) == UINT64_MAX);
    assert_true(bf16_ulp_distance(0x7FC0, 0x7FC0) == UINT64_MAX); /* NaN has no distance */
    assert_true(bf16_ulp_distance(0x7FC0, BF16_ONE) == UINT64_MAX);
    assert_true(bf16_ulp_distance(0x0000, 0xFF81) == UINT64_MAX); /* signalling -NaN */
}

/* Oracle for bins, written from the definition "bin j >= 1 is the smallest j
 * with d <= 2^(j-1), capped at 17". */
static int oracle_bin(uint64_t d)
{
    if (d == 0)
        return 0;
    for (int j = 1; j <= 16; j++)
        if (d <= (1ull << (j - 1)))
            return j;
    return 17;
}

static void test_ulp_bins(void **state)
{
    (void)state;
    for (uint64_t d = 0; d <= 70000; d++) {
        if (ulp_bin_of(d) != oracle_bin(d)) {
            print_error("d=%llu bin %d want %d\n", (unsigned long long)d, ulp_bin_of(d),
                        oracle_bin(d));
            fail();
        }
    }
    assert_int_equal(ulp_bin_of(UINT64_MAX - 1), ULP_BIN_LAST_FINITE);
    assert_int_equal(ulp_bin_of(1ull << 40), ULP_BIN_LAST_FINITE);
    /* Spot values from the header's description. */
    assert_int_equal(ulp_bin_of(3), ULP_BIN_3_4);
    assert_int_equal(ulp_bin_of(4), ULP_BIN_3_4);
    assert_int_equal(ulp_bin_of(5), 4);
    assert_int_equal(ulp_bin_of(32768), 16);
    assert_int_equal(ulp_bin_of(32769), 17);
    /* Labels agree with the bins' contents: parse "a-b" and check both ends. */
    assert_string_equal(ulp_bin_label(0), "0");
    assert_string_equal(ulp_bin_label(1), "1");
    assert_string_equal(ulp_bin_label(2), "2");
    for (int j = 3; j <= 16; j++) {
        unsigned long lo, hi;
        assert_int_equal(sscanf(ulp_bin_label(j), "%lu-%lu", &lo, &hi), 2);
        assert_int_equal(oracle_bin(lo), j);
        assert_int_equal(oracle_bin(hi), j);
        assert_int_equal(oracle_bin(lo - 1), j - 1);
        assert_int_equal(oracle_bin(hi + 1), j + 1);
    }
    assert_string_equal(ulp_bin_label(ULP_BIN_LAST_FINITE), ">32768");
    assert_string_equal(ulp_bin_label(ULP_BIN_NONFINITE), "nonfinite");
    assert_string_equal(ulp_bin_label(-1), "?");
    assert_string_equal(ulp_bin_label(ULP_BIN_COUNT), "?");
}

/* Distance oracle: decode every finite bf16 code to float (bits << 16),
 * sort the distinct values, and count the representable values between a
 * and b as the difference of their ranks.  +0 and -0 are one value. */
static float oracle_decode(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

static long rank_of(const float *vals, long n, float v)
{
    long lo = 0, hi = n - 1;
    while (lo <= hi) {
        long mid = (lo + hi) / 2;
        if (vals[mid] < v)
            lo = mid + 1;
        else if (vals[mid] > v)
            hi = mid - 1;
        else
            return mid;
    }
    return -1;
}

static int bf16_finite_code(uint16_t h) { return (h & 0x7F80) != 0x7F80; }

static void test_ulp_distance_vs_enumeration(void **state)
{
    (void)state;
    float *vals = malloc(65536 * sizeof *vals);
    assert_non_null(vals);
    long n = 0;
    for (uint32_t h = 0; h < 65536; h++)
        if (bf16_finite_code((uint16_t)h))
            vals[n++] = oracle_decode((uint16_t)h);
    qsort(vals, (size_t)n, sizeof *vals, cmp_float);
    long u = 0; /* dedupe: only +0 / -0 collide */
    for (long i = 0; i < n; i++)
        if (u == 0 || vals[i] != vals[u - 1])
            vals[u++] = vals[i];
    assert_int_equal(n, 65536 - 256); /* exponent 0xFF: 2 signs x 128 mantissas */
    assert_int_equal(u, n - 1);

    test_rng_t rng = {0xb16b00b5};
    for (int t = 0; t < 6000; t++) {
        uint16_t a, b;
        do
            a = (uint16_t)test_rng_u64(&rng);
        while (!bf16_finite_code(a));
        if (t % 2) {
            /* Half the pairs close together (small distances, crossing zero
             * and binade edges); the other half anywhere. */
            do
                b = (uint16_t)(a + (int)(test_rng_u64(&rng) % 41) - 20);
            while (!bf16_finite_code(b));
        } else {
            do
                b = (uint16_t)test_rng_u64(&rng);
            while (!bf16_finite_code(b));
        }
        long ra = rank_of(vals, u, oracle_decode(a)), rb = rank_of(vals, u, oracle_decode(b));
        assert_true(ra >= 0 && rb >= 0);
        uint64_t want = (uint64_t)(ra > rb ? ra - rb : rb - ra);
        if (bf16_ulp_distance(a, b) != want) {
            print_error("a=%04x b=%04x got %llu want %llu\n", a, b,
                        (unsigned long long)bf16_ulp_distance(a, b), (unsigned long long)want);
            fail();
        }
    }
    /* And around zero exhaustively: all small-magnitude pairs. */
    for (int x = -40; x <= 40; x++)
        for (int y = -40; y <= 40; y++) {
            uint16_t a = (uint16_t)(x < 0 ? 0x8000 | -x : x);
            uint16_t b = (uint16_t)(y < 0 ? 0x8000 | -y : y);
            long ra = rank_of(vals, u, oracle_decode(a)), rb = rank_of(vals, u, oracle_decode(b));
            assert_true(bf16_ulp_distance(a, b) == (uint64_t)labs(ra - rb));
        }
    free(vals);
}

/* ulp_stats_bf16 on hand-picked pairs:
 *   idx a       b       identical  bin        distance
 *    0  1.0     1.0     yes        0          0
 *    1  1.0     next    no         1          1
 *    2  +0      -0      no         0          0
 *    3  NaN     -NaN'   yes        0          -   (NaNs agree, any payload)
 *    4  NaN     1.0     no         nonfinite  -
 *    5  +Inf    +Inf    yes        0          0
 *    6  max     +Inf    no         nonfinite  -
 *    7  1.0     -1.0    no         16         32512 (max_ulp)
 *    8  3 ulp   apart   no         3          3
 *    9  -Inf    +Inf    no         nonfinite  -
 * identical = 3 / 10. */
static void test_ulp_stats(void **state)
{
    (void)state;
    const uint16_t a[] = {BF16_ONE, BF16_ONE, 0x0000, 0x7FC0, 0x7FC0,
                          BF16_PINF, BF16_MAXF, BF16_ONE, 0x4000, BF16_NINF};
    const uint16_t b[] = {BF16_ONE, 0x3F81, 0x8000, 0xFFC1, BF16_ONE,
                          BF16_PINF, BF16_PINF, 0xBF80, 0x4003, BF16_PINF};
    ulp_stats_t s;
    ulp_stats_bf16(a, b, 10, &s);
    assert_int_equal(s.count, 10);
    assert_int_equal(s.identical, 3);
    assert_close(s.identical_frac, 0.3, TOL);
    assert_true(s.max_ulp == 32512);
    int64_t want[ULP_BIN_COUNT] = {0};
    want[0] = 4;
    want[1] = 1;
    want[3] = 1;
    want[16] = 1;
    want[ULP_BIN_NONFINITE] = 3;
    for (int j = 0; j < ULP_BIN_COUNT; j++) {
        if (s.bins[j] != want[j]) {
            print_error("bin %d: %lld want %lld\n", j, (long long)s.bins[j], (long long)want[j]);
            fail();
        }
    }

    ulp_stats_bf16(a, b, 0, &s);
    assert_int_equal(s.count, 0);
    assert_true(isnan(s.identical_frac));
}

/* Random bf16 arrays: the histogram sums to n and matches per-pair distances
 * classified by the independent oracle_bin. */
static void test_ulp_stats_random(void **state)
{
    (void)state;
    enum { n = 5000 };
    static uint16_t a[n], b[n];
    test_rng_t rng = {42};
    int64_t want[ULP_BIN_COUNT] = {0};
    int64_t ident = 0;
    uint64_t mx = 0;
    for (int i = 0; i < n; i++) {
        a[i] = (uint16_t)test_rng_u64(&rng);
        uint64_t r = test_rng_u64(&rng);
        b[i] = (r % 4 == 0) ? (uint16_t)(r >> 8) : (uint16_t)(a[i] + (int)((r >> 8) % 9) - 4);
        int an = (a[i] & 0x7FFF) > 0x7F80, bn = (b[i] & 0x7FFF) > 0x7F80;
        if (an && bn) {
            ident++;
            want[0]++;
            continue;
        }
        if (a[i] == b[i])
            ident++;
        uint64_t d = bf16_ulp_distance(a[i], b[i]);
        if (d == UINT64_MAX) {
            want[ULP_BIN_NONFINITE]++;
        } else {
            want[oracle_bin(d)]++;
            if (d > mx)
                mx = d;
        }
    }
    ulp_stats_t s;
    ulp_stats_bf16(a, b, n, &s);
    int64_t total = 0;
    for (int j = 0; j < ULP_BIN_COUNT; j++) {
        assert_int_equal(s.bins[j], want[j]);
        total += s.bins[j];
    }
    assert_int_equal(total, n);
    assert_int_equal(s.identical, ident);
    assert_true(s.max_ulp == mx);
}

/* Histograms of blocks merged equal the histogram of the whole array. */
static void test_ulp_stats_merge(void **state)
{
    (void)state;
    enum { n = 1000 };
    test_rng_t rng = {0x5eed0043};
    static uint16_t a[n], b[n];
    for (int i = 0; i < n; i++) {
        a[i] = (uint16_t)test_rng_u64(&rng);
        /* Mostly a few ULPs apart, some far, some NaN/Inf from the raw bits. */
        b[i] = i % 7 ? (uint16_t)(a[i] + test_rng_u64(&rng) % 5) : (uint16_t)test_rng_u64(&rng);
    }
    ulp_stats_t whole, acc;
    ulp_stats_bf16(a, b, n, &whole);
    memset(&acc, 0, sizeof acc);
    for (int i0 = 0; i0 < n; i0 += 333) {
        ulp_stats_t part;
        const int len = i0 + 333 <= n ? 333 : n - i0;
        ulp_stats_bf16(a + i0, b + i0, len, &part);
        ulp_stats_merge(&acc, &part);
    }
    assert_int_equal(acc.count, whole.count);
    assert_int_equal(acc.identical, whole.identical);
    assert_true(acc.max_ulp == whole.max_ulp);
    assert_memory_equal(acc.bins, whole.bins, sizeof acc.bins);
    assert_true(acc.identical_frac == whole.identical_frac);
    assert_true(whole.bins[ULP_BIN_NONFINITE] > 0 && whole.bins[ULP_BIN_1] > 0);
}

static double bf16_as_double(uint16_t h)
{
    const uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* What ulp_stats_bf16_vs_f32_apart must count over M rows of N, written
 * element by element here: bins by the independent oracle_bin, the signed
 * tallies from the values, the rounding fit by bf16_round_mode. */
static void plain_ulp_pass(const uint16_t *out, const float *ref, int M, int N,
                           const unsigned char *apart, ulp_stats_t *e)
{
    memset(e, 0, sizeof *e);
    for (int m = 0; m < M; m++) {
        if (apart && apart[m])
            continue;
        for (int j = m * N; j < (m + 1) * N; j++) {
            e->count++;
            uint32_t u;
            memcpy(&u, &ref[j], sizeof u);
            const uint16_t rb = (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
            const uint64_t d = bf16_ulp_distance(out[j], rb);
            const int out_nan = (out[j] & 0x7FFF) > 0x7F80;
            e->identical += out[j] == rb;
            if (d == UINT64_MAX) {
                e->bins[ULP_BIN_NONFINITE]++;
            } else {
                e->bins[oracle_bin(d)]++;
                e->max_ulp = d > e->max_ulp ? d : e->max_ulp;
                if (d) {
                    const double o = bf16_as_double(out[j]), r = bf16_as_double(rb);
                    /* Away: farther from zero on the reference's side, or
                     * any move off a zero reference; an output on the
                     * other side of zero went toward zero and past it. */
                    const int same_side = (o > 0 && r > 0) || (o < 0 && r < 0);
                    const int is_away = r == 0.0 || (same_side && fabs(o) > fabs(r));
                    e->toward_zero += !is_away;
                    e->away_zero += is_away;
                    e->signed_ulp_sum += is_away ? (int64_t)d : -(int64_t)d;
                }
            }
            /* The rounding fit counts finite pairs only. */
            if (out_nan || (out[j] & 0x7FFF) == 0x7F80 || !isfinite(ref[j]))
                continue;
            uint16_t c[ROUND_MODE_COUNT];
            int same = 1;
            for (int md = 0; md < ROUND_MODE_COUNT; md++) {
                c[md] = bf16_round_mode(ref[j], (round_mode_t)md);
                same &= c[md] == c[0];
            }
            if (!same) {
                e->round_decided++;
                for (int md = 0; md < ROUND_MODE_COUNT; md++)
                    e->round_match[md] += out[j] == c[md];
            }
        }
    }
}

static void expect_ulp_stats_equal(const ulp_stats_t *s, const ulp_stats_t *e)
{
    assert_int_equal(s->count, e->count);
    assert_int_equal(s->identical, e->identical);
    assert_memory_equal(s->bins, e->bins, sizeof e->bins);
    assert_true(s->max_ulp == e->max_ulp);
    assert_int_equal(s->toward_zero, e->toward_zero);
    assert_int_equal(s->away_zero, e->away_zero);
    assert_int_equal(s->signed_ulp_sum, e->signed_ulp_sum);
    assert_int_equal(s->round_decided, e->round_decided);
    assert_memory_equal(s->round_match, e->round_match, sizeof e->round_match);
}

/* ulp_stats_bf16_vs_f32_apart measures row bands in parallel and merges
 * them: over several bands, with rows set apart, it must count what the
 * plain pass counts. */
static void test_ulp_apart_bands_vs_plain_pass(void **state)
{
    (void)state;
    enum { M = 203, N = 97 };       /* 13 bands of 16 rows, the last short */
    static uint16_t out[M * N];
    static float ref[M * N];
    static unsigned char apart[M];
    test_rng_t rng = {0x0b5e55ed};
    for (int i = 0; i < M * N; i++) {
        ref[i] = (float)(test_rng_normal(&rng) * 3.0);
        const uint64_t r = test_rng_u64(&rng);
        uint32_t u;
        memcpy(&u, &ref[i], sizeof u);
        /* The output: the reference's bf16 rounding nudged a few ULPs, its
         * truncation, or a NaN now and then. */
        out[i] = r % 5 == 0 ? (uint16_t)(u >> 16)
               : r % 97 == 0 ? (uint16_t)0x7FC1
               : (uint16_t)(((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16) + (int)((r >> 8) % 5) - 2);
    }
    for (int m = 0; m < M; m++)
        apart[m] = m % 17 == 3;
    ulp_stats_t s, e;
    plain_ulp_pass(out, ref, M, N, apart, &e);
    ulp_stats_bf16_vs_f32_apart(out, ref, M, N, apart, &s);
    expect_ulp_stats_equal(&s, &e);
    assert_true(e.round_decided > 100 && e.bins[ULP_BIN_NONFINITE] > 0 && e.toward_zero > 0 &&
                e.away_zero > 0);
}

/* Rows whose outputs and rounded references are all finite are counted by
 * a pass of their own (reductions over the row): the same counts as the
 * plain pass over distances from 0 to thousands of ULPs, both signs, values
 * crossing zero, subnormals, references that round to the largest finite
 * bf16 or to Inf, and a few rows holding an Inf or a NaN. */
static void test_ulp_finite_rows_vs_plain_pass(void **state)
{
    (void)state;
    enum { M = 150, N = 131 };
    static uint16_t out[M * N];
    static float ref[M * N];
    test_rng_t rng = {0xf1417e};
    for (int i = 0; i < M * N; i++) {
        const uint64_t r = test_rng_u64(&rng);
        const int kind = (int)(r % 16);
        /* Mostly O(1) values; some near zero (subnormal bf16), some near
         * bf16's largest finite value. */
        ref[i] = (float)(test_rng_normal(&rng) * (kind == 0 ? 1e-39 : kind == 1 ? 3.3e38 : 2.0));
        uint32_t u;
        memcpy(&u, &ref[i], sizeof u);
        const uint16_t rb = (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
        /* Nudged in the bf16 ordinal: mostly 0..2 ULPs, sometimes up to 4000
         * (across zero when the value is small); kept finite here. */
        const int nudge = (int)((r >> 8) % 5) - 2 + ((r >> 16) % 8 == 0 ? (int)((r >> 20) % 8001) - 4000 : 0);
        int32_t o = (rb & 0x8000) ? -(int32_t)(rb & 0x7FFF) : (int32_t)rb;
        o += nudge;
        /* A few far apart: up to 2^15 ULPs, and the other sign's value of the
         * same magnitude (2^15 and more apart when the value is large). */
        if ((r >> 16) % 64 == 1)
            o += (int32_t)((r >> 24) % 65001) - 32500;
        else if ((r >> 16) % 64 == 2)
            o = -o;
        if (o > 0x7F7F)
            o = 0x7F7F;
        if (o < -0x7F7F)
            o = -0x7F7F;
        out[i] = o < 0 ? (uint16_t)(0x8000 | -o) : (uint16_t)o;
        if ((rb & 0x7F80) == 0x7F80)
            out[i] = rb;        /* a reference rounding to Inf: the output says Inf too */
    }
    out[7 * N + 3] = 0x7F80;    /* +Inf against a finite reference */
    out[40 * N + 9] = 0xFFC0;   /* a NaN */
    ref[90 * N + 1] = INFINITY;
    ulp_stats_t s, e;
    plain_ulp_pass(out, ref, M, N, NULL, &e);
    ulp_stats_bf16_vs_f32_apart(out, ref, M, N, NULL, &s);
    expect_ulp_stats_equal(&s, &e);
    /* The data reach what the row pass has to get right. */
    int64_t far = 0;
    for (int b = 3; b <= ULP_BIN_LAST_FINITE; b++)
        far += e.bins[b];
    assert_true(e.bins[ULP_BIN_1] > 1000 && e.bins[2] > 1000 && far > 1000);
    assert_true(e.max_ulp >= 3000 && e.bins[ULP_BIN_NONFINITE] > 0 && e.round_decided > 1000);
    for (int b = ULP_BIN_3_4; b <= ULP_BIN_LAST_FINITE; b++)
        if (e.bins[b] == 0)
            fail_msg("no pair in bin %d (%s): the data do not reach every far bin", b, ulp_bin_label(b));
    assert_true(e.toward_zero > 1000 && e.away_zero > 1000);
}

KR_TEST_MAIN(
    test_ulp_hand_pairs, test_ulp_bins, test_ulp_distance_vs_enumeration, test_ulp_stats,
    test_ulp_stats_random, test_ulp_stats_merge, test_ulp_apart_bands_vs_plain_pass,
    test_ulp_finite_rows_vs_plain_pass);
