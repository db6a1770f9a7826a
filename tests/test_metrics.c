/* Unit tests of harness/metrics: hand-worked cases, the non-finite and
 * zero-norm conventions, and bf16 ULP distances/bins against oracles that do
 * not share code or formulas with metrics.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"
#include "test_main.h"
#include "test_support.h"

#define TOL 1e-15

static void assert_close(double got, double want, double rtol)
{
    if (!(fabs(got - want) <= rtol * fabs(want) + 1e-300)) {
        print_error("got %.17g want %.17g\n", got, want);
        fail();
    }
}

/* The sums over the finite pairs of N elements, in long double: the oracle
 * of the norms, written apart from metrics.c. */
typedef struct {
    long double d2, r2, o2, orr;   /* sum (o-r)^2, r^2, o^2, o*r */
    long nfin;
} oracle_sums_t;

static oracle_sums_t oracle_sums(const float *out, const float *ref, int n)
{
    oracle_sums_t s = {0};
    for (int i = 0; i < n; i++) {
        if (!isfinite(out[i]) || !isfinite(ref[i]))
            continue;
        long double o = out[i], r = ref[i];
        s.nfin++;
        s.d2 += (o - r) * (o - r);
        s.r2 += r * r;
        s.o2 += o * o;
        s.orr += o * r;
    }
    return s;
}

/* N random reference values, Gaussian times SCALE, and outputs off them by
 * a Gaussian relative error times REL or, with REL 0, an absolute one times ABS. */
static void random_pair(float *out, float *ref, int n, uint64_t seed, double scale, double rel,
                        double abs)
{
    test_rng_t rng = {seed};
    for (int i = 0; i < n; i++) {
        ref[i] = (float)(test_rng_normal(&rng) * scale);
        const double e = test_rng_normal(&rng);
        out[i] = rel != 0 ? ref[i] * (float)(1.0 + rel * e) : ref[i] + (float)(abs * e);
    }
}

/* rel_fro, nmse, cosine and mag_ratio as the sums make them, to RTOL. */
static void expect_norms(const metrics_t *m, long double d2, long double r2, long double o2,
                         long double orr, double rtol)
{
    assert_close(m->rel_fro, (double)sqrtl(d2 / r2), rtol);
    assert_close(m->nmse, (double)(d2 / r2), rtol);
    assert_close(m->cosine, (double)(orr / sqrtl(o2 * r2)), rtol);
    assert_close(m->mag_ratio, (double)sqrtl(o2 / r2), rtol);
}

/* out = [1 2; 3 4], ref = [1 2; 3 5]:
 *   d = [0 0; 0 -1], sum d^2 = 1, sum r^2 = 1+4+9+25 = 39, sum o^2 = 30,
 *   sum o*r = 1+4+9+20 = 34.
 *   rel = 1/sqrt(39), nmse = 1/39, max_abs = 1 at flat index 3,
 *   cosine = 34/sqrt(30*39) = 34/sqrt(1170), mag = sqrt(30/39),
 *   row 0 rel 0, row 1 rel = 1/sqrt(9+25) = 1/sqrt(34) -> worst row 1. */
static void test_hand_case(void **state)
{
    (void)state;
    const float out[] = {1, 2, 3, 4}, ref[] = {1, 2, 3, 5};
    metrics_t m;
    metrics_compute(out, ref, 2, 2, &m);
    assert_int_equal(m.count, 4);
    assert_int_equal(m.finite_count, 4);
    expect_norms(&m, 1, 39, 30, 34, TOL);
    assert_close(m.max_abs, 1.0, 0);
    assert_int_equal(m.max_abs_index, 3);
    assert_close(m.worst_row_rel, 1.0 / sqrt(34.0), TOL);
    assert_int_equal(m.worst_row, 1);
    assert_int_equal(m.out_nf.nan + m.out_nf.pos_inf + m.out_nf.neg_inf, 0);
    assert_int_equal(m.ref_nf.nan + m.ref_nf.pos_inf + m.ref_nf.neg_inf, 0);

    /* Same data as one row: same global metrics, worst row 0 = global rel. */
    metrics_compute(out, ref, 1, 4, &m);
    assert_close(m.rel_fro, 1.0 / sqrt(39.0), TOL);
    assert_close(m.worst_row_rel, 1.0 / sqrt(39.0), TOL);
    assert_int_equal(m.worst_row, 0);
}

/* Negative correlation and ties: out = -ref gives cosine -1, mag 1, rel 2;
 * max |d| ties between index 0 (|2 - -2| = 4) and 3 (|-2 - 2| = 4): first wins. */
static void test_opposite_and_ties(void **state)
{
    (void)state;
    const float ref[] = {2, 1, 1, -2}, out[] = {-2, -1, -1, 2};
    metrics_t m;
    metrics_compute(out, ref, 2, 2, &m);
    assert_close(m.cosine, -1.0, TOL);
    assert_close(m.mag_ratio, 1.0, TOL);
    assert_close(m.rel_fro, 2.0, TOL);
    assert_close(m.nmse, 4.0, TOL);
    assert_close(m.max_abs, 4.0, 0);
    assert_int_equal(m.max_abs_index, 0);
    /* Both rows have rel exactly 2: the first row wins the tie. */
    assert_close(m.worst_row_rel, 2.0, TOL);
    assert_int_equal(m.worst_row, 0);
}

/* Non-finite elements are counted per side and sign and excluded from norms.
 *   idx  out    ref
 *    0   NaN    1        out NaN
 *    1   +Inf   1        out +Inf
 *    2   -Inf   -Inf     out -Inf, ref -Inf (same value, still excluded)
 *    3   1      +Inf     ref +Inf
 *    4   2      -NaN     ref NaN (negative NaN counts as NaN)
 *    5   -Inf   NaN      out -Inf, ref NaN
 *    6   3      4        finite pair: d = -1
 *    7   5      5        finite pair: d = 0
 * finite pairs: 6, 7 -> sum d^2 = 1, sum r^2 = 16 + 25 = 41, sum o^2 = 34,
 * sum o r = 12 + 25 = 37. */
static void test_nonfinite_split(void **state)
{
    (void)state;
    const float out[] = {NAN, INFINITY, -INFINITY, 1, 2, -INFINITY, 3, 5};
    const float ref[] = {1, 1, -INFINITY, INFINITY, -NAN, NAN, 4, 5};
    metrics_t m;
    metrics_compute(out, ref, 2, 4, &m);
    assert_int_equal(m.count, 8);
    assert_int_equal(m.finite_count, 2);
    assert_int_equal(m.out_nf.nan, 1);
    assert_int_equal(m.out_nf.pos_inf, 1);
    assert_int_equal(m.out_nf.neg_inf, 2);
    assert_int_equal(m.ref_nf.nan, 2);
    assert_int_equal(m.ref_nf.pos_inf, 1);
    assert_int_equal(m.ref_nf.neg_inf, 1);
    expect_norms(&m, 1, 41, 34, 37, TOL);
    assert_close(m.max_abs, 1.0, 0);
    assert_int_equal(m.max_abs_index, 6);
    /* Row 0 has no finite pair (skipped); row 1 is the only candidate. */
    assert_int_equal(m.worst_row, 1);
    assert_close(m.worst_row_rel, 1.0 / sqrt(41.0), TOL);

    nonfinite_t nf;
    nonfinite_count(ref, 8, &nf);
    assert_int_equal(nf.nan, 2);
    assert_int_equal(nf.pos_inf, 1);
    assert_int_equal(nf.neg_inf, 1);
    /* Largest finite value and smallest subnormal are finite. */
    const float edge[] = {3.4028234663852886e38f, -3.4028234663852886e38f, 1e-45f, -0.0f};
    nonfinite_count(edge, 4, &nf);
    assert_int_equal(nf.nan + nf.pos_inf + nf.neg_inf, 0);
}

static void test_all_nonfinite(void **state)
{
    (void)state;
    const float out[] = {NAN, INFINITY}, ref[] = {1, 2};
    metrics_t m;
    metrics_compute(out, ref, 1, 2, &m);
    assert_int_equal(m.finite_count, 0);
    assert_true(isnan(m.rel_fro));
    assert_true(isnan(m.nmse));
    assert_true(isnan(m.cosine));
    assert_true(isnan(m.mag_ratio));
    assert_true(isnan(m.max_abs));
    assert_int_equal(m.max_abs_index, -1);
    assert_true(isnan(m.worst_row_rel));
    assert_int_equal(m.worst_row, -1);
}

/* Zero reference norm.
 * (a) ref = 0, out = 0: no relative error exists -> NaN; max_abs 0 at index
 *     0; every row skipped.
 * (b) ref = 0, out != 0: rel NaN (undefined), but the offending row is +inf.
 * (c) rows: [0 0 | 0 0] skipped, [2 0 | 2 1] rel 1/2, [0 0 | 0 1e-30] +inf:
 *     the last row is the worst even though its absolute error is tiny. */
static void test_zero_ref(void **state)
{
    (void)state;
    metrics_t m;
    const float z[] = {0, 0, 0, 0};
    metrics_compute(z, z, 2, 2, &m);
    assert_true(isnan(m.rel_fro));
    assert_true(isnan(m.nmse));
    assert_true(isnan(m.cosine));
    assert_true(isnan(m.mag_ratio));
    assert_close(m.max_abs, 0.0, 0);
    assert_int_equal(m.max_abs_index, 0);
    assert_int_equal(m.worst_row, -1);
    assert_true(isnan(m.worst_row_rel));

    const float o2[] = {0, 0, 0, 3};
    metrics_compute(o2, z, 2, 2, &m);
    assert_true(isnan(m.rel_fro));
    assert_true(isnan(m.cosine));
    assert_close(m.max_abs, 3.0, 0);
    assert_int_equal(m.max_abs_index, 3);
    assert_int_equal(m.worst_row, 1);
    assert_true(isinf(m.worst_row_rel) && m.worst_row_rel > 0);

    const float ref3[] = {0, 0, 2, 0, 0, 0}, out3[] = {0, 0, 2, 1, 0, 1e-30f};
    metrics_compute(out3, ref3, 3, 2, &m);
    assert_close(m.rel_fro, sqrt(1.0 + 1e-60) / 2.0, 1e-7); /* 1e-30f is not exact */
    assert_int_equal(m.worst_row, 2);
    assert_true(isinf(m.worst_row_rel));
    assert_int_equal(m.max_abs_index, 3);

    /* Without the +inf row, row 1 (rel 1/2) is the worst; row 0 is skipped. */
    metrics_compute(out3, ref3, 2, 2, &m);
    assert_int_equal(m.worst_row, 1);
    assert_close(m.worst_row_rel, 0.5, TOL);

    /* out = 0, ref != 0: rel 1, cosine undefined (|out| = 0), mag 0. */
    const float r4[] = {3, 4};
    const float o4[] = {0, 0};
    metrics_compute(o4, r4, 1, 2, &m);
    assert_close(m.rel_fro, 1.0, TOL);
    assert_true(isnan(m.cosine));
    assert_close(m.mag_ratio, 0.0, 0);
    assert_close(m.max_abs, 4.0, 0);
    assert_int_equal(m.max_abs_index, 1);
}

/* The max and the sums must not depend on where a non-finite element sits
 * in a row (metrics.c switches to a careful per-element path from the first
 * group holding one) nor on the row length being a multiple of anything.
 * ref = 1..11, out = ref except: out[2] += 3, out[5] = NaN, out[9] -= 3,
 * out[10] += 2.  Finite pairs exclude index 5 (ref 6):
 *   sum d^2 = 9 + 9 + 4 = 22, sum r^2 = 506 - 36 = 470,
 *   max |d| = 3 first reached at index 2 (index 9 ties, later). */
static void test_max_paths(void **state)
{
    (void)state;
    float ref[11], out[11];
    for (int i = 0; i < 11; i++)
        ref[i] = out[i] = (float)(i + 1);
    out[2] += 3;
    out[5] = NAN;
    out[9] -= 3;
    out[10] += 2;
    metrics_t m;
    metrics_compute(out, ref, 1, 11, &m);
    assert_int_equal(m.finite_count, 10);
    assert_close(m.rel_fro, sqrt(22.0 / 470.0), TOL);
    assert_close(m.max_abs, 3.0, 0);
    assert_int_equal(m.max_abs_index, 2);
    assert_int_equal(m.out_nf.nan, 1);
    /* Without the early one, the max is at 9, after the NaN. */
    out[2] = 3;
    metrics_compute(out, ref, 1, 11, &m);
    assert_close(m.rel_fro, sqrt(13.0 / 470.0), TOL);
    assert_int_equal(m.max_abs_index, 9);
    /* Without the NaN (all on the fast path) the sums include index 5. */
    out[5] = 6;
    metrics_compute(out, ref, 1, 11, &m);
    assert_int_equal(m.finite_count, 11);
    assert_close(m.rel_fro, sqrt(13.0 / 506.0), TOL);
    assert_int_equal(m.max_abs_index, 9);
    /* Same pair as a 11 x 1 matrix: one element per row, tail path only. */
    metrics_compute(out, ref, 11, 1, &m);
    assert_close(m.rel_fro, sqrt(13.0 / 506.0), TOL);
    assert_int_equal(m.max_abs_index, 9);
    assert_int_equal(m.worst_row, 9); /* |-3| / 10 beats 2 / 11 */
    assert_close(m.worst_row_rel, 0.3, TOL);
}

/* Worst-row identification on a random matrix where one planted row has a
 * large error, plus agreement with a naive long double oracle. */
static void test_random_vs_oracle(void **state)
{
    (void)state;
    enum { M = 37, N = 53 };
    static float out[M * N], ref[M * N];
    random_pair(out, ref, M * N, 0x5eed0001, 10.0, 1e-3, 0);
    for (int j = 0; j < N; j++)
        out[21 * N + j] = ref[21 * N + j] * 1.1f; /* row 21 is 10% off */
    out[5] = NAN;
    ref[100] = -INFINITY;
    out[200] = INFINITY;
    ref[200] = INFINITY;

    oracle_sums_t all = {0};
    long double rowrel[M];
    for (int i = 0; i < M; i++) {
        const oracle_sums_t row = oracle_sums(out + i * N, ref + i * N, N);
        rowrel[i] = sqrtl(row.d2 / row.r2);
        all.d2 += row.d2;
        all.r2 += row.r2;
        all.o2 += row.o2;
        all.orr += row.orr;
        all.nfin += row.nfin;
    }
    long double mx = -1;
    long mxi = -1;
    for (int i = 0; i < M * N; i++) {
        const long double d = fabsl((long double)out[i] - ref[i]);
        if (isfinite(out[i]) && isfinite(ref[i]) && d > mx) {
            mx = d;
            mxi = i;
        }
    }
    int worst = 0;
    for (int i = 1; i < M; i++)
        if (rowrel[i] > rowrel[worst])
            worst = i;

    metrics_t m;
    metrics_compute(out, ref, M, N, &m);
    assert_int_equal(m.finite_count, all.nfin);
    assert_int_equal(m.finite_count, M * N - 3);
    expect_norms(&m, all.d2, all.r2, all.o2, all.orr, 1e-12);
    assert_close(m.max_abs, (double)mx, 1e-15);
    assert_int_equal(m.max_abs_index, mxi);
    assert_int_equal(worst, 21);
    assert_int_equal(m.worst_row, 21);
    assert_close(m.worst_row_rel, (double)rowrel[21], 1e-12);
    assert_close(m.worst_row_rel, 0.1, 1e-5); /* 1.1f and the fp32 product round */
    assert_int_equal(m.out_nf.nan, 1);
    assert_int_equal(m.out_nf.pos_inf, 1);
    assert_int_equal(m.ref_nf.pos_inf, 1);
    assert_int_equal(m.ref_nf.neg_inf, 1);
}

/* Rows are summed on several threads and folded in row order: the metrics
 * of an output big enough to be split over threads are those of one thread,
 * bit for bit (sums included), with non-finite pairs, rows judged apart, a
 * zero-reference row and tied largest |d| in far-apart rows; and the counts
 * and first-occurrence indices match a plain scan written here. */
static void test_metrics_threads_same_bits(void **state)
{
    (void)state;
    enum { M = 301, N = 1000 };     /* ~4.6 tasks of 64K elements */
    float *out = malloc(sizeof(float) * M * N), *ref = malloc(sizeof(float) * M * N);
    uint16_t *bits = malloc(sizeof(uint16_t) * M * N);
    unsigned char apart[M];
    assert_non_null(out);
    assert_non_null(ref);
    assert_non_null(bits);
    random_pair(out, ref, M * N, 0x7e11ead5, 4.0, 3e-3, 0);
    for (int j = 0; j < N; j++)
        ref[77 * N + j] = 0.0f;     /* zero reference, nonzero output: worst row +inf */
    out[10 * N + 3] = NAN;
    ref[250 * N + 999] = INFINITY;
    out[20 * N + 5] = ref[20 * N + 5] + 1000.0f; /* tied largest |d|: row 20 must win */
    out[280 * N + 5] = ref[280 * N + 5] + 1000.0f;
    for (int i = 0; i < M; i++)
        apart[i] = i % 41 == 7;
    for (int i = 0; i < M * N; i++) {
        uint32_t u;
        memcpy(&u, &out[i], sizeof u);
        bits[i] = (uint16_t)(u >> 16);
    }
    const char *saved = getenv("KREPLAY_THREADS");
    char keep[32] = "";
    if (saved)
        snprintf(keep, sizeof keep, "%s", saved);
    metrics_t m1, m4, b1, b4;
    metrics_sums_t s1, s4, t1, t4;
    setenv("KREPLAY_THREADS", "4", 1);
    metrics_compute_apart(out, NULL, ref, M, N, apart, &m4, &s4);
    metrics_compute_apart(NULL, bits, ref, M, N, apart, &b4, &t4);
    setenv("KREPLAY_THREADS", "1", 1);
    metrics_compute_apart(out, NULL, ref, M, N, apart, &m1, &s1);
    metrics_compute_apart(NULL, bits, ref, M, N, apart, &b1, &t1);
    if (saved)
        setenv("KREPLAY_THREADS", keep, 1);
    else
        unsetenv("KREPLAY_THREADS");
    assert_memory_equal(&m1, &m4, sizeof m1);
    assert_memory_equal(&s1, &s4, sizeof s1);
    assert_memory_equal(&b1, &b4, sizeof b1);
    assert_memory_equal(&t1, &t4, sizeof t1);

    long finite = 0, apart_rows = 0;
    for (int i = 0; i < M; i++) {
        apart_rows += apart[i];
        for (int j = 0; !apart[i] && j < N; j++)
            finite += isfinite(out[i * N + j]) && isfinite(ref[i * N + j]);
    }
    assert_int_equal(m4.rows_apart, apart_rows);
    assert_int_equal(m4.finite_count, finite);
    assert_int_equal(m4.max_abs_index, 20 * N + 5);
    assert_int_equal(m4.worst_row, 77);
    assert_true(isinf(m4.worst_row_rel));
    assert_int_equal(m4.out_nf.nan, 1);
    assert_int_equal(m4.ref_nf.pos_inf, 1);
    free(out);
    free(ref);
    free(bits);
}

/* Metrics of row blocks merged in order equal the metrics of the whole
 * matrix: counts, indices and non-finite splits exactly, norms to fp64
 * rounding.  The matrix has non-finite pairs, a row whose reference is zero
 * but whose output is not (worst row +inf), an all-zero row (skipped), and
 * two equal largest |d| in different blocks (the first must win). */
static void test_merge_rows_vs_whole(void **state)
{
    (void)state;
    enum { M = 37, N = 29 };
    static float out[M * N], ref[M * N];
    random_pair(out, ref, M * N, 0x5eed0042, 3.0, 0, 1e-2);
    out[2 * N + 4] = NAN;
    ref[9 * N + 1] = INFINITY;
    out[20 * N + 7] = -INFINITY;
    ref[20 * N + 7] = -INFINITY;
    for (int j = 0; j < N; j++) {
        ref[11 * N + j] = 0.0f;            /* reference zero ... */
        out[11 * N + j] = j == 3 ? 0.5f : 0.0f; /* ... output not: rel +inf */
        ref[12 * N + j] = out[12 * N + j] = 0.0f; /* skipped */
    }
    /* Two equal maxima of |d| = 40 (exact in fp32), rows 6 and 30. */
    ref[6 * N + 10] = 1.0f;
    out[6 * N + 10] = 41.0f;
    ref[30 * N + 2] = -2.0f;
    out[30 * N + 2] = 38.0f;

    /* Oracle, in long double and independent of metrics.c. */
    const oracle_sums_t all = oracle_sums(out, ref, M * N);

    metrics_t whole;
    metrics_compute(out, ref, M, N, &whole);
    const int block_sizes[] = {1, 4, 7, 13, 36, 37};
    for (size_t t = 0; t < sizeof block_sizes / sizeof block_sizes[0]; t++) {
        const int rows = block_sizes[t];
        metrics_t acc;
        metrics_sums_t acc_sums;
        metrics_merge_init(&acc, &acc_sums);
        for (int m0 = 0; m0 < M; m0 += rows) {
            const int n = m0 + rows <= M ? rows : M - m0;
            metrics_t part;
            metrics_sums_t part_sums;
            metrics_compute_sums(out + m0 * N, ref + m0 * N, n, N, &part, &part_sums);
            metrics_merge_rows(&acc, &acc_sums, &part, &part_sums, m0, N);
        }
        assert_int_equal(acc.count, M * N);
        assert_int_equal(acc.finite_count, all.nfin);
        assert_int_equal(acc.finite_count, whole.finite_count);
        assert_int_equal(acc.max_abs_index, 6 * N + 10);
        assert_true(acc.max_abs == 40.0);
        assert_int_equal(acc.worst_row, 11);
        assert_true(isinf(acc.worst_row_rel) && acc.worst_row_rel > 0);
        assert_int_equal(acc.out_nf.nan, 1);
        assert_int_equal(acc.out_nf.neg_inf, 1);
        assert_int_equal(acc.ref_nf.pos_inf, 1);
        assert_int_equal(acc.ref_nf.neg_inf, 1);
        assert_memory_equal(&acc.out_nf, &whole.out_nf, sizeof acc.out_nf);
        assert_memory_equal(&acc.ref_nf, &whole.ref_nf, sizeof acc.ref_nf);
        expect_norms(&acc, all.d2, all.r2, all.o2, all.orr, 1e-13);
        assert_close(acc.rel_fro, whole.rel_fro, 1e-14);
    }

    /* An empty merge has the conventions of an empty matrix. */
    metrics_t empty;
    metrics_sums_t empty_sums;
    metrics_merge_init(&empty, &empty_sums);
    assert_int_equal(empty.count, 0);
    assert_int_equal(empty.max_abs_index, -1);
    assert_int_equal(empty.worst_row, -1);
    assert_true(isnan(empty.rel_fro) && isnan(empty.max_abs) && isnan(empty.worst_row_rel));
}

/* ---- bf16 ULPs ---- */

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
    test_hand_case, test_opposite_and_ties, test_nonfinite_split, test_all_nonfinite,
    test_zero_ref, test_max_paths, test_random_vs_oracle, test_merge_rows_vs_whole,
    test_metrics_threads_same_bits, test_ulp_hand_pairs, test_ulp_bins,
    test_ulp_distance_vs_enumeration, test_ulp_stats, test_ulp_stats_random,
    test_ulp_stats_merge, test_ulp_apart_bands_vs_plain_pass,
    test_ulp_finite_rows_vs_plain_pass);
