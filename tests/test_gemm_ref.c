/* ctest-labels: blas-bits */
/* Unit tests of reference/gemm_ref: the fp32 and fp64 MXFP4 references, the
 * reusable fp32 context and its chunking policy, and the dense sgemm wrapper
 * against a naive long double oracle that dequantizes the weight with its own
 * loop (no call into formats.c or mxfp4_weight.c).
 *
 * Error bounds: a dot product of length K computed in precision u, in any
 * summation order and with or without FMA, satisfies elementwise
 *   |C_computed - C_exact| <= gamma_K * (|A| @ |W|^T),  gamma_K = K u / (1 - K u)
 * (Higham, Accuracy and Stability, 3.5).  The dequantized weights are exact
 * in fp32 and fp64 (3 significant bits times a power of two), so this is the
 * whole error budget, plus the long double oracle's own gamma_K(2^-64). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gemm_ref.h"
#include "mx_oracle.h"
#include "test_main.h"
#include "test_support.h"

/* Independent dequant of element (n, k), NK-layout scales, from docs/NUMERICS.md:
 *   code = k even ? byte & 0xF : byte >> 4;  w = +-E2M1[code & 7] * 2^(E - 127). */
static long double oracle_w(const uint8_t *packed, const uint8_t *scales_nk, int64_t K,
                            int64_t n, int64_t k, e8m0_mode_t mode)
{
    uint8_t byte = packed[n * (K / 2) + k / 2];
    uint8_t code = (k % 2 == 0) ? (byte & 0xF) : (byte >> 4);
    uint8_t e = scales_nk[n * (K / 32) + k / 32];
    return test_mx_value(code, e, mode);   /* exact in double: +-6 x 2^127 at most */
}

typedef struct {
    int64_t M, N, K;
    float *A;
    uint8_t *packed, *scales_nk, *scales_kn;
    long double *C;      /* exact product (up to the oracle's own rounding) */
    long double *absum;  /* |A| @ |W|^T, for the error bound */
} problem_t;

static void problem_make(problem_t *p, int64_t M, int64_t N, int64_t K, uint64_t seed)
{
    test_rng_t rng = {seed};
    p->M = M, p->N = N, p->K = K;
    p->A = malloc((size_t)(M * K) * sizeof *p->A);
    p->packed = malloc((size_t)(N * K / 2));
    p->scales_nk = malloc((size_t)(N * K / 32));
    p->scales_kn = malloc((size_t)(N * K / 32));
    p->C = malloc((size_t)(M * N) * sizeof *p->C);
    p->absum = malloc((size_t)(M * N) * sizeof *p->absum);
    assert_true(p->A && p->packed && p->scales_nk && p->scales_kn && p->C && p->absum);
    for (int64_t i = 0; i < M * K; i++)
        p->A[i] = (float)test_rng_normal(&rng);
    for (int64_t i = 0; i < N * K / 2; i++)
        p->packed[i] = (uint8_t)test_rng_u64(&rng);
    /* Realistic checkpoint scales: 2^-17 .. 2^8. */
    for (int64_t i = 0; i < N * K / 32; i++)
        p->scales_nk[i] = (uint8_t)(110 + test_rng_u64(&rng) % 26);
    for (int64_t n = 0; n < N; n++)
        for (int64_t b = 0; b < K / 32; b++)
            p->scales_kn[b * N + n] = p->scales_nk[n * (K / 32) + b];
}

static void problem_oracle(problem_t *p, e8m0_mode_t mode)
{
    const int64_t M = p->M, N = p->N, K = p->K;
    long double *w = malloc((size_t)K * sizeof *w);
    assert_non_null(w);
    for (int64_t n = 0; n < N; n++) {
        for (int64_t k = 0; k < K; k++)
            w[k] = oracle_w(p->packed, p->scales_nk, K, n, k, mode);
        for (int64_t m = 0; m < M; m++) {
            long double s = 0, a = 0;
            for (int64_t k = 0; k < K; k++) {
                s += (long double)p->A[m * K + k] * w[k];
                a += fabsl((long double)p->A[m * K + k] * w[k]);
            }
            p->C[m * N + n] = s;
            p->absum[m * N + n] = a;
        }
    }
    free(w);
}

static void problem_free(problem_t *p)
{
    TEST_FREE_ALL(p->A, p->packed, p->scales_nk, p->scales_kn, p->C, p->absum);
}

static mxfp4_weight_t weight_of(const problem_t *p, scale_layout_t layout, e8m0_mode_t mode)
{
    mxfp4_weight_t w = {.packed = p->packed,
                        .scales = layout == SCALE_LAYOUT_NK ? p->scales_nk : p->scales_kn,
                        .layout = layout,
                        .e8m0_mode = mode,
                        .N = p->N,
                        .K = p->K};
    return w;
}

static long double gamma_k(int64_t K, long double u)
{
    return (long double)K * u / (1.0L - (long double)K * u);
}

/* Elementwise |got - C| <= gamma * absum, and relative Frobenius error. */
static long double check_bound(const problem_t *p, const float *c32, const double *c64,
                               long double u)
{
    const long double g = gamma_k(p->K, u) + gamma_k(p->K, 0x1p-64L);
    long double d2 = 0, r2 = 0;
    for (int64_t i = 0; i < p->M * p->N; i++) {
        long double got = c32 ? (long double)c32[i] : (long double)c64[i];
        long double err = fabsl(got - p->C[i]);
        if (!(err <= g * p->absum[i])) {
            print_error("element %lld: got %.10Lg want %.10Lg err %.3Lg bound %.3Lg\n",
                        (long long)i, got, p->C[i], err, g * p->absum[i]);
            fail();
        }
        d2 += err * err;
        r2 += p->C[i] * p->C[i];
    }
    assert_true(r2 > 0); /* the problem is not trivially zero */
    return sqrtl(d2 / r2);
}

static void run_shape(int64_t M, int64_t N, int64_t K, uint64_t seed)
{
    problem_t p;
    problem_make(&p, M, N, K, seed);
    problem_oracle(&p, E8M0_SPEC);
    mxfp4_weight_t w = weight_of(&p, SCALE_LAYOUT_NK, E8M0_SPEC);
    kr_error_t err = {{0}};

    double *c64 = malloc((size_t)(M * N) * sizeof *c64);
    float *c32 = malloc((size_t)(M * N) * sizeof *c32);
    assert_true(c64 && c32);
    assert_int_equal(gemm_ref_f64(p.A, M, &w, 0, c64, &err), 0);
    long double rel64 = check_bound(&p, NULL, c64, 0x1p-53L);
    assert_true(rel64 < 1e-13L);

    assert_int_equal(gemm_ref_f32(p.A, M, &w, 0, c32, &err), 0);
    long double rel32 = check_bound(&p, c32, NULL, 0x1p-24L);
    /* Normal data: the Frobenius error is ~sqrt(K) u, far inside the bound,
     * and nonzero (fp32 did round somewhere). */
    assert_true(rel32 < 1e-5L);
    assert_true(rel32 > 0);
    free(c64);
    free(c32);
    problem_free(&p);
}

static void test_small_shape(void **state)
{
    (void)state;
    run_shape(7, 50, 96, 1);
}

static void test_medium_shape(void **state)
{
    (void)state;
    run_shape(33, 300, 640, 2);
}

/* Chunking only changes which rows of W are dequantized together.
 *
 * Bit-identity across chunk sizes does NOT hold in general with OpenBLAS
 * 0.3.21: on SkylakeX-class cores (DYNAMIC_ARCH picks "Cooperlake" on the
 * development host) a call whose row-major M*n <= 1200 and M*n*K <= 1e6 goes
 * to the "small matrix" kernel, which accumulates in a different order from
 * the blocked kernel (measured: with M = 9, K = 128, a column computed in a
 * call of n < 134 columns differs from the same column of a wide call).
 * So:
 *  - every chunk size, down to 1, must stay within the gamma_K bound of the
 *    exact product and write every column (C is pre-filled with NaN);
 *  - chunk sizes whose sub-calls all stay in the blocked regime (M*n >= 4608
 *    here) must agree bitwise: the blocked kernel's per-element order over K
 *    does not depend on the call's N extent or its thread partition. */
static void test_chunking(void **state)
{
    (void)state;
    const int64_t M = 9, K = 128;
    kr_error_t err = {{0}};
    for (int part = 0; part < 2; part++) {
        /* part 0: N = 4100 and budgets of any size; part 1: N = 4096 and
         * budgets that split it into wide pieces.  Both within the bound and
         * bitwise equal to the default budget. */
        const int64_t N = part == 0 ? 4100 : 4096;
        const int64_t bound_chunks[] = {0, 1, 7, 64, 2048, 4099, 4100, 1 << 30};
        const int64_t wide_chunks[] = {0, 512, 1024, 2048, 3000, 4096, 1 << 30};
        const int64_t *chunks = part == 0 ? bound_chunks : wide_chunks;
        const size_t nchunks = part == 0 ? sizeof bound_chunks / sizeof bound_chunks[0]
                                         : sizeof wide_chunks / sizeof wide_chunks[0];
        problem_t p;
        problem_make(&p, M, N, K, 3 + (uint64_t)part);
        problem_oracle(&p, E8M0_SPEC);
        mxfp4_weight_t w = weight_of(&p, SCALE_LAYOUT_NK, E8M0_SPEC);
        float *ref32 = malloc((size_t)(M * N) * sizeof *ref32);
        float *c32 = malloc((size_t)(M * N) * sizeof *c32);
        double *ref64 = malloc((size_t)(M * N) * sizeof *ref64);
        double *c64 = malloc((size_t)(M * N) * sizeof *c64);
        assert_true(ref32 && c32 && ref64 && c64);
        assert_int_equal(gemm_ref_f32(p.A, M, &w, 0, ref32, &err), 0);
        assert_int_equal(gemm_ref_f64(p.A, M, &w, 0, ref64, &err), 0);
        for (size_t c = 0; c < nchunks; c++) {
            memset(c32, 0xFF, (size_t)(M * N) * sizeof *c32); /* NaN: catches unwritten columns */
            memset(c64, 0xFF, (size_t)(M * N) * sizeof *c64);
            assert_int_equal(gemm_ref_f32(p.A, M, &w, chunks[c], c32, &err), 0);
            assert_int_equal(gemm_ref_f64(p.A, M, &w, chunks[c], c64, &err), 0);
            check_bound(&p, c32, NULL, 0x1p-24L);
            check_bound(&p, NULL, c64, 0x1p-53L);
            /* The fp32 reference's grid of calls does not depend on the
             * budget, so neither do its bits.  The fp64 oracle's dgemm calls
             * do follow chunk_n: it is only ever held to its bound. */
            if (memcmp(c32, ref32, (size_t)(M * N) * sizeof *c32) != 0) {
                print_error("fp32 result with chunk_n=%lld differs bitwise from the default\n",
                            (long long)chunks[c]);
                fail();
            }
        }
        TEST_FREE_ALL(ref32, c32, ref64, c64);
        problem_free(&p);
    }
}

/* Both scale layouts describe the same weight: identical bits out. */
static void test_layouts(void **state)
{
    (void)state;
    const int64_t M = 5, N = 48, K = 256; /* N = 48: a GDN in_proj_ba-like width */
    problem_t p;
    problem_make(&p, M, N, K, 4);
    problem_oracle(&p, E8M0_SPEC);
    mxfp4_weight_t wnk = weight_of(&p, SCALE_LAYOUT_NK, E8M0_SPEC);
    mxfp4_weight_t wkn = weight_of(&p, SCALE_LAYOUT_KN, E8M0_SPEC);
    kr_error_t err = {{0}};
    float a32[5 * 48], b32[5 * 48];
    double a64[5 * 48], b64[5 * 48];
    assert_int_equal(gemm_ref_f32(p.A, M, &wnk, 0, a32, &err), 0);
    assert_int_equal(gemm_ref_f32(p.A, M, &wkn, 0, b32, &err), 0);
    assert_int_equal(gemm_ref_f64(p.A, M, &wnk, 0, a64, &err), 0);
    assert_int_equal(gemm_ref_f64(p.A, M, &wkn, 0, b64, &err), 0);
    check_bound(&p, a32, NULL, 0x1p-24L);
    check_bound(&p, NULL, b64, 0x1p-53L);
    assert_memory_equal(a32, b32, sizeof a32);
    assert_memory_equal(a64, b64, sizeof a64);
    problem_free(&p);
}

/* Special scale bytes.  Column 0 has byte 0 in every block, column 1 has
 * 0xFF (NaN) in its second block, column 2 has byte 0 in its first block
 * only; everything else stays realistic.
 *   E8M0_SPEC:         byte 0 is 2^-127, so column 0 is tiny but NOT zero;
 *   E8M0_ZERO_IS_ZERO: byte 0 is 0, so column 0 is exactly 0;
 *   0xFF: column 1 is NaN in every row (NaN * anything, including 0).
 * In fp32 the 2^-127-scaled products are subnormal and round absolutely
 * (|eta| <= 2^-150 each), hence the K * 2^-149 slack on top of gamma_K. */
static void test_special_scales(void **state)
{
    (void)state;
    enum { M = 3, N = 4, K = 64 };
    problem_t p;
    problem_make(&p, M, N, K, 5);
    p.scales_nk[0 * 2 + 0] = 0;
    p.scales_nk[0 * 2 + 1] = 0;
    p.scales_nk[1 * 2 + 1] = 0xFF;
    p.scales_nk[2 * 2 + 0] = 0;
    for (int64_t n = 0; n < N; n++)
        for (int64_t b = 0; b < K / 32; b++)
            p.scales_kn[b * N + n] = p.scales_nk[n * (K / 32) + b];
    kr_error_t err = {{0}};
    for (int mode = E8M0_SPEC; mode <= E8M0_ZERO_IS_ZERO; mode++) {
        problem_oracle(&p, (e8m0_mode_t)mode);
        for (int lay = SCALE_LAYOUT_NK; lay <= SCALE_LAYOUT_KN; lay++) {
            mxfp4_weight_t w = weight_of(&p, (scale_layout_t)lay, (e8m0_mode_t)mode);
            float c32[M * N];
            double c64[M * N];
            assert_int_equal(gemm_ref_f32(p.A, M, &w, 1, c32, &err), 0);
            assert_int_equal(gemm_ref_f64(p.A, M, &w, 0, c64, &err), 0);
            for (int64_t m = 0; m < M; m++) {
                assert_true(isnan(c32[m * N + 1]));
                assert_true(isnan(c64[m * N + 1]));
                for (int64_t n = 0; n < N; n++) {
                    if (n == 1)
                        continue;
                    const int64_t i = m * N + n;
                    assert_true(fabsl((long double)c64[i] - p.C[i]) <=
                                gamma_k(K, 0x1p-53L) * p.absum[i]);
                    assert_true(fabsl((long double)c32[i] - p.C[i]) <=
                                gamma_k(K, 0x1p-24L) * p.absum[i] + K * 0x1p-149L);
                }
                const long double c0 = p.C[m * N + 0];
                if (mode == E8M0_ZERO_IS_ZERO) {
                    assert_true(c0 == 0.0L);
                    assert_true(c32[m * N] == 0.0f);
                    assert_true(c64[m * N] == 0.0);
                } else {
                    /* ~2^-127 * O(10): below FLT_MIN-ish but nonzero, and
                     * exact-ish in fp64. */
                    assert_true(c0 != 0.0L && fabsl(c0) < 0x1p-100L);
                    assert_true(c32[m * N] != 0.0f);
                    assert_true(fabsl((long double)c64[m * N] - c0) <= 1e-13L * fabsl(c0));
                }
            }
        }
    }
    problem_free(&p);
}

static void test_bad_dims(void **state)
{
    (void)state;
    uint8_t packed[64 * 16] = {0}, scales[64] = {127};
    float A[64 * 64] = {0}, C32[64 * 64];
    double C64[64 * 64];
    struct { int64_t M, N, K; } bad[] = {{0, 4, 32}, {-1, 4, 32}, {2, 0, 32}, {2, -3, 32},
                                         {2, 4, 0}, {2, 4, 16}, {2, 4, 48}, {2, 4, -32}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        mxfp4_weight_t w = {.packed = packed, .scales = scales, .layout = SCALE_LAYOUT_NK,
                            .e8m0_mode = E8M0_SPEC, .N = bad[i].N, .K = bad[i].K};
        kr_error_t err = {{0}};
        assert_int_equal(gemm_ref_f32(A, bad[i].M, &w, 0, C32, &err), -1);
        assert_true(strlen(err.msg) > 0);
        memset(&err, 0, sizeof err);
        assert_int_equal(gemm_ref_f64(A, bad[i].M, &w, 0, C64, &err), -1);
        assert_true(strlen(err.msg) > 0);
    }
    /* The K % 32 message names the constraint. */
    mxfp4_weight_t w = {.packed = packed, .scales = scales, .layout = SCALE_LAYOUT_NK,
                        .e8m0_mode = E8M0_SPEC, .N = 4, .K = 48};
    kr_error_t err = {{0}};
    assert_int_equal(gemm_ref_f32(A, 2, &w, 0, C32, &err), -1);
    assert_non_null(strstr(err.msg, "32"));
    /* NULL operands fail cleanly too, and a NULL err is allowed. */
    w.K = 32;
    assert_int_equal(gemm_ref_f32(NULL, 2, &w, 0, C32, &err), -1);
    assert_int_equal(gemm_ref_f64(A, 2, NULL, 0, C64, &err), -1);
    assert_int_equal(gemm_ref_f32(A, 2, &w, 0, NULL, NULL), -1);
    /* A valid call after all that works (and is exactly zero here: A = 0). */
    assert_int_equal(gemm_ref_f32(A, 2, &w, 0, C32, &err), 0);
    for (int i = 0; i < 8; i++)
        assert_true(C32[i] == 0.0f);
}

/* The chunking policy, worked by hand: about 48 MiB of fp32 per chunk,
 * equal chunks, a function of (N, K) alone. */
static void test_chunk_policy(void **state)
{
    (void)state;
    const int64_t row = 5120 * 4; /* bytes of one dequantized row at K = 5120 */
    assert_int_equal(GEMM_REF_CHUNK_BYTES / row, 2457);
    /* 17408 rows at K = 5120: 8 chunks of 2176 (17408/8) rather than 7 of
     * 2457 and a sliver of 209. */
    assert_int_equal(gemm_ref_chunk_rows(17408, 5120), 2176);
    /* 4915 rows: 3 chunks of 1639 (4915/3 = 1638.3); 2048 rows fit in one */
    assert_int_equal(gemm_ref_chunk_rows(4915, 5120), 1639);
    assert_int_equal(gemm_ref_chunk_rows(2048, 5120), 2048);
    assert_int_equal(gemm_ref_chunk_rows(2457, 5120), 2457);
    assert_int_equal(gemm_ref_chunk_rows(2458, 5120), 1229);
    assert_int_equal(gemm_ref_chunk_rows(48, 5120), 48);
    /* K = 8704: 1445 rows of 48 MiB, 4 chunks of 1280 (5120/4) */
    assert_int_equal(gemm_ref_chunk_rows(5120, 8704), 1280);
    /* rows over 48 MiB each: one row a call; dimensions whose product would
     * overflow int64 if multiplied out */
    assert_int_equal(gemm_ref_chunk_rows(4096, INT64_C(16) << 20), 1);
    assert_int_equal(gemm_ref_chunk_rows(INT64_C(1) << 40, INT64_C(1) << 40), 1);
    assert_int_equal(gemm_ref_chunk_rows(0, 64), 0);
    assert_int_equal(gemm_ref_chunk_rows(10, 0), 0);
    /* never more than 48 MiB a chunk, never more chunks than needed */
    for (int64_t N = 1; N <= 3000; N += 37)
        for (int64_t K = 32; K <= 65536; K *= 4) {
            const int64_t got = gemm_ref_chunk_rows(N, K);
            const int64_t target = GEMM_REF_CHUNK_BYTES / (K * 4);
            const int64_t want_chunks = target >= N ? 1 : (N + target - 1) / target;
            assert_true(got >= 1 && got <= N);
            assert_true(got <= target || got == 1);
            assert_int_equal((N + got - 1) / got, want_chunks);
        }
}

/* The context gives the one-shot reference's bits, on any number of calls,
 * with any A and M, whether it holds the whole W or dequantizes chunk by
 * chunk; the chunk it keeps from the previous call changes nothing.  N x K
 * is 50 MiB of fp32: two chunks of 800 rows. */
static void test_context_reuse(void **state)
{
    (void)state;
    const int64_t N = 1600, K = 8192;
    const int64_t Ms[] = {7, 20, 1, 13};
    const int64_t budgets_rows[] = {N, 100, 7}; /* whole W; two budgets under one chunk */
    assert_int_equal(gemm_ref_chunk_rows(N, K), 800);
    problem_t p[4];
    for (int i = 0; i < 4; i++) {
        problem_make(&p[i], Ms[i], N, K, 40 + (uint64_t)i);
        /* the same weight for every problem; only A and M differ */
        if (i > 0) {
            memcpy(p[i].packed, p[0].packed, (size_t)(N * K / 2));
            memcpy(p[i].scales_nk, p[0].scales_nk, (size_t)(N * K / 32));
            memcpy(p[i].scales_kn, p[0].scales_kn, (size_t)(N * K / 32));
        }
        problem_oracle(&p[i], E8M0_SPEC);
    }
    kr_error_t err = {{0}};
    for (int lay = SCALE_LAYOUT_NK; lay <= SCALE_LAYOUT_KN; lay++) {
        mxfp4_weight_t w = weight_of(&p[0], (scale_layout_t)lay, E8M0_SPEC);
        for (size_t b = 0; b < sizeof budgets_rows / sizeof budgets_rows[0]; b++) {
            const int64_t budget = budgets_rows[b] * K * (int64_t)sizeof(float);
            gemm_ref_ctx_t *ctx = NULL;
            assert_int_equal(gemm_ref_ctx_init(&ctx, &w, budget, &err), 0);
            assert_non_null(ctx);
            assert_int_equal(gemm_ref_ctx_holds_whole_weight(ctx), budgets_rows[b] >= N);
            assert_int_equal(gemm_ref_ctx_buffer_bytes(ctx),
                             (budgets_rows[b] >= N ? N : 800) * K * (int64_t)sizeof(float));
            assert_int_equal(gemm_ref_ctx_panel_rows(ctx), GEMM_REF_PANEL_ROWS);
            /* two rounds over the four problems: every call after the first
             * starts from whatever the previous one left in the buffer */
            for (int round = 0; round < 2; round++) {
                for (int i = 0; i < 4; i++) {
                    const int64_t M = Ms[i];
                    float *got = malloc((size_t)(M * N) * sizeof *got);
                    float *fresh = malloc((size_t)(M * N) * sizeof *fresh);
                    assert_true(got && fresh);
                    memset(got, 0xFF, (size_t)(M * N) * sizeof *got); /* NaN: unwritten columns */
                    assert_int_equal(gemm_ref_ctx_f32(ctx, p[i].A, M, got, &err), 0);
                    check_bound(&p[i], got, NULL, 0x1p-24L);
                    /* the one-shot reference, whatever its budget */
                    assert_int_equal(gemm_ref_f32(p[i].A, M, &w, budgets_rows[b], fresh, &err), 0);
                    assert_memory_equal(got, fresh, (size_t)(M * N) * sizeof *got);
                    assert_int_equal(gemm_ref_f32(p[i].A, M, &w, 1, fresh, &err), 0);
                    assert_memory_equal(got, fresh, (size_t)(M * N) * sizeof *got);
                    free(got);
                    free(fresh);
                }
            }
            gemm_ref_ctx_free(ctx);
        }
    }
    for (int i = 0; i < 4; i++)
        problem_free(&p[i]);
}

/* Rows computed in blocks that start at multiples of the row panel give the
 * bits of one call over all the rows (the calls are the same calls), for the
 * MXFP4 reference under every budget and for the dense one.  The panel is
 * set small so that a 37-row problem spans several; blocks of 8 and 16 rows
 * and a short last block.  Checked against the bound as well, so a grid
 * that skipped a panel could not pass by being equally wrong twice. */
static void test_row_blocks_same_bits(void **state)
{
    (void)state;
    const int64_t M = 37, N = 2800, K = 4608; /* 49.2 MiB of fp32: two chunks of 1400 */
    assert_int_equal(gemm_ref_chunk_rows(N, K), 1400);
    problem_t p;
    problem_make(&p, M, N, K, 70);
    problem_oracle(&p, E8M0_SPEC);
    mxfp4_weight_t w = weight_of(&p, SCALE_LAYOUT_KN, E8M0_SPEC);
    kr_error_t err = {{0}};
    float *whole = malloc((size_t)(M * N) * sizeof *whole);
    float *blocked = malloc((size_t)(M * N) * sizeof *blocked);
    float *B = malloc((size_t)(N * K) * sizeof *B);
    assert_true(whole && blocked && B);
    const int64_t budgets_rows[] = {N, 1400, 3};
    const int64_t blocks[] = {8, 16};
    for (size_t b = 0; b < sizeof budgets_rows / sizeof budgets_rows[0]; b++) {
        gemm_ref_ctx_t *ctx;
        assert_int_equal(
            gemm_ref_ctx_init(&ctx, &w, budgets_rows[b] * K * (int64_t)sizeof(float), &err), 0);
        gemm_ref_ctx_set_panel_rows(ctx, 8);
        assert_int_equal(gemm_ref_ctx_panel_rows(ctx), 8);
        assert_int_equal(gemm_ref_ctx_f32(ctx, p.A, M, whole, &err), 0);
        check_bound(&p, whole, NULL, 0x1p-24L);
        for (size_t k = 0; k < sizeof blocks / sizeof blocks[0]; k++) {
            memset(blocked, 0xFF, (size_t)(M * N) * sizeof *blocked);
            for (int64_t m0 = 0; m0 < M; m0 += blocks[k]) {
                const int64_t rows = m0 + blocks[k] < M ? blocks[k] : M - m0;
                assert_int_equal(gemm_ref_ctx_f32(ctx, p.A + m0 * K, rows, blocked + m0 * N, &err),
                                 0);
            }
            assert_memory_equal(blocked, whole, (size_t)(M * N) * sizeof *whole);
        }
        gemm_ref_ctx_set_panel_rows(ctx, 0);
        assert_int_equal(gemm_ref_ctx_panel_rows(ctx), GEMM_REF_PANEL_ROWS);
        gemm_ref_ctx_free(ctx);
    }
    /* The dense reference on the dequantized weight: the same grid. */
    for (int64_t n = 0; n < N; n++)
        for (int64_t k = 0; k < K; k++)
            B[n * K + k] = (float)oracle_w(p.packed, p.scales_nk, K, n, k, E8M0_SPEC);
    gemm_dense_f32_panels(p.A, B, M, N, K, 8, whole);
    check_bound(&p, whole, NULL, 0x1p-24L);
    for (int64_t m0 = 0; m0 < M; m0 += 16) {
        const int64_t rows = m0 + 16 < M ? 16 : M - m0;
        gemm_dense_f32_panels(p.A + m0 * K, B, rows, N, K, 8, blocked + m0 * N);
    }
    assert_memory_equal(blocked, whole, (size_t)(M * N) * sizeof *whole);
    TEST_FREE_ALL(whole, blocked, B);
    problem_free(&p);
}

/* The dequant's thread count (KREPLAY_THREADS) does not change a bit. */
static void test_context_thread_count(void **state)
{
    (void)state;
    const int64_t M = 5, N = 1100, K = 1024; /* 1.1M elements: split over up to 4 threads */
    problem_t p;
    problem_make(&p, M, N, K, 50);
    mxfp4_weight_t w = weight_of(&p, SCALE_LAYOUT_KN, E8M0_SPEC);
    const char *saved = getenv("KREPLAY_THREADS");
    char *saved_copy = saved ? strdup(saved) : NULL;
    float *c1 = malloc((size_t)(M * N) * sizeof *c1), *c3 = malloc((size_t)(M * N) * sizeof *c3);
    assert_true(c1 && c3);
    kr_error_t err = {{0}};
    setenv("KREPLAY_THREADS", "1", 1);
    assert_int_equal(gemm_ref_f32(p.A, M, &w, 0, c1, &err), 0);
    setenv("KREPLAY_THREADS", "3", 1);
    assert_int_equal(gemm_ref_f32(p.A, M, &w, 0, c3, &err), 0);
    assert_memory_equal(c1, c3, (size_t)(M * N) * sizeof *c1);
    if (saved_copy) {
        setenv("KREPLAY_THREADS", saved_copy, 1);
        free(saved_copy);
    } else {
        unsetenv("KREPLAY_THREADS");
    }
    free(c1);
    free(c3);
    problem_free(&p);
}

static void test_context_bad_args(void **state)
{
    (void)state;
    uint8_t packed[4 * 16] = {0}, scales[4] = {127};
    float A[2 * 32] = {0}, C[2 * 4];
    kr_error_t err = {{0}};
    gemm_ref_ctx_t *ctx = (gemm_ref_ctx_t *)&err; /* must be reset to NULL on failure */
    mxfp4_weight_t w = {.packed = packed, .scales = scales, .layout = SCALE_LAYOUT_NK,
                        .e8m0_mode = E8M0_SPEC, .N = 4, .K = 48};
    assert_int_equal(gemm_ref_ctx_init(&ctx, &w, 0, &err), -1);
    assert_null(ctx);
    assert_non_null(strstr(err.msg, "32"));
    assert_int_equal(gemm_ref_ctx_init(&ctx, NULL, 0, &err), -1);
    assert_int_equal(gemm_ref_ctx_init(NULL, &w, 0, &err), -1);
    w.K = 32;
    w.packed = NULL;
    assert_int_equal(gemm_ref_ctx_init(&ctx, &w, 0, NULL), -1);
    w.packed = packed;
    w.layout = (scale_layout_t)7;
    assert_int_equal(gemm_ref_ctx_init(&ctx, &w, 0, &err), -1);
    w.layout = SCALE_LAYOUT_NK;
    assert_int_equal(gemm_ref_ctx_init(&ctx, &w, 0, &err), 0);
    memset(&err, 0, sizeof err);
    assert_int_equal(gemm_ref_ctx_f32(ctx, A, 0, C, &err), -1);
    assert_true(strlen(err.msg) > 0);
    assert_int_equal(gemm_ref_ctx_f32(ctx, NULL, 2, C, &err), -1);
    assert_int_equal(gemm_ref_ctx_f32(ctx, A, 2, NULL, NULL), -1);
    assert_int_equal(gemm_ref_ctx_f32(NULL, A, 2, C, &err), -1);
    /* still usable after refused calls: A = 0 gives exact zeros */
    assert_int_equal(gemm_ref_ctx_f32(ctx, A, 2, C, &err), 0);
    for (int i = 0; i < 8; i++)
        assert_true(C[i] == 0.0f);
    assert_int_equal(gemm_ref_ctx_panel_rows(NULL), 0);
    gemm_ref_ctx_free(ctx);
    gemm_ref_ctx_free(NULL);
}

static void test_dense(void **state)
{
    (void)state;
    const int64_t M = 11, N = 37, K = 200;
    test_rng_t rng = {6};
    float *A = malloc((size_t)(M * K) * sizeof *A), *B = malloc((size_t)(N * K) * sizeof *B);
    float *C = malloc((size_t)(M * N) * sizeof *C);
    assert_true(A && B && C);
    for (int64_t i = 0; i < M * K; i++)
        A[i] = (float)test_rng_normal(&rng);
    for (int64_t i = 0; i < N * K; i++)
        B[i] = (float)(test_rng_normal(&rng) * 0.01);
    gemm_dense_f32(A, B, M, N, K, C);
    const long double g = gamma_k(K, 0x1p-24L);
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            long double s = 0, a = 0;
            for (int64_t k = 0; k < K; k++) {
                long double pr = (long double)A[m * K + k] * B[n * K + k]; /* exact */
                s += pr;
                a += fabsl(pr);
            }
            assert_true(fabsl((long double)C[m * N + n] - s) <= g * a);
        }
    /* K = 0 is the zero matrix, M = 0 writes nothing. */
    for (int64_t i = 0; i < M * N; i++)
        C[i] = 1.0f;
    gemm_dense_f32(A, B, M, N, 0, C);
    for (int64_t i = 0; i < M * N; i++)
        assert_true(C[i] == 0.0f);
    C[0] = 5.0f;
    gemm_dense_f32(A, B, 0, N, K, C);
    assert_true(C[0] == 5.0f);
    TEST_FREE_ALL(A, B, C);
}

KR_TEST_MAIN(
    test_small_shape, test_medium_shape, test_chunking, test_layouts, test_special_scales,
    test_bad_dims, test_chunk_policy, test_context_reuse, test_row_blocks_same_bits,
    test_context_thread_count, test_context_bad_args, test_dense);
