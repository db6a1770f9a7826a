/* The vector MXFP4 dequantization (reference/mxfp4_dequant.h) and the
 * threads that spread it: every kernel this CPU runs, against a value
 * oracle computed here in double with ldexp (no call into formats.c or
 * mxfp4_weight.c), and bit for bit against the scalar definition
 * mxfp4_dequant_row -- NaN bits and the sign of zero included.
 *
 * Coverage is exhaustive: every packed byte meets every e8m0 scale byte
 * 0..255 in both e8m0 modes and both scale layouts, at K = 32 (one block per
 * row) and K = 512, with odd N, sub-ranges of rows and every thread count
 * that changes the split.  A kernel this CPU cannot run is reported as not
 * tested rather than passed silently. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mxfp4_dequant.h"
#include "mxfp4_weight.h"
#include "ref_parallel.h"
#include "spec_formats.h"
#include "test_main.h"
#include "test_support.h"

/* The value of a code under a scale byte, in double (exact), then rounded to
 * fp32 as the dequant's fp32 product is: 2 * 2^127 and above become Inf. */
static float oracle_value(uint8_t code, uint8_t scale_byte, e8m0_mode_t mode)
{
    const double mag = spec_e2m1(code & 7) * spec_e8m0(scale_byte, mode);
    return (float)((code & 8) ? -mag : mag);
}

typedef struct {
    const char *name;
    int64_t N, K;
    uint8_t *packed;
    uint8_t *scales_nk, *scales_kn; /* the same scales in both layouts */
} weight_case_t;

static void case_alloc(weight_case_t *w, const char *name, int64_t N, int64_t K)
{
    w->name = name;
    w->N = N;
    w->K = K;
    w->packed = malloc((size_t)(N * K / 2));
    w->scales_nk = malloc((size_t)(N * K / 32));
    w->scales_kn = malloc((size_t)(N * K / 32));
    assert_true(w->packed && w->scales_nk && w->scales_kn);
}

/* The KN copy by its own loop (not mxfp4_scales_transpose). */
static void case_fill_kn(weight_case_t *w)
{
    const int64_t B = w->K / 32;
    for (int64_t n = 0; n < w->N; n++)
        for (int64_t b = 0; b < B; b++)
            w->scales_kn[b * w->N + n] = w->scales_nk[n * B + b];
}

static void case_free(weight_case_t *w)
{
    TEST_FREE_ALL(w->packed, w->scales_nk, w->scales_kn);
}

/* K = 32: row n has scale byte n % 256 and the 16 bytes 16g .. 16g+15 with
 * g = (n / 256) % 16, so rows 0..4095 pair every scale byte with every packed
 * byte; N = 4097 adds an odd last row (scale 0, bytes 0..15 again). */
static void make_one_block_rows(weight_case_t *w)
{
    case_alloc(w, "K=32 N=4097", 4097, 32);
    for (int64_t n = 0; n < w->N; n++) {
        w->scales_nk[n] = (uint8_t)(n % 256);
        for (int j = 0; j < 16; j++)
            w->packed[n * 16 + j] = (uint8_t)(16 * ((n / 256) % 16) + j);
    }
    case_fill_kn(w);
}

/* K = 512 (16 blocks): in row n < 256, block b carries scale byte n + b
 * (mod 256) and the bytes 16b .. 16b+15 in a row-dependent order.  A scale
 * byte s therefore sits on block b of row s - b for every b, which pairs it
 * with all sixteen groups of bytes; and neighbouring blocks differ, so a
 * kernel that read the wrong block's scale, or the wrong layout, is caught.
 * Row 256 (odd N) is random. */
static void make_full_rows(weight_case_t *w)
{
    case_alloc(w, "K=512 N=257", 257, 512);
    test_rng_t rng = {0xDE0A17ull};
    for (int64_t n = 0; n < w->N; n++) {
        for (int64_t j = 0; j < 256; j++)
            w->packed[n * 256 + j] = n < 256 ? (uint8_t)((j & ~15) | ((j * 7 + n) & 15))
                                             : (uint8_t)test_rng_u64(&rng);
        for (int64_t b = 0; b < 16; b++)
            w->scales_nk[n * 16 + b] =
                n < 256 ? (uint8_t)((n + b) & 0xFF) : (uint8_t)test_rng_u64(&rng);
    }
    case_fill_kn(w);
}

/* The pairing claim above, checked rather than trusted. */
static void assert_full_rows_cover_every_pair(const weight_case_t *w)
{
    static uint8_t seen[256][256];
    memset(seen, 0, sizeof seen);
    for (int64_t n = 0; n < 256; n++)
        for (int64_t j = 0; j < 256; j++)
            seen[w->scales_nk[n * 16 + j / 16]][w->packed[n * 256 + j]] = 1;
    for (int s = 0; s < 256; s++)
        for (int byte = 0; byte < 256; byte++)
            assert_true(seen[s][byte]);
}

/* Every element of out (rows [n0, n1)) equals the oracle: same value and
 * sign of zero; NaN where the oracle is NaN. */
static void check_against_oracle(const weight_case_t *w, int64_t n0, int64_t n1,
                                 e8m0_mode_t mode, const float *out, const char *what)
{
    const int64_t K = w->K;
    for (int64_t n = n0; n < n1; n++) {
        for (int64_t k = 0; k < K; k++) {
            const uint8_t byte = w->packed[n * (K / 2) + k / 2];
            const uint8_t code = (k % 2 == 0) ? (byte & 0x0F) : (byte >> 4);
            const uint8_t sb = w->scales_nk[n * (K / 32) + k / 32];
            const float want = oracle_value(code, sb, mode);
            const float got = out[(n - n0) * K + k];
            /* A NaN scale's NaN carries the code's sign (mxfp4_weight.c
             * defines codes 8-15 as sign flips). */
            const int ok = isnan(want) ? isnan(got) && !signbit(got) == !(code & 8)
                                       : (got == want && signbit(got) == signbit(want));
            if (!ok) {
                print_error("%s, %s: row %lld k %lld (code %u, scale byte %u, mode %d): got %a "
                            "want %a\n",
                            w->name, what, (long long)n, (long long)k, code, sb, (int)mode,
                            (double)got, (double)want);
                fail();
            }
        }
    }
}

/* A buffer with guard floats on both sides, to catch a kernel writing
 * outside its rows. */
enum { GUARD = 64 };
static const uint32_t GUARD_BITS = 0x7FA5A5A5u; /* a signalling NaN no kernel produces */

static float *guarded_alloc(int64_t elems)
{
    float *buf = malloc((size_t)(elems + 2 * GUARD) * sizeof *buf);
    assert_non_null(buf);
    for (int64_t i = 0; i < elems + 2 * GUARD; i++)
        memcpy(&buf[i], &GUARD_BITS, sizeof GUARD_BITS);
    return buf + GUARD;
}

static void guarded_check_and_free(float *out, int64_t elems)
{
    float *buf = out - GUARD;
    for (int64_t i = 0; i < GUARD; i++) {
        assert_memory_equal(&buf[i], &GUARD_BITS, sizeof GUARD_BITS);
        assert_memory_equal(&out[elems + i], &GUARD_BITS, sizeof GUARD_BITS);
    }
    free(buf);
}

static const mxfp4_dequant_isa_t VECTOR_ISAS[] = {MXFP4_DEQUANT_AVX2, MXFP4_DEQUANT_AVX512};

/* One weight case: for each mode and layout, the scalar definition against
 * the oracle, then every runnable kernel (and AUTO, and the public
 * mxfp4_dequant_rows) bit-equal to the scalar output over all rows and over
 * an odd sub-range. */
static void check_case(const weight_case_t *w)
{
    const int64_t N = w->N, K = w->K, elems = N * K;
    float *scalar = guarded_alloc(elems);
    float *got = guarded_alloc(elems);
    const int64_t sub0 = 3, sub1 = N - 2; /* odd start, not the last row */
    for (int mode = E8M0_SPEC; mode <= E8M0_ZERO_IS_ZERO; mode++) {
        for (int lay = SCALE_LAYOUT_NK; lay <= SCALE_LAYOUT_KN; lay++) {
            const uint8_t *scales = lay == SCALE_LAYOUT_NK ? w->scales_nk : w->scales_kn;
            for (int64_t n = 0; n < N; n++)
                mxfp4_dequant_row(w->packed, scales, (scale_layout_t)lay, N, K, n,
                                  (e8m0_mode_t)mode, scalar + n * K);
            check_against_oracle(w, 0, N, (e8m0_mode_t)mode, scalar, "scalar row");

            const mxfp4_dequant_isa_t isas[] = {MXFP4_DEQUANT_SCALAR, MXFP4_DEQUANT_AVX2,
                                                MXFP4_DEQUANT_AVX512, MXFP4_DEQUANT_AUTO};
            for (size_t i = 0; i < sizeof isas / sizeof isas[0]; i++) {
                if (!mxfp4_dequant_isa_available(isas[i]))
                    continue;
                char what[96];
                snprintf(what, sizeof what, "%s, %s", mxfp4_dequant_isa_name(isas[i]),
                         scale_layout_name((scale_layout_t)lay));
                memset(got, 0, (size_t)elems * sizeof *got);
                mxfp4_dequant_rows_isa(isas[i], w->packed, scales, (scale_layout_t)lay, N, K, 0,
                                       N, (e8m0_mode_t)mode, got);
                check_against_oracle(w, 0, N, (e8m0_mode_t)mode, got, what);
                assert_memory_equal(got, scalar, (size_t)elems * sizeof *got);
                /* rows [sub0, sub1) land at the start of out */
                memset(got, 0, (size_t)elems * sizeof *got);
                mxfp4_dequant_rows_isa(isas[i], w->packed, scales, (scale_layout_t)lay, N, K,
                                       sub0, sub1, (e8m0_mode_t)mode, got);
                assert_memory_equal(got, scalar + sub0 * K,
                                    (size_t)((sub1 - sub0) * K) * sizeof *got);
            }
            memset(got, 0, (size_t)elems * sizeof *got);
            mxfp4_dequant_rows(w->packed, scales, (scale_layout_t)lay, N, K, 0, N,
                               (e8m0_mode_t)mode, got);
            assert_memory_equal(got, scalar, (size_t)elems * sizeof *got);
        }
    }
    guarded_check_and_free(scalar, elems);
    guarded_check_and_free(got, elems);
}

static void report_kernels_tested(void)
{
    for (size_t i = 0; i < sizeof VECTOR_ISAS / sizeof VECTOR_ISAS[0]; i++)
        print_message("dequant kernel %s: %s\n", mxfp4_dequant_isa_name(VECTOR_ISAS[i]),
                      mxfp4_dequant_isa_available(VECTOR_ISAS[i])
                          ? "tested"
                          : "NOT TESTED (this CPU or build cannot run it)");
}

static void test_every_byte_every_scale_one_block(void **state)
{
    (void)state;
    weight_case_t w;
    make_one_block_rows(&w);
    check_case(&w);
    case_free(&w);
    report_kernels_tested();
}

static void test_every_byte_every_scale_full_rows(void **state)
{
    (void)state;
    weight_case_t w;
    make_full_rows(&w);
    assert_full_rows_cover_every_pair(&w);
    check_case(&w);
    case_free(&w);
}

/* A realistic-size weight through the threaded entry point: every thread
 * count that changes the split (including more threads than the size
 * warrants) gives the scalar bits, over all rows and over a sub-range. */
static void test_parallel_matches_scalar(void **state)
{
    (void)state;
    weight_case_t w;
    case_alloc(&w, "K=1024 N=1031", 1031, 1024);
    test_rng_t rng = {0x9A7A11E1ull};
    for (int64_t i = 0; i < w.N * w.K / 2; i++)
        w.packed[i] = (uint8_t)test_rng_u64(&rng);
    for (int64_t i = 0; i < w.N * w.K / 32; i++)
        w.scales_nk[i] = (uint8_t)test_rng_u64(&rng); /* every byte, NaN and 0 included */
    case_fill_kn(&w);
    const int64_t N = w.N, K = w.K, elems = N * K;
    float *scalar = guarded_alloc(elems), *got = guarded_alloc(elems);
    for (int lay = SCALE_LAYOUT_NK; lay <= SCALE_LAYOUT_KN; lay++) {
        const uint8_t *scales = lay == SCALE_LAYOUT_NK ? w.scales_nk : w.scales_kn;
        mxfp4_dequant_rows_isa(MXFP4_DEQUANT_SCALAR, w.packed, scales, (scale_layout_t)lay, N, K,
                               0, N, E8M0_SPEC, scalar);
        check_against_oracle(&w, 0, N, E8M0_SPEC, scalar, "scalar");
        const int threads[] = {0, 1, 2, 3, 7, 64, 1000};
        for (size_t t = 0; t < sizeof threads / sizeof threads[0]; t++) {
            memset(got, 0, (size_t)elems * sizeof *got);
            mxfp4_dequant_rows_parallel(MXFP4_DEQUANT_AUTO, w.packed, scales, (scale_layout_t)lay,
                                        N, K, 0, N, E8M0_SPEC, threads[t], got);
            assert_memory_equal(got, scalar, (size_t)elems * sizeof *got);
            memset(got, 0, (size_t)elems * sizeof *got);
            mxfp4_dequant_rows_parallel(MXFP4_DEQUANT_AUTO, w.packed, scales, (scale_layout_t)lay,
                                        N, K, 511, 1030, E8M0_SPEC, threads[t], got);
            assert_memory_equal(got, scalar + 511 * K, (size_t)(519 * K) * sizeof *got);
        }
    }
    guarded_check_and_free(scalar, elems);
    guarded_check_and_free(got, elems);
    case_free(&w);
}

/* KREPLAY_DEQUANT_ISA picks what AUTO runs, among what the CPU can run;
 * anything else leaves AUTO at the widest kernel.  An explicit kernel the CPU
 * cannot run falls back to scalar. */
static void test_isa_selection(void **state)
{
    (void)state;
    const char *saved = getenv("KREPLAY_DEQUANT_ISA");
    char *saved_copy = saved ? strdup(saved) : NULL;
    unsetenv("KREPLAY_DEQUANT_ISA");
    const mxfp4_dequant_isa_t widest = mxfp4_dequant_isa_resolve(MXFP4_DEQUANT_AUTO);
    assert_int_not_equal(widest, MXFP4_DEQUANT_AUTO);
    assert_true(mxfp4_dequant_isa_available(widest));
    if (mxfp4_dequant_isa_available(MXFP4_DEQUANT_AVX512))
        assert_int_equal(widest, MXFP4_DEQUANT_AVX512);
    else if (mxfp4_dequant_isa_available(MXFP4_DEQUANT_AVX2))
        assert_int_equal(widest, MXFP4_DEQUANT_AVX2);
    else
        assert_int_equal(widest, MXFP4_DEQUANT_SCALAR);

    setenv("KREPLAY_DEQUANT_ISA", "scalar", 1);
    assert_int_equal(mxfp4_dequant_isa_resolve(MXFP4_DEQUANT_AUTO), MXFP4_DEQUANT_SCALAR);
    setenv("KREPLAY_DEQUANT_ISA", "avx2", 1);
    assert_int_equal(mxfp4_dequant_isa_resolve(MXFP4_DEQUANT_AUTO),
                     mxfp4_dequant_isa_available(MXFP4_DEQUANT_AVX2) ? MXFP4_DEQUANT_AVX2
                                                                     : widest);
    setenv("KREPLAY_DEQUANT_ISA", "sse9", 1);
    assert_int_equal(mxfp4_dequant_isa_resolve(MXFP4_DEQUANT_AUTO), widest);
    /* the variable rules AUTO only */
    setenv("KREPLAY_DEQUANT_ISA", "scalar", 1);
    assert_int_equal(mxfp4_dequant_isa_resolve(widest), widest);

    if (saved_copy) {
        setenv("KREPLAY_DEQUANT_ISA", saved_copy, 1);
        free(saved_copy);
    } else {
        unsetenv("KREPLAY_DEQUANT_ISA");
    }
    for (mxfp4_dequant_isa_t isa = MXFP4_DEQUANT_SCALAR; isa <= MXFP4_DEQUANT_AVX512; isa++) {
        mxfp4_dequant_isa_t r = mxfp4_dequant_isa_resolve(isa);
        assert_int_equal(r, mxfp4_dequant_isa_available(isa) ? isa : MXFP4_DEQUANT_SCALAR);
    }
    assert_string_equal(mxfp4_dequant_isa_name(MXFP4_DEQUANT_AVX512), "avx512");
    assert_string_equal(mxfp4_dequant_isa_name((mxfp4_dequant_isa_t)42), "unknown");
}

/* ref_parallel_ranges covers the range exactly once, in pieces no shorter
 * than asked (unless the range is), on no more threads than allowed. */
typedef struct {
    int64_t begin;
    int *hits;
    int64_t min_seen;
} coverage_t;

static void count_hits(void *arg, int64_t begin, int64_t end)
{
    coverage_t *c = arg;
    for (int64_t i = begin; i < end; i++)
        __atomic_fetch_add(&c->hits[i - c->begin], 1, __ATOMIC_RELAXED);
    int64_t len = end - begin, seen = __atomic_load_n(&c->min_seen, __ATOMIC_RELAXED);
    while (len < seen &&
           !__atomic_compare_exchange_n(&c->min_seen, &seen, len, 0, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED)) {
    }
}

static void test_parallel_ranges(void **state)
{
    (void)state;
    const struct { int64_t begin, end, min; int threads; } cases[] = {
        {0, 1, 1, 4},       {5, 6, 100, 2},    {0, 1000, 1, 2},  {10, 1010, 300, 8},
        {0, 1000, 999, 64}, {3, 10003, 7, 0},  {0, 64, 1, 1000}, {-50, 50, 0, 3},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const int64_t total = cases[i].end - cases[i].begin;
        coverage_t c = {.begin = cases[i].begin, .hits = calloc((size_t)total, sizeof(int)),
                        .min_seen = INT64_MAX};
        assert_non_null(c.hits);
        ref_parallel_ranges(cases[i].begin, cases[i].end, cases[i].min, cases[i].threads,
                            count_hits, &c);
        for (int64_t j = 0; j < total; j++)
            assert_int_equal(c.hits[j], 1);
        const int64_t want_min = cases[i].min < total ? cases[i].min : total;
        assert_true(c.min_seen >= want_min);
        free(c.hits);
    }
    /* an empty range calls nothing */
    coverage_t none = {.begin = 0, .hits = NULL, .min_seen = INT64_MAX};
    ref_parallel_ranges(7, 7, 1, 2, count_hits, &none);
    assert_true(none.min_seen == INT64_MAX);
}

static void test_thread_count(void **state)
{
    (void)state;
    const char *saved = getenv("KREPLAY_THREADS");
    char *saved_copy = saved ? strdup(saved) : NULL;
    const long online = sysconf(_SC_NPROCESSORS_ONLN);
    const int want_default = online < 1 ? 1 : online > 64 ? 64 : (int)online;
    unsetenv("KREPLAY_THREADS");
    assert_int_equal(ref_thread_count(), want_default);
    setenv("KREPLAY_THREADS", "3", 1);
    assert_int_equal(ref_thread_count(), 3);
    setenv("KREPLAY_THREADS", "100000", 1);
    assert_int_equal(ref_thread_count(), REF_PARALLEL_MAX_THREADS);
    setenv("KREPLAY_THREADS", "0", 1);
    assert_int_equal(ref_thread_count(), want_default);
    setenv("KREPLAY_THREADS", "many", 1);
    assert_int_equal(ref_thread_count(), want_default);
    if (saved_copy) {
        setenv("KREPLAY_THREADS", saved_copy, 1);
        free(saved_copy);
    } else {
        unsetenv("KREPLAY_THREADS");
    }
}

KR_TEST_MAIN(
    test_every_byte_every_scale_one_block, test_every_byte_every_scale_full_rows,
    test_parallel_matches_scalar, test_isa_selection, test_parallel_ranges, test_thread_count);
