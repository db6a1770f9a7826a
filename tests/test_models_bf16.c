/* The unquantized-layer CPU models: bf16.skinny (the skinny dispatch's
 * split-K kernel), bf16.sequential (rocBLAS/torch as modelled) and
 * ref_linear (the MXFP4 dispatch's RADIANCE_MXFP4_REFLINEAR).
 *
 * Oracles, all independent of the models' code: hand-worked cases whose
 * expected bf16 bits are derived in the comments; a long double GEMM on the
 * operands this file decodes itself (bf16 bits, e2m1, 2^(E-127)); and plain
 * scalar re-implementations of the stated orders (one output at a time, the
 * partials stored and reduced afterwards), which must match bit for bit.
 * The only model-against-model comparisons are the skinny-vs-sequential
 * statistic (measured and printed, not pinned) and ref_linear ==
 * bf16.sequential when the bf16 weight IS the dequantized MXFP4 weight. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "case_io.h"
#include "formats.h"
#include "registry.h"
#include "spec_formats.h"
#include "synth.h"
#include "test_cases.h"
#include "test_main.h"
#include "test_support.h"

extern const kernel_desc_t kernel_bf16_skinny;
extern const kernel_desc_t kernel_bf16_sequential;
extern const kernel_desc_t kernel_ref_linear;

/* ---------------------------------------------------------------- operands */

typedef struct {
    int64_t M, N, K;
    float *x;               /* [M, K] */
    uint16_t *wb;           /* [N, K] bf16 bits, or NULL */
    uint8_t *packed;        /* [N, K/2] MXFP4, or NULL */
    uint8_t *scales;        /* by layout */
    scale_layout_t layout;
    kernel_inputs_t in;
} operands_t;

static void ops_finish(operands_t *o)
{
    o->in = test_mxfp4_inputs(o->M, o->N, o->K, o->packed, o->scales, o->layout, E8M0_SPEC);
    o->in.x = o->x;
    o->in.weight_bf16 = o->wb;
}

static void ops_zero(operands_t *o, int64_t M, int64_t N, int64_t K)
{
    memset(o, 0, sizeof *o);
    o->M = M;
    o->N = N;
    o->K = K;
    o->x = calloc((size_t)(M * K), sizeof(float));
    o->wb = calloc((size_t)(N * K), sizeof(uint16_t));
    assert_non_null(o->x);
    assert_non_null(o->wb);
    ops_finish(o);
}

/* Gaussian x (sigma 1) and W (sigma 0.02), both bf16-exact. */
static void ops_gaussian(operands_t *o, int64_t M, int64_t N, int64_t K, uint64_t seed)
{
    ops_zero(o, M, N, K);
    test_rng_t r = {seed};
    for (int64_t i = 0; i < M * K; i++)
        o->x[i] = spec_bf16(spec_bf16_rne((float)test_rng_normal(&r)));
    for (int64_t i = 0; i < N * K; i++)
        o->wb[i] = spec_bf16_rne((float)(0.02 * test_rng_normal(&r)));
}

/* A random MXFP4 weight: random codes, block exponents 127 + [-6, 2]. */
static void ops_add_mxfp4(operands_t *o, scale_layout_t layout, uint64_t seed)
{
    test_rng_t r = {seed};
    const int64_t N = o->N, K = o->K;
    o->packed = malloc((size_t)(N * K / 2));
    o->scales = malloc((size_t)(N * K / 32));
    assert_non_null(o->packed);
    assert_non_null(o->scales);
    for (int64_t i = 0; i < N * K / 2; i++)
        o->packed[i] = (uint8_t)test_rng_u64(&r);
    for (int64_t i = 0; i < N * K / 32; i++)
        o->scales[i] = (uint8_t)(121 + test_rng_u64(&r) % 9);
    o->layout = layout;
    ops_finish(o);
}

/* Without the bf16 weight (an MXFP4-only layer, or a missing operand). */
static void ops_drop_bf16_weight(operands_t *o)
{
    free(o->wb);
    o->wb = NULL;
    ops_finish(o);
}

static void ops_free(operands_t *o)
{
    TEST_FREE_ALL(o->x, o->wb, o->packed, o->scales);
    memset(o, 0, sizeof *o);
}

/* Runs a model the way replay does (constraints, prepare_act, run_cpu).
 * Returns 0, or -1 with err holding the reason. */
static int run_model(const kernel_desc_t *k, const kernel_inputs_t *in, int decode_splits,
                     uint16_t *out, kernel_run_info_t *info, kr_error_t *err)
{
    char why[256];
    if (kernel_unsupported_reason(k, in->M, in->N, in->K, why, sizeof why))
        return kr_fail(err, "%s", why);
    kernel_options_t opt;
    kernel_options_default(&opt);
    opt.decode_splits = decode_splits;
    kernel_act_t act;
    if (k->prepare_act(k, in, &opt, &act, err))
        return -1;
    kernel_run_info_t local = {{0}};
    int rc = k->run_cpu(k, in, &act, &opt, out, info ? info : &local, err);
    kernel_act_free(&act);
    return rc;
}

static uint16_t *run_ok(const kernel_desc_t *k, const operands_t *o, int decode_splits)
{
    uint16_t *out = malloc((size_t)(o->M * o->N) * sizeof(uint16_t));
    assert_non_null(out);
    memset(out, 0xEE, (size_t)(o->M * o->N) * sizeof(uint16_t));   /* never-written shows */
    kr_error_t err = {{0}};
    if (run_model(k, &o->in, decode_splits, out, NULL, &err))
        fail_msg("%s on %lldx%lld M=%lld: %s", k->name, (long long)o->N, (long long)o->K,
                 (long long)o->M, err.msg);
    return out;
}

/* ---------------------------------------------------------------- independent orders */

/* One output of the skinny order, scalar: the SK partials are computed
 * first into their own array, then reduced left to right. */
static uint16_t scalar_split_dot(const float *x, const uint16_t *w, int64_t K, int sk)
{
    float partial[64] = {0};
    assert_true(sk >= 1 && sk <= 64 && K % sk == 0);
    const int64_t S = K / sk;
    for (int s = 0; s < sk; s++) {
        float p = 0.0f;
        for (int64_t i = 0; i < S; i++) {
            const float prod = x[s * S + i] * spec_bf16(w[s * S + i]);
            p = p + prod;
        }
        partial[s] = p;
    }
    float acc = partial[0];
    for (int s = 1; s < sk; s++)
        acc = acc + partial[s];
    return spec_bf16_rne(acc);
}

/* The MXFP4 weight value by the spec, in double (exact). */
static double spec_mxfp4_w(const operands_t *o, int64_t n, int64_t k)
{
    const uint8_t byte = o->packed[n * (o->K / 2) + k / 2];
    const uint8_t code = (k & 1) ? (uint8_t)(byte >> 4) : (uint8_t)(byte & 15);
    const int64_t b = k / 32;
    const uint8_t e = o->layout == SCALE_LAYOUT_NK ? o->scales[n * (o->K / 32) + b]
                                                   : o->scales[b * o->N + n];
    return ldexp(spec_e2m1(code), (int)e - 127);
}

/* long double GEMM on exact operands: out[m][n] and sum |x*w| (for the
 * fp32 accumulation bound).  wb != NULL: the bf16 weight; else MXFP4. */
static void oracle(const operands_t *o, long double *exact, long double *abs_sum)
{
    for (int64_t m = 0; m < o->M; m++)
        for (int64_t n = 0; n < o->N; n++) {
            long double s = 0, a = 0;
            for (int64_t k = 0; k < o->K; k++) {
                const long double w = o->wb ? (long double)spec_bf16(o->wb[n * o->K + k])
                                            : (long double)spec_mxfp4_w(o, n, k);
                const long double p = (long double)o->x[m * o->K + k] * w;
                s += p;
                a += fabsl(p);
            }
            exact[m * o->N + n] = s;
            abs_sum[m * o->N + n] = a;
        }
}

/* Every element within the rigorous bound: fp32 accumulation of at most
 * `adds` additions (gamma_adds * sum|x*w|), then one bf16 rounding
 * (2^-8 relative); and rel_fro below the bf16 rounding unit 2^-8. */
static void check_against_oracle(const char *name, const operands_t *o, const uint16_t *out,
                                 int64_t adds)
{
    const int64_t MN = o->M * o->N;
    long double *exact = malloc((size_t)MN * sizeof(long double));
    long double *abs_sum = malloc((size_t)MN * sizeof(long double));
    assert_non_null(exact);
    assert_non_null(abs_sum);
    oracle(o, exact, abs_sum);
    const long double u = 0x1p-24L, gamma = adds * u / (1 - adds * u);
    long double num = 0, den = 0;
    int64_t outside = 0, nonzero = 0;
    for (int64_t i = 0; i < MN; i++) {
        const long double got = spec_bf16(out[i]);
        const long double acc_err = gamma * abs_sum[i];
        const long double bound = 0x1p-8L * (fabsl(exact[i]) + acc_err) + acc_err;
        const long double d = got - exact[i];
        outside += fabsl(d) > bound;
        nonzero += got != 0;
        num += d * d;
        den += exact[i] * exact[i];
    }
    const double rel = (double)sqrtl(num / den);
    print_message("%-16s %lldx%lld M=%-2lld rel_fro vs long double %.3e (bf16 unit 3.9e-03), "
                  "%lld of %lld outside the bound\n", name, (long long)o->N, (long long)o->K,
                  (long long)o->M, rel, (long long)outside, (long long)MN);
    assert_int_equal(outside, 0);
    assert_true(rel < 0x1p-8);
    assert_true(nonzero > MN / 2);
    free(exact);
    free(abs_sum);
}

/* ---------------------------------------------------------------- descriptors */

static void test_descriptors(void **st)
{
    (void)st;
    const kernel_desc_t *all[] = {&kernel_bf16_skinny, &kernel_bf16_sequential,
                                  &kernel_ref_linear};
    for (size_t i = 0; i < 3; i++) {
        const kernel_desc_t *k = all[i];
        assert_int_equal(k->op, KERNEL_OP_GEMM);
        assert_int_equal(k->refs, REF_SOURCE);
        assert_true(k->rel_tol_source > 0 && k->rel_tol_source <= 0.01);
        assert_non_null(k->accumulation);
        assert_null(strchr(k->accumulation, '\n'));
        assert_non_null(k->prepare_act);
        assert_non_null(k->run_cpu);
    }
    assert_string_equal(kernel_bf16_skinny.name, "bf16.skinny");
    assert_int_equal(kernel_bf16_skinny.m_min, 6);
    assert_int_equal(kernel_bf16_skinny.m_max, 64);
    assert_int_equal(kernel_bf16_skinny.k_multiple, 256);
    assert_non_null(strstr(kernel_bf16_skinny.accumulation, "_CFG_TAXED"));
    assert_string_equal(kernel_bf16_sequential.name, "bf16.sequential");
    assert_int_equal(kernel_bf16_sequential.m_min, 1);
    assert_int_equal(kernel_bf16_sequential.m_max, 0);
    assert_int_equal(kernel_bf16_sequential.k_multiple, 32);
    assert_string_equal(kernel_ref_linear.name, "ref_linear");
    assert_int_equal(kernel_ref_linear.k_multiple, 32);
}

/* ---------------------------------------------------------------- hand-worked */

/* K = 512, N = 1, w = 2.0 everywhere, so x[k] * w[k] = 2 x[k] exactly.  The
 * rows of x place a few products P[k] (all other products +0):
 *
 * row 0: P[0] = 2^24, P[256] = P[257] = 1, P[258] = -2^24
 *   SK=2 (ranges of 256): partial0 = 2^24; partial1 = 1 + 1 - 2^24 = -16777214
 *     (exact, below 2^24); acc = 2^24 - 16777214 = 2                 -> 0x4000
 *   SK=4 (ranges of 128): partials 2^24, 0, -16777214, 0; acc = 2     -> 0x4000
 *   sequential: 2^24 + 1 = 16777217 is a tie between 16777216 (even) and
 *     16777218 -> 2^24; again 2^24; - 2^24 = 0                       -> 0x0000
 * row 1: P[0] = 2^24, P[128] = 1, P[256] = 1, P[384] = -2^24, P[385] = 4
 *   SK=4: partials 2^24, 1, 1, -16777212; split order: 2^24 + 1 -> 2^24 (tie
 *     to even), + 1 -> 2^24, - 16777212 = 4                           -> 0x4080
 *     (a reversed reduction would give 6 = 0x40C0, a pairwise tree 5 = 0x40A0)
 *   SK=2: partial0 = 2^24 + 1 -> 2^24; partial1 = 1 - 2^24 + 4 = -16777211;
 *     acc = 5                                                          -> 0x40A0
 *   sequential: 2^24, 2^24, 2^24, 0, 4                                -> 0x4080
 * row 2: all 512 products 1: every order sums 512 exactly              -> 0x4400
 * rows 3, 4: rows 0, 1 negated: the same magnitudes, negative, except that
 *   sequential row 3 cancels to -2^24 + 2^24 = +0 (RNE)                -> 0x0000
 * row 5: zeros                                                         -> 0x0000 */
static void test_hand_split_vs_sequential(void **st)
{
    (void)st;
    operands_t o;
    ops_zero(&o, 6, 1, 512);
    for (int64_t k = 0; k < 512; k++)
        o.wb[k] = 0x4000;                   /* 2.0 */
    float *x = o.x;
    x[0 * 512 + 0] = 0x1p23f, x[0 * 512 + 256] = 0.5f, x[0 * 512 + 257] = 0.5f;
    x[0 * 512 + 258] = -0x1p23f;
    x[1 * 512 + 0] = 0x1p23f, x[1 * 512 + 128] = 0.5f, x[1 * 512 + 256] = 0.5f;
    x[1 * 512 + 384] = -0x1p23f, x[1 * 512 + 385] = 2.0f;
    for (int64_t k = 0; k < 512; k++) {
        x[2 * 512 + k] = 0.5f;
        x[3 * 512 + k] = -x[0 * 512 + k];
        x[4 * 512 + k] = -x[1 * 512 + k];
    }
    /* 1x512 is not a measured shape: SK comes from decode_splits. */
    const uint16_t want_sk2[6] = {0x4000, 0x40A0, 0x4400, 0xC000, 0xC0A0, 0x0000};
    const uint16_t want_sk4[6] = {0x4000, 0x4080, 0x4400, 0xC000, 0xC080, 0x0000};
    const uint16_t want_seq[6] = {0x0000, 0x4080, 0x4400, 0x0000, 0xC080, 0x0000};
    uint16_t *sk2 = run_ok(&kernel_bf16_skinny, &o, 2);
    uint16_t *sk4 = run_ok(&kernel_bf16_skinny, &o, 4);
    uint16_t *seq = run_ok(&kernel_bf16_sequential, &o, 0);
    for (int m = 0; m < 6; m++) {
        print_message("row %d: SK=2 %04x SK=4 %04x sequential %04x\n", m, sk2[m], sk4[m], seq[m]);
        assert_int_equal(sk2[m], want_sk2[m]);
        assert_int_equal(sk4[m], want_sk4[m]);
        assert_int_equal(seq[m], want_seq[m]);
    }
    TEST_FREE_ALL(sk2, sk4, seq);
    ops_free(&o);
}

/* The measured tables, as the skinny dispatch states them. */
static const struct {
    int64_t n, k;
    int sk;
} table_shapes[] = {
    {256, 2048, 16},                                        /* _CFG */
    {48, 5120, 8}, {96, 5120, 8}, {1280, 5120, 8}, {256, 5120, 8},  /* _CFG_TAXED */
};
#define N_TABLE (sizeof table_shapes / sizeof table_shapes[0])

/* Pins each table's SK by hand.  S = K / SK.  Output (5, N-1) only sees, with
 * w = 2.0 on row N-1: P[0] = 2^24, P[S] = P[S+1] = P[S+2] = 1, P[2S-1] = -2^24.
 *   SK splits:     partial0 = 2^24, partial1 = 3 - 2^24 = -16777213 (exact);
 *                  acc = 3                                             -> 0x4040
 *   SK/2 splits:   partial0 = 2^24 + 1 + 1 + 1 (each a tie to 2^24) - 2^24 = 0 -> 0x0000
 *   2*SK splits:   partials 2^24, 0, 3, -2^24: 2^24 + 3 = 16777219 is a tie
 *                  between 16777218 (odd) and 16777220 (even) -> 16777220;
 *                  - 2^24 = 4                                          -> 0x4080
 *   sequential:    as SK/2                                             -> 0x0000
 * Every other output is +0. */
static void test_hand_table_splits(void **st)
{
    (void)st;
    for (size_t t = 0; t < N_TABLE; t++) {
        const int64_t N = table_shapes[t].n, K = table_shapes[t].k;
        const int sk = table_shapes[t].sk;
        const int64_t S = K / sk, M = 6;
        operands_t o;
        ops_zero(&o, M, N, K);
        uint16_t *w = o.wb + (N - 1) * K;
        float *x = o.x + 5 * K;
        const int64_t at[5] = {0, S, S + 1, S + 2, 2 * S - 1};
        const float xv[5] = {0x1p23f, 0.5f, 0.5f, 0.5f, -0x1p23f};
        for (int i = 0; i < 5; i++) {
            w[at[i]] = 0x4000;
            x[at[i]] = xv[i];
        }
        uint16_t *table = run_ok(&kernel_bf16_skinny, &o, 0);
        uint16_t *half = run_ok(&kernel_bf16_skinny, &o, sk / 2);
        uint16_t *twice = run_ok(&kernel_bf16_skinny, &o, 2 * sk);
        uint16_t *seq = run_ok(&kernel_bf16_sequential, &o, 0);
        const int64_t idx = 5 * N + N - 1;
        print_message("%lldx%lld (SK %d): table %04x, SK/2 %04x, 2SK %04x, sequential %04x\n",
                      (long long)N, (long long)K, sk, table[idx], half[idx], twice[idx], seq[idx]);
        assert_int_equal(table[idx], 0x4040);
        assert_int_equal(half[idx], 0x0000);
        assert_int_equal(twice[idx], 0x4080);
        assert_int_equal(seq[idx], 0x0000);
        for (int64_t i = 0; i < M * N; i++)
            if (i != idx)
                assert_int_equal(table[i], 0x0000);
        /* The run says which table SK came from. */
        kernel_run_info_t info = {{0}};
        kr_error_t err = {{0}};
        assert_int_equal(run_model(&kernel_bf16_skinny, &o.in, 0, table, &info, &err), 0);
        char want[64];
        snprintf(want, sizeof want, "split-K %d (%s)", sk, t == 0 ? "_CFG" : "_CFG_TAXED");
        assert_string_equal(info.note, want);
        TEST_FREE_ALL(table, half, twice, seq);
        ops_free(&o);
    }
}

/* ---------------------------------------------------------------- random data */

/* bf16.skinny against the scalar split order, bit for bit, and both models
 * against the long double oracle, on every table shape at M = 6 and 64. */
static void test_table_shapes_random(void **st)
{
    (void)st;
    const int64_t Ms[2] = {6, 64};
    for (size_t t = 0; t < N_TABLE; t++)
        for (int i = 0; i < 2; i++) {
            const int64_t N = table_shapes[t].n, K = table_shapes[t].k, M = Ms[i];
            const int sk = table_shapes[t].sk;
            operands_t o;
            ops_gaussian(&o, M, N, K, 100 + 10 * t + (uint64_t)i);
            uint16_t *skinny = run_ok(&kernel_bf16_skinny, &o, 0);
            uint16_t *seq = run_ok(&kernel_bf16_sequential, &o, 0);
            int64_t mismatch_skinny = 0, mismatch_seq = 0;
            for (int64_t m = 0; m < M; m++)
                for (int64_t n = 0; n < N; n++) {
                    const float *xr = o.x + m * K;
                    const uint16_t *wr = o.wb + n * K;
                    mismatch_skinny += skinny[m * N + n] != scalar_split_dot(xr, wr, K, sk);
                    mismatch_seq += seq[m * N + n] != scalar_split_dot(xr, wr, K, 1);
                }
            if (mismatch_skinny || mismatch_seq)
                fail_msg("%lldx%lld M=%lld: %lld skinny and %lld sequential outputs differ from "
                         "the scalar orders", (long long)N, (long long)K, (long long)M,
                         (long long)mismatch_skinny, (long long)mismatch_seq);
            check_against_oracle("bf16.skinny", &o, skinny, K / sk + sk);
            check_against_oracle("bf16.sequential", &o, seq, K);
            free(skinny);
            free(seq);
            ops_free(&o);
        }
}

/* The skinny dispatch saw the kernel differ from rocBLAS on about 1 element
 * in 432 by one bf16 ULP.  Here: the same statistic between the two models
 * on Gaussian data at the b/a projection's shape, M = 8..64.  Printed, not
 * pinned (the real distribution of activations and weights differs). */
static void test_skinny_vs_sequential_statistic(void **st)
{
    (void)st;
    const int64_t N = 96, K = 5120;
    int64_t hist[4] = {0}, total = 0, max_ulp = 0, rows_differ = 0, rows = 0;
    int64_t skinny_rn = 0, seq_rn = 0;
    operands_t o;
    ops_gaussian(&o, 64, N, K, 4242);     /* one weight; each M gets its own x */
    uint16_t *w = o.wb;
    o.wb = NULL;
    ops_free(&o);
    test_rng_t r = {4243};
    for (int64_t M = 8; M <= 64; M++) {
        operands_t a;
        ops_zero(&a, M, N, K);
        memcpy(a.wb, w, (size_t)(N * K) * sizeof(uint16_t));
        for (int64_t i = 0; i < M * K; i++)
            a.x[i] = spec_bf16(spec_bf16_rne((float)test_rng_normal(&r)));
        uint16_t *skinny = run_ok(&kernel_bf16_skinny, &a, 0);
        uint16_t *seq = run_ok(&kernel_bf16_sequential, &a, 0);
        for (int64_t m = 0; m < M; m++) {
            int differ = 0;
            for (int64_t n = 0; n < N; n++) {
                const int64_t d = spec_bf16_ulps(skinny[m * N + n], seq[m * N + n]);
                hist[d < 3 ? d : 3]++;
                max_ulp = d > max_ulp ? d : max_ulp;
                differ |= d != 0;
                /* Which of the two is the correctly rounded exact product? */
                double e = 0;
                for (int64_t k = 0; k < K; k++)
                    e += (double)a.x[m * K + k] * (double)spec_bf16(a.wb[n * K + k]);
                const uint16_t rn = spec_bf16_rne((float)e);   /* double->float->bf16: fine off ties */
                skinny_rn += skinny[m * N + n] == rn;
                seq_rn += seq[m * N + n] == rn;
            }
            rows_differ += differ;
            rows++;
        }
        total += M * N;
        free(skinny);
        free(seq);
        ops_free(&a);
    }
    free(w);
    const int64_t differ = total - hist[0];
    print_message("bf16.skinny vs bf16.sequential at 96x5120, M=8..64, Gaussian data: "
                  "%lld elements\n", (long long)total);
    print_message("  ULP histogram: 0: %lld, 1: %lld, 2: %lld, >2: %lld (max %lld)\n",
                  (long long)hist[0], (long long)hist[1], (long long)hist[2], (long long)hist[3],
                  (long long)max_ulp);
    print_message("  differ on %lld elements = 1 in %.0f (the dispatch saw ~1 in 432 vs rocBLAS); "
                  "%lld of %lld rows have a difference\n", (long long)differ,
                  differ ? (double)total / (double)differ : 0.0, (long long)rows_differ,
                  (long long)rows);
    print_message("  correctly rounded (vs double): skinny %.4f%%, sequential %.4f%%\n",
                  100.0 * (double)skinny_rn / (double)total, 100.0 * (double)seq_rn / (double)total);
    assert_true(differ > 0);
    assert_true(max_ulp <= 2);
}

/* ---------------------------------------------------------------- ref_linear */

/* One output of ref_linear, scalar: w dequantized by the spec (exact in
 * fp32 here), products and sums in fp32 in k order. */
static uint16_t scalar_ref_linear(const operands_t *o, int64_t m, int64_t n)
{
    float acc = 0.0f;
    for (int64_t k = 0; k < o->K; k++) {
        const float w = (float)spec_mxfp4_w(o, n, k);
        const float prod = o->x[m * o->K + k] * w;
        acc = acc + prod;
    }
    return spec_bf16_rne(acc);
}

static void test_ref_linear_oracle(void **st)
{
    (void)st;
    const scale_layout_t layouts[2] = {SCALE_LAYOUT_NK, SCALE_LAYOUT_KN};
    const int64_t Ms[3] = {1, 5, 33};
    for (int l = 0; l < 2; l++)
        for (int i = 0; i < 3; i++) {
            operands_t o;
            ops_gaussian(&o, Ms[i], 72, 512, 300 + 10 * (uint64_t)l + (uint64_t)i);
            ops_drop_bf16_weight(&o);
            ops_add_mxfp4(&o, layouts[l], 400 + 10 * (uint64_t)l + (uint64_t)i);
            uint16_t *out = run_ok(&kernel_ref_linear, &o, 0);
            int64_t mismatch = 0;
            for (int64_t m = 0; m < o.M; m++)
                for (int64_t n = 0; n < o.N; n++)
                    mismatch += out[m * o.N + n] != scalar_ref_linear(&o, m, n);
            assert_int_equal(mismatch, 0);
            check_against_oracle("ref_linear", &o, out, o.K);
            free(out);
            ops_free(&o);
        }
}

/* With weight_bf16 := the dequantized MXFP4 weight (e2m1 * 2^e is bf16-exact
 * in this exponent range), ref_linear and bf16.sequential state the same
 * order on the same operands: the two must agree bit for bit. */
static void test_ref_linear_is_sequential_on_same_weight(void **st)
{
    (void)st;
    operands_t o;
    ops_gaussian(&o, 9, 40, 256, 500);
    ops_add_mxfp4(&o, SCALE_LAYOUT_KN, 501);
    for (int64_t n = 0; n < o.N; n++)
        for (int64_t k = 0; k < o.K; k++) {
            const float w = (float)spec_mxfp4_w(&o, n, k);
            o.wb[n * o.K + k] = spec_bf16_rne(w);
            assert_true(spec_bf16(o.wb[n * o.K + k]) == w);
        }
    ops_finish(&o);
    uint16_t *a = run_ok(&kernel_ref_linear, &o, 0);
    uint16_t *b = run_ok(&kernel_bf16_sequential, &o, 0);
    assert_memory_equal(a, b, (size_t)(o.M * o.N) * sizeof(uint16_t));
    int64_t nonzero = 0;
    for (int64_t i = 0; i < o.M * o.N; i++)
        nonzero += a[i] != 0;
    assert_true(nonzero > o.M * o.N / 2);
    free(a);
    free(b);
    ops_free(&o);
}

/* ref_linear's scale is torch's pow(2, E - 127): byte 0 is 2^-127 even when
 * the replay decodes weights with Triton's zero rule. */
static void test_ref_linear_scale_byte_zero(void **st)
{
    (void)st;
    operands_t o;
    ops_zero(&o, 1, 1, 32);
    ops_drop_bf16_weight(&o);
    o.packed = calloc(16, 1);
    o.scales = calloc(1, 1);                /* E = 0 */
    assert_non_null(o.packed);
    assert_non_null(o.scales);
    o.packed[0] = 0x0F;                     /* k=0: code 0xF = -6, k=1: 0 */
    o.x[0] = 0x1p100f;                      /* bf16-exact */
    o.layout = SCALE_LAYOUT_NK;
    ops_finish(&o);
    o.in.weight.e8m0_mode = E8M0_ZERO_IS_ZERO;
    /* -6 * 2^-127 * 2^100 = -1.5 * 2^-25 -> bf16 sign 1, exponent 127-25 = 102
     * (0x66), fraction 0x40: 0xB340. */
    uint16_t *out = run_ok(&kernel_ref_linear, &o, 0);
    assert_int_equal(out[0], 0xB340);
    free(out);
    ops_free(&o);
}

/* ---------------------------------------------------------------- operands & refusals */

/* A float32 x is rounded to bf16 first, and the act says so. */
static void test_fp32_x_is_rounded(void **st)
{
    (void)st;
    operands_t o;
    ops_gaussian(&o, 8, 48, 5120, 600);
    test_rng_t r = {601};
    for (int64_t i = 0; i < o.M * o.K; i++)
        o.x[i] = (float)test_rng_normal(&r);    /* generally not bf16-exact */
    uint16_t *raw[2] = {run_ok(&kernel_bf16_skinny, &o, 0),
                        run_ok(&kernel_bf16_sequential, &o, 0)};
    kernel_options_t opt;
    kernel_options_default(&opt);
    kernel_act_t act;
    kr_error_t err = {{0}};
    assert_int_equal(kernel_bf16_skinny.prepare_act(&kernel_bf16_skinny, &o.in, &opt, &act, &err),
                     0);
    assert_non_null(strstr(act.origin, "rounded from fp32"));
    assert_null(act.codes);
    for (int64_t i = 0; i < o.M * o.K; i++)
        assert_true(act.dequant[i] == spec_bf16(spec_bf16_rne(o.x[i])));
    kernel_act_free(&act);
    for (int64_t i = 0; i < o.M * o.K; i++)
        o.x[i] = spec_bf16(spec_bf16_rne(o.x[i]));
    uint16_t *pre[2] = {run_ok(&kernel_bf16_skinny, &o, 0),
                        run_ok(&kernel_bf16_sequential, &o, 0)};
    for (int i = 0; i < 2; i++) {
        assert_memory_equal(raw[i], pre[i], (size_t)(o.M * o.N) * sizeof(uint16_t));
        free(raw[i]);
        free(pre[i]);
    }
    assert_int_equal(kernel_bf16_sequential.prepare_act(&kernel_bf16_sequential, &o.in, &opt,
                                                        &act, &err), 0);
    assert_string_equal(act.origin, "x as bf16");
    kernel_act_free(&act);
    ops_free(&o);
}

static void expect_refused(const kernel_desc_t *k, const operands_t *o, int decode_splits,
                           const char *needle)
{
    uint16_t out[16];
    kr_error_t err = {{0}};
    int rc = run_model(k, &o->in, decode_splits, out, NULL, &err);
    print_message("%s M=%lld %lldx%lld: %s\n", k->name, (long long)o->M, (long long)o->N,
                  (long long)o->K, err.msg);
    assert_int_equal(rc, -1);
    assert_non_null(strstr(err.msg, needle));
}

static void test_unsupported(void **st)
{
    (void)st;
    operands_t o;
    /* An unmeasured shape: 512x5120 is in no table. */
    ops_gaussian(&o, 8, 512, 5120, 700);
    expect_refused(&kernel_bf16_skinny, &o, 0, "no measured split-K config for 512x5120");
    uint16_t *forced = run_ok(&kernel_bf16_skinny, &o, 4);      /* the override runs it */
    uint16_t *seq = run_ok(&kernel_bf16_sequential, &o, 0);     /* no table needed */
    check_against_oracle("bf16.skinny SK=4", &o, forced, 5120 / 4 + 4);
    free(forced);
    free(seq);
    expect_refused(&kernel_bf16_skinny, &o, 3, "does not cut K=5120");
    ops_free(&o);

    /* Below the M band, above it, at its top, and K % 256; bf16.sequential
     * takes the M the skinny kernel refuses. */
    const struct { int64_t M, K; uint64_t seed; const char *skinny_refuses; int sequential; } band[] = {
        {5, 5120, 701, "M=5", 1},
        {65, 5120, 702, "M=65", 0},
        {64, 5120, 703, NULL, 0},                           /* M=64 is in */
        {8, 5088, 704, "not a multiple of 256", 0},
    };
    for (size_t i = 0; i < sizeof band / sizeof band[0]; i++) {
        ops_gaussian(&o, band[i].M, 96, band[i].K, band[i].seed);
        if (band[i].skinny_refuses)
            expect_refused(&kernel_bf16_skinny, &o, 0, band[i].skinny_refuses);
        else
            free(run_ok(&kernel_bf16_skinny, &o, 0));
        if (band[i].sequential)
            free(run_ok(&kernel_bf16_sequential, &o, 0));
        ops_free(&o);
    }

    /* Missing operands. */
    ops_gaussian(&o, 8, 96, 5120, 705);
    ops_drop_bf16_weight(&o);
    expect_refused(&kernel_bf16_skinny, &o, 0, "no bf16 weight (weight_bf16)");
    expect_refused(&kernel_bf16_sequential, &o, 0, "no bf16 weight (weight_bf16)");
    expect_refused(&kernel_ref_linear, &o, 0, "no MXFP4 weight");
    ops_free(&o);
    ops_gaussian(&o, 8, 96, 5120, 706);
    free(o.x);
    o.x = NULL;
    ops_finish(&o);
    expect_refused(&kernel_bf16_sequential, &o, 0, "no source activations x");
    ops_add_mxfp4(&o, SCALE_LAYOUT_NK, 707);
    o.in.x = NULL;
    expect_refused(&kernel_ref_linear, &o, 0, "no source activations x");
    ops_free(&o);
}

/* ---------------------------------------------------------------- synth */

/* kreplay synth --weight-format: bf16 weights from the same generator.  The
 * MXFP4 weight and x do not depend on the format; the bf16 weight is the
 * Gaussian the MXFP4 one quantizes (so the two agree to MXFP4's error), and
 * a bf16-only case has no fp8 operands; all three validate and round-trip. */
static void test_synth_weight_formats(void **st)
{
    (void)st;
    synth_params_t p;
    synth_params_default(&p);
    p.M = 8, p.N = 96, p.K = 512, p.seed = 11;
    case_t c[3];
    kr_error_t err = {{0}};
    const synth_weight_format_t f[3] = {SYNTH_WEIGHT_MXFP4, SYNTH_WEIGHT_BF16, SYNTH_WEIGHT_BOTH};
    for (int i = 0; i < 3; i++) {
        p.weight_format = f[i];
        if (synth_case(&p, &c[i], &err))
            fail_msg("synth %s: %s", synth_weight_format_name(f[i]), err.msg);
        assert_int_equal(case_validate(&c[i], "synth", &err), 0);
    }
    const int64_t NK = p.N * p.K, MK = p.M * p.K;
    assert_null(c[0].weight_bf16);
    assert_null(c[1].weight);
    assert_null(c[1].weight_scale);
    assert_null(c[1].x_fp8);
    assert_null(c[1].weight_ref);
    assert_non_null(c[1].weight_bf16);
    assert_memory_equal(c[0].x, c[1].x, (size_t)MK * sizeof(float));
    assert_memory_equal(c[0].x, c[2].x, (size_t)MK * sizeof(float));
    assert_memory_equal(c[0].weight, c[2].weight, (size_t)NK / 2);
    assert_memory_equal(c[0].weight_scale, c[2].weight_scale, (size_t)NK / 32);
    assert_memory_equal(c[0].x_fp8, c[2].x_fp8, (size_t)MK);
    assert_memory_equal(c[1].weight_bf16, c[2].weight_bf16, (size_t)NK * 2);
    /* The bf16 weight is the source of the MXFP4 one: dequant(MXFP4) is
     * within OCP MXFP4's error of it (rel_fro well under 0.25), and no
     * bf16 weight is all zero. */
    operands_t o = {.N = p.N, .K = p.K, .packed = c[2].weight, .scales = c[2].weight_scale,
                    .layout = c[2].scale_layout};
    double num = 0, den = 0;
    for (int64_t n = 0; n < p.N; n++)
        for (int64_t k = 0; k < p.K; k++) {
            const double b = spec_bf16(c[2].weight_bf16[n * p.K + k]);
            const double d = spec_mxfp4_w(&o, n, k) - b;
            num += d * d;
            den += b * b;
        }
    print_message("synth both: rel_fro(dequant(MXFP4) - bf16 weight) = %.4f\n", sqrt(num / den));
    assert_true(den > 0);
    assert_true(sqrt(num / den) < 0.25);
    /* The bf16-only case round-trips and the bf16 models run on it. */
    char path[512];
    test_tmp_path(path, sizeof path, "synth-bf16");
    assert_int_equal(case_write(path, &c[1], &err), 0);
    case_t back;
    if (case_read(path, &back, &err))
        fail_msg("case_read: %s", err.msg);
    assert_memory_equal(back.weight_bf16, c[1].weight_bf16, (size_t)NK * 2);
    assert_null(back.weight);
    assert_non_null(strstr(back.env_flags, "KREPLAY_SYNTH_WEIGHT_FORMAT=bf16"));
    assert_null(strstr(c[0].env_flags, "WEIGHT_FORMAT"));
    operands_t r = {.M = back.M, .N = back.N, .K = back.K, .x = back.x, .wb = back.weight_bf16};
    ops_finish(&r);
    uint16_t *out = run_ok(&kernel_bf16_sequential, &r, 0);
    check_against_oracle("synth bf16", &r, out, r.K);
    free(out);
    case_free(&back);
    unlink(path);
    /* Fragment order is an MXFP4 layout: refused for bf16-only. */
    p.weight_format = SYNTH_WEIGHT_BF16;
    p.weight_order = WEIGHT_ORDER_FRAGMENT;
    case_t bad;
    assert_int_equal(synth_case(&p, &bad, &err), -1);
    assert_non_null(strstr(err.msg, "fragment order"));
    for (int i = 0; i < 3; i++)
        case_free(&c[i]);
}

KR_TEST_MAIN(
    test_descriptors, test_hand_split_vs_sequential, test_hand_table_splits,
    test_table_shapes_random, test_skinny_vs_sequential_statistic, test_ref_linear_oracle,
    test_ref_linear_is_sequential_on_same_weight, test_ref_linear_scale_byte_zero,
    test_fp32_x_is_rounded, test_unsupported, test_synth_weight_formats);
