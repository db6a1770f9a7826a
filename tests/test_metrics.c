/* Unit tests of harness/metrics: hand-worked cases, the non-finite and
 * zero-norm conventions, the norms against a long double oracle that does
 * not share code or formulas with metrics.c, threads and merged rows.  The
 * bf16 ULP distances, bins and statistics: test_metrics_ulp.c. */
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

KR_TEST_MAIN(
    test_hand_case, test_opposite_and_ties, test_nonfinite_split, test_all_nonfinite, test_zero_ref,
    test_max_paths, test_random_vs_oracle, test_merge_rows_vs_whole,
    test_metrics_threads_same_bits);
