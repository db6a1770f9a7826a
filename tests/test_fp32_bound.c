/* The fp32 summation bound (harness/judge/diagnosis/fp32_bound.h) against
 * outputs this test computes itself from the operands (decoded by
 * tests/support/spec_formats.c, not by the code under test):
 *   - kernels that sum the exact products in fp32 in other orders -- fp64
 *     then rounded once, Kahan, pairwise, per block, split-K reduced last to
 *     first -- never leave it, and the judgement passes them;
 *   - a kernel that holds its running sum in fp16, rounds each product
 *     (x_scale applied) to bf16, or rounds x_scale to bf16 leaves it on many
 *     outputs while its rel_fro passes the derived threshold: the judgement
 *     fails it, "lost precision" (the old judgement passed the last two: no
 *     listed accumulation model fitted them);
 *   - a hand case whose interval is worked out here. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "case_io.h"
#include "diagnosis/acc_fit.h"
#include "diagnosis/fp32_bound.h"
#include "judge.h"
#include "metrics.h"
#include "result.h"
#include "mxfp4_weight.h"
#include "registry.h"
#include "replay.h"
#include "spec_formats.h"
#include "test_cases.h"
#include "test_main.h"

typedef enum { ORDER_F64, ORDER_KAHAN, ORDER_PAIRWISE, ORDER_BLOCKS, ORDER_SPLIT_REV, LOSSY_FP16_K32,
               LOSSY_PROD_BF16, LOSSY_XS_BF16, ORDER_COUNT } order_t;

typedef struct {
    case_t c;
    uint8_t *w_owned;
    kernel_inputs_t in;
    kernel_act_t act;
    int64_t M, N, K;
} setup_t;

static void setup(setup_t *s, int64_t M, int64_t N, int64_t K, uint64_t seed)
{
    memset(s, 0, sizeof *s);
    test_w4a8_case_or_fail(M, N, K, seed, &s->c, &s->w_owned, &s->in, &s->act);
    s->M = M, s->N = N, s->K = K;
}

static void teardown(setup_t *s)
{
    kernel_act_free(&s->act);
    free(s->w_owned);
    case_free(&s->c);
}

/* Product k of output (m, n), exact in double (and in fp32). */
static double product(const setup_t *s, int64_t m, int64_t n, int64_t k)
{
    const uint8_t byte = s->in.weight.packed[n * (s->K / 2) + k / 2];
    const uint8_t code = (k & 1) ? (uint8_t)(byte >> 4) : (uint8_t)(byte & 15);
    const uint8_t e = mxfp4_scale_at(s->in.weight.scales, s->in.weight.layout, s->N, s->K, n, k / 32);
    return spec_e4m3fn(s->act.codes[m * s->K + k]) * spec_e2m1(code) * spec_e8m0(e, E8M0_SPEC);
}

static float pairwise(const float *v, int64_t n)
{
    if (n == 1)
        return v[0];
    return pairwise(v, n / 2) + pairwise(v + n / 2, n - n / 2);
}

/* Output (m, n) of a kernel summing in `order`, as bf16 bits. */
static uint16_t output(const setup_t *s, order_t order, int64_t m, int64_t n, float *p)
{
    const int64_t K = s->K, nb = K / 32;
    float xs = s->act.token_scale[m];
    for (int64_t k = 0; k < K; k++)
        p[k] = (float)product(s, m, n, k);
    float acc = 0.0f, comp = 0.0f;
    double wide = 0;
    switch (order) {
    case ORDER_F64:
        for (int64_t k = 0; k < K; k++)
            wide += p[k];
        acc = (float)wide;
        break;
    case ORDER_KAHAN:
        for (int64_t k = 0; k < K; k++) {
            const float y = p[k] - comp, t = acc + y;
            comp = (t - acc) - y;
            acc = t;
        }
        break;
    case ORDER_PAIRWISE:
        acc = pairwise(p, K);
        break;
    case ORDER_BLOCKS:
    case ORDER_SPLIT_REV:
        for (int64_t i = 0; i < nb; i++) {
            const int64_t b = order == ORDER_SPLIT_REV ? nb - 1 - i : i;
            float t = 0.0f;
            for (int64_t k = 32 * b; k < 32 * b + 32; k++)
                t += p[k];
            acc += t;
        }
        break;
    case LOSSY_FP16_K32:     /* the running sum held in fp16, rounded after each 32-block */
        for (int64_t b = 0; b < nb; b++) {
            float t = 0.0f;
            for (int64_t k = 32 * b; k < 32 * b + 32; k++)
                t += p[k];
            acc = (float)(_Float16)(acc + t);
        }
        break;
    case LOSSY_PROD_BF16:    /* each product scaled by x_scale and rounded to bf16 */
        for (int64_t k = 0; k < K; k++)
            acc += spec_bf16(spec_bf16_rne(p[k] * xs));
        xs = 1.0f;
        break;
    case LOSSY_XS_BF16:
        for (int64_t k = 0; k < K; k++)
            acc += p[k];
        xs = spec_bf16(spec_bf16_rne(xs));
        break;
    case ORDER_COUNT:
        break;
    }
    return spec_bf16_rne(acc * xs);
}

static void outputs(const setup_t *s, order_t order, uint16_t *bits)
{
    float *p = malloc((size_t)s->K * sizeof(float));
    assert_non_null(p);
    for (int64_t m = 0; m < s->M; m++)
        for (int64_t n = 0; n < s->N; n++)
            bits[m * s->N + n] = output(s, order, m, n, p);
    free(p);
}

/* The row of kernel `order`'s output against an fp64 reference, judged by
 * the derived rule, with its accumulation fit and bound measured. */
static verdict_t judged(const setup_t *s, order_t order, acc_fit_t *fit, char *note, int cap)
{
    const int64_t MN = s->M * s->N;
    uint16_t *bits = malloc((size_t)MN * sizeof(uint16_t));
    float *ref = malloc((size_t)MN * sizeof(float));
    assert_non_null(bits);
    assert_non_null(ref);
    outputs(s, order, bits);
    for (int64_t m = 0; m < s->M; m++)
        for (int64_t n = 0; n < s->N; n++) {
            double e = 0;
            for (int64_t k = 0; k < s->K; k++)
                e += product(s, m, n, k);
            ref[m * s->N + n] = (float)(e * s->act.token_scale[m]);
        }
    kr_error_t err = {{0}};
    result_t row;
    memset(&row, 0, sizeof row);
    snprintf(row.kernel, sizeof row.kernel, "test.order");
    snprintf(row.reference, sizeof row.reference, "R_exact");
    row.M = s->M, row.N = s->N, row.K = s->K;
    metrics_sums_t sums;
    metrics_compute_bf16(bits, ref, s->M, s->N, &row.metrics, &sums);
    ulp_stats_bf16_vs_f32(bits, ref, MN, &row.ulp);
    assert_int_equal(acc_fit_measure(&s->in, &s->act, WEIGHT_KIND_MXFP4, bits, NULL, NULL, &row.acc_fit, &err), 0);
    *fit = row.acc_fit;
    policy_rule_t rule;
    assert_int_equal(policy_derived_rule(kernel_find("w4a8.perblock"), "R_exact", s->K, &rule), 0);
    const verdict_t v = judge_row(&rule, &row, NULL, note, cap);
    free(bits);
    free(ref);
    return v;
}

/* judged(), and what it found printed under NAME. */
static verdict_t judged_shown(setup_t *s, order_t o, const char *name, acc_fit_t *fit, char *note, size_t cap)
{
    const verdict_t v = judged(s, o, fit, note, cap);
    print_message("  %-17s %s: %lld of %lld sampled outputs outside; %s\n", name, verdict_name(v),
                  (long long)fit->bound_outside, (long long)fit->bound_checked, note);
    return v;
}

static void test_other_fp32_orders_stay_inside(void **state)
{
    (void)state;
    static const char *const names[] = {"fp64", "Kahan", "pairwise", "per block", "blocks reversed"};
    setup_t s;
    setup(&s, 24, 128, 2048, 11);
    for (order_t o = ORDER_F64; o <= ORDER_SPLIT_REV; o++) {
        acc_fit_t fit;
        char note[512];
        const verdict_t v = judged_shown(&s, o, names[o], &fit, note, sizeof note);
        assert_int_equal(fit.bound_checked, 24 * FP32_BOUND_COLS);
        assert_int_equal(fit.bound_outside, 0);
        assert_int_equal(v, VERDICT_PASS);
    }
    teardown(&s);
}

static void test_lost_precision_fails(void **state)
{
    (void)state;
    static const char *const names[] = {"fp16 running sum", "products in bf16", "x_scale in bf16"};
    acc_fit_t fit;
    char note[512];
    setup_t s;
    setup(&s, 24, 128, 2048, 12);
    for (order_t o = LOSSY_FP16_K32; o <= LOSSY_XS_BF16; o++) {
        const verdict_t v = judged_shown(&s, o, names[o - LOSSY_FP16_K32], &fit, note, sizeof note);
        assert_true(fp32_bound_exceeded(&fit));
        assert_int_equal(v, VERDICT_WRONG);
        /* the fp16 running sum is also one of the accumulation models, which
         * the judgement names first; the others only the bound sees */
        if (o == LOSSY_FP16_K32) {
            assert_non_null(strstr(note, "running sum rounded to fp16"));
        } else {
            assert_non_null(strstr(note, "lost precision: "));
            assert_non_null(strstr(note, "lie outside what any fp32 summation order of the kernel's own operands gives"));
        }
    }
    teardown(&s);
}

/* Two rows of K = 64 whose products are 64 ones, and 63 ones and a zero:
 * S = 64 and 63 = sum|p|; E = gamma_66 * 64 = 66 * 2^-24 / (1 - 66 * 2^-24)
 * * 64 < 2^-11 (plus subnormal steps), far under half a bf16 step at 64
 * (0.25), so the intervals are [bf16(S - E), bf16(S + E)] = [64, 64] and
 * [63, 63].  Outputs 64.5 and 62.5 lie outside, 64 and 63 inside. */
static void test_interval_by_hand(void **state)
{
    (void)state;
    const int64_t M = 2, N = 1, K = 64;
    uint8_t codes[2 * 64], packed[32], scales[2] = {127, 127};
    float token_scale[2] = {1.0f, 1.0f}, dequant[2 * 64];
    /* e4m3fn 1.0 = 0x38; the weight all e2m1 1.0 (code 2) */
    for (int64_t i = 0; i < M * K; i++)
        codes[i] = 0x38;
    codes[64 + 5] = 0x80;               /* -0: row 1's product 5 is zero */
    memset(packed, 0x22, sizeof packed);
    for (int64_t i = 0; i < M * K; i++)
        dequant[i] = (float)spec_e4m3fn(codes[i]);
    kernel_act_t act = {.kind = ACT_FP8_PER_TOKEN, .M = M, .K = K, .codes = codes,
                        .token_scale = token_scale, .fp8_format = FP8_E4M3FN, .dequant = dequant};
    kernel_inputs_t in = {.M = M, .N = N, .K = K,
                          .weight = {.packed = packed, .scales = scales, .layout = SCALE_LAYOUT_NK,
                                     .e8m0_mode = E8M0_SPEC, .N = N, .K = K}};
    const float cases[][3] = {{64.0f, 63.0f, 0}, {64.5f, 62.5f, 2}};
    for (int t = 0; t < 2; t++) {
        uint16_t bits[2] = {spec_bf16_rne(cases[t][0]), spec_bf16_rne(cases[t][1])};
        acc_fit_t fit;
        memset(&fit, 0, sizeof fit);
        kr_error_t err = {{0}};
        assert_int_equal(fp32_bound_measure(&in, &act, WEIGHT_KIND_MXFP4, bits, NULL, NULL, &fit, &err), 0);
        assert_int_equal(fit.bound_checked, 2);
        assert_int_equal(fit.bound_outside, (int64_t)cases[t][2]);
        if (t == 1) {
            assert_int_equal(fit.bound_row, 0);
            assert_true(fit.bound_lo == 64.0 && fit.bound_hi == 64.0);
        }
    }
}

KR_TEST_MAIN(test_other_fp32_orders_stay_inside, test_lost_precision_fails, test_interval_by_hand);
