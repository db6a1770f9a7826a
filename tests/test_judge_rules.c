/* The one judgement for every kernel:
 *   - an external kernel (a plugin or a Python kernel) takes the policy rule
 *     of its family's registry model, worst_row_rel included: a row 33% wrong
 *     under a passing whole-output rel_fro fails (the old judgement gave an
 *     external kernel the derived rule, rel_fro alone, and passed it); in a
 *     band the policy does not cover, the derived rule with a worst-row limit;
 *   - MAGNITUDE only when one factor explains the output (the best factor's
 *     residual, sqrt(1 - cosine^2), within the rule); a ratio alone is WRONG;
 *   - a row whose sampled outputs leave the fp32 summation bound fails on it
 *     alone ("lost precision"), a handful of outliers does not;
 *   - a bf16 kernel (its activations are x itself) that writes finite values
 *     where x's NaN makes R_source NaN hid the poison and fails; a quantized
 *     kernel's R_source says nothing of the kind. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "act_prepare.h"
#include "diagnosis/fp32_bound.h"
#include "judge.h"
#include "registry.h"
#include "test_main.h"

static result_t row_of(const char *kernel, const char *band, double rel, double worst)
{
    result_t r;
    memset(&r, 0, sizeof r);
    snprintf(r.kernel, sizeof r.kernel, "%s", kernel);
    snprintf(r.reference, sizeof r.reference, "R_exact");
    snprintf(r.band, sizeof r.band, "%s", band);
    r.M = 16, r.N = 256, r.K = 1024;
    r.metrics.rel_fro = rel;
    r.metrics.worst_row_rel = worst;
    r.metrics.worst_row = 5;
    r.metrics.mag_ratio = 1.0;
    r.metrics.cosine = 1.0 - rel * rel / 2;
    r.metrics.finite_count = r.M * r.N;
    r.ulp.identical_frac = 0.5;    /* under every identical_min: not an external kernel's rule */
    return r;
}

static void test_external_kernel_takes_its_family_rule(void **state)
{
    (void)state;
    policy_t p;
    kr_error_t err = {{0}};
    assert_int_equal(judge_default_policy(&p, &err), 0);
    const kernel_desc_t *model = kernel_find("w4a8.perblock");
    kernel_desc_t plugin = *model;
    plugin.name = "mylib.w4a8";
    plugin.family = "plugin";
    plugin.rules_of = model;
    const policy_rule_t *fam = policy_match(&p, "w4a8.perblock", "R_exact", "decode");
    assert_non_null(fam);
    assert_false(isnan(fam->worst_row_rel));

    result_t r = row_of("mylib.w4a8", "decode", 0.0018, 0.33);
    policy_rule_t rule;
    judge_rule_for(&p, &plugin, &r, 0.01, &rule);
    assert_true(rule.rel_fro == fam->rel_fro);
    assert_true(rule.worst_row_rel == fam->worst_row_rel);
    assert_non_null(strstr(rule.origin, "w4a8.perblock's rule"));
    char note[512];
    assert_int_equal(judge_row(&rule, &r, NULL, note, sizeof note), VERDICT_WRONG);
    assert_non_null(strstr(note, "worst_row_rel 0.33 > "));
    /* a correct external kernel (another summation order: fewer identical bits) passes */
    result_t good = row_of("mylib.w4a8", "decode", 0.0018, 0.0022);
    assert_int_equal(judge_row(&rule, &good, NULL, note, sizeof note), VERDICT_PASS);

    /* mid band: no policy rule; the derived one, with a worst-row limit */
    result_t mid = row_of("mylib.w4a8", "mid", 0.0018, 0.33);
    judge_rule_for(&p, &plugin, &mid, 0.01, &rule);
    assert_non_null(strstr(rule.origin, "derived"));
    assert_true(rule.worst_row_rel == rule.rel_fro);
    assert_int_equal(judge_row(&rule, &mid, NULL, note, sizeof note), VERDICT_WRONG);
    /* the registry model itself keeps its own rules */
    result_t reg = row_of("w4a8.perblock", "mid", 0.0018, 0.33);
    judge_rule_for(&p, model, &reg, 0.01, &rule);
    assert_true(isnan(rule.worst_row_rel));
    policy_free(&p);
}

/* w4a8.perblock's derived rule against R_exact at K = 1024. */
static policy_rule_t w4a8_rule_k1024(void)
{
    policy_rule_t rule;
    assert_int_equal(policy_derived_rule(kernel_find("w4a8.perblock"), "R_exact", 1024, &rule), 0);
    return rule;
}

static void test_magnitude_needs_a_factor(void **state)
{
    (void)state;
    policy_rule_t rule = w4a8_rule_k1024();
    char note[512];
    /* |out|/|ref| = 3 but the output is not 3 ref: WRONG */
    result_t r = row_of("w4a8.perblock", "mid", 2.4, 2.6);
    r.metrics.mag_ratio = 3.0;
    r.metrics.cosine = 0.3;
    assert_int_equal(judge_row(&rule, &r, NULL, note, sizeof note), VERDICT_WRONG);
    /* out = 3 ref up to bf16 rounding: MAGNITUDE */
    r.metrics.cosine = 1.0 - 1e-6;
    assert_int_equal(judge_row(&rule, &r, NULL, note, sizeof note), VERDICT_MAGNITUDE);
}

static void test_lost_precision_fails_alone(void **state)
{
    (void)state;
    char note[512];
    policy_rule_t rule = w4a8_rule_k1024();
    result_t r = row_of("w4a8.perblock", "mid", 0.0019, 0.0024);
    r.acc_fit.bound_checked = 2048;
    r.acc_fit.bound_outside = 300;
    r.acc_fit.bound_row = 3, r.acc_fit.bound_col = 17;
    r.acc_fit.bound_out = 0.5, r.acc_fit.bound_lo = r.acc_fit.bound_hi = 0.50390625;
    assert_int_equal(judge_row(&rule, &r, NULL, note, sizeof note), VERDICT_WRONG);
    assert_non_null(strstr(note, "lost precision: 300 of 2048 sampled outputs lie outside what any fp32 summation "
                                 "order of the kernel's own operands gives"));
    /* a handful (a matrix unit's internal sums) is not a loss of precision */
    r.acc_fit.bound_outside = FP32_BOUND_MIN_OUTSIDE - 1;
    assert_int_equal(judge_row(&rule, &r, NULL, note, sizeof note), VERDICT_PASS);
}

/* out = x w^T summed in double, row by row, NaN products skipped when
 * nan_to_zero (a kernel that sanitizes its activations). */
static void small_gemm(const float *x, const float *w, int M, int N, int K, int nan_to_zero, float *out)
{
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double acc = 0.0;
            for (int k = 0; k < K; k++) {
                const float a = x[m * K + k];
                acc += (nan_to_zero && isnan(a) ? 0.0 : (double)a) * w[n * K + k];
            }
            out[m * N + n] = (float)acc;
        }
}

static void test_bf16_kernel_hiding_poison_fails(void **state)
{
    (void)state;
    enum { M = 4, N = 8, K = 32 };
    float x[M * K], w[N * K], ref[M * N], hid[M * N];
    for (int i = 0; i < M * K; i++)
        x[i] = (float)((i * 37 % 29) - 14) / 8.0f;
    for (int i = 0; i < N * K; i++)
        w[i] = (float)((i * 53 % 31) - 15) / 16.0f;
    x[1 * K + 5] = NAN;     /* row 1 poisoned */
    small_gemm(x, w, M, N, K, 0, ref);
    small_gemm(x, w, M, N, K, 1, hid);
    const unsigned char apart[M] = {0, 1, 0, 0};
    policy_t p;
    kr_error_t err = {{0}};
    assert_int_equal(judge_default_policy(&p, &err), 0);
    const policy_rule_t *rule = policy_match(&p, "bf16.sequential", "R_source", "decode");
    assert_non_null(rule);
    char note[1024];
    for (int origin = 0; origin < 2; origin++)
        for (int hides = 0; hides < 2; hides++) {
            result_t r = row_of("bf16.sequential", "decode", 0, 0);
            snprintf(r.reference, sizeof r.reference, "R_source");
            snprintf(r.act_origin, sizeof r.act_origin, "%s", origin ? ACT_ORIGIN_X_BF16 : "x quantized (vllm)");
            r.M = M, r.N = N, r.K = K;
            r.input_nf.nan = 1;
            metrics_sums_t sums;
            metrics_compute_apart(hides ? hid : ref, NULL, ref, M, N, apart, &r.metrics, &sums);
            const verdict_t v = judge_row(rule, &r, NULL, note, sizeof note);
            if (origin && hides) {
                assert_int_equal(v, VERDICT_WRONG);
                assert_non_null(strstr(note, "poison masked: the kernel's operands give 8 non-finite R_source"));
            } else {
                assert_int_equal(v, VERDICT_POISONED_INPUT);
            }
        }
    policy_free(&p);
}

KR_TEST_MAIN(test_external_kernel_takes_its_family_rule, test_magnitude_needs_a_factor,
             test_lost_precision_fails_alone, test_bf16_kernel_hiding_poison_fails);
