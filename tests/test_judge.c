/* The one judgement (harness/judge/judge.h) as replay applies it to broken
 * kernels: the calibrated default policy's thresholds, poisoned rows judged
 * apart, rounding bias and reduced running sums, --vs NaN disagreement, a
 * zero reference, and the exact text of the notes that used to mislead.
 * The routes to it (a recorded output, gate, --policy): test_judge_routes.c.
 *
 * The kernels under test are deliberately broken models defined here: each
 * takes the fp64 product of the kernel's own operands (gemm_ref_f64, an
 * oracle independent of the fp32 reference) and writes it to bf16 in its
 * own way -- correctly rounded, truncated, with rows left unwritten, with a
 * NaN tile, or a constant. */
/* ctest-labels: judge */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "case_io.h"
#include "fault_inject.h"
#include "gate.h"
#include "gemm_ref.h"
#include "judge.h"
#include "metrics.h"
#include "mxfp4_weight.h"
#include "policy.h"
#include "replay.h"
#include "replay_rows.h"
#include "synth.h"
#include "test_cases.h"
#include "spec_formats.h"
#include "test_main.h"
#include "test_support.h"


enum {
    OUT_RNE,
    OUT_TRUNCATE,
    OUT_LAST_ROWS_UNWRITTEN,
    OUT_NAN_TILE,
    OUT_CONSTANT,
    OUT_BF16_PARTIALS,
    OUT_FP16_PARTIALS,
    OUT_NAN_TO_ZERO,
    OUT_BF16_EACH,
    OUT_FP16_EACH,
};

/* Round to nearest even, written here from the definition (not bf16_encode). */
static uint16_t rne_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    const uint32_t low = u & 0xFFFFu, hi = u >> 16;
    if (low > 0x8000u || (low == 0x8000u && (hi & 1u)))
        return (uint16_t)(hi + 1u);
    return (uint16_t)hi;
}

/* v rounded to fp16 by the compiler's own conversion (an oracle apart from
 * the harness's rounding). */
static float fp16_value(float v)
{
    return (float)(_Float16)v;
}

/* A running sum kept in bf16 (or fp16): the exact partial product of each
 * 32-block of K (the fp64 product of the operands with every other block
 * zeroed) added to it and rounded after every block. */
static int partials_run(const kernel_inputs_t *in, const kernel_act_t *act, int fp16, uint16_t *out,
                        kr_error_t *err)
{
    const int64_t M = in->M, N = in->N, K = in->K;
    double *part = malloc((size_t)(M * N) * sizeof(double));
    float *acc = calloc((size_t)(M * N), sizeof(float));
    float *a = malloc((size_t)(M * K) * sizeof(float));
    int st = part && acc && a ? 0 : -1;
    for (int64_t b = 0; st == 0 && b < K / 32; b++) {
        for (int64_t i = 0; i < M * K; i++)
            a[i] = (i % K) / 32 == b ? act->dequant[i] : 0.0f;
        st = gemm_ref_f64(a, M, &in->weight, 0, part, err);
        for (int64_t i = 0; st == 0 && i < M * N; i++) {
            const float sum = (float)((double)acc[i] + part[i]);
            const uint32_t u = (uint32_t)rne_bits(sum) << 16;
            if (fp16)
                acc[i] = fp16_value(sum);
            else
                memcpy(&acc[i], &u, sizeof u);
        }
    }
    for (int64_t i = 0; st == 0 && i < M * N; i++)
        out[i] = rne_bits(acc[i]);
    TEST_FREE_ALL(part, acc, a);
    return st;
}

/* A running sum kept in bf16 (or fp16) and rounded after every element: the
 * exact product of each fp8 activation and MXFP4 weight (spec decoders,
 * block scale included) added in k order, the sum times x_scale at the end,
 * rounded to nearest even. */
static int each_element_run(const kernel_inputs_t *in, const kernel_act_t *act, int fp16,
                            uint16_t *out)
{
    const int64_t M = in->M, N = in->N, K = in->K;
    const mxfp4_weight_t *w = &in->weight;
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            float acc = 0.0f;
            for (int64_t k = 0; k < K; k++) {
                const double ws = spec_e8m0(mxfp4_scale_at(w->scales, w->layout, N, K, n, k / 32),
                                            w->e8m0_mode);
                const float p = (float)(spec_e4m3fn(act->codes[m * K + k]) *
                                        spec_e2m1(mxfp4_code_at(w->packed, K, n, k)) * ws);
                const float sum = acc + p;
                acc = fp16 ? fp16_value(sum) : spec_bf16(rne_bits(sum));
            }
            out[m * N + n] = rne_bits(acc * act->token_scale[m]);
        }
    return 0;
}

static int broken_run(const kernel_desc_t *k, const kernel_inputs_t *in, const kernel_act_t *act,
                      const kernel_options_t *opt, uint16_t *out, kernel_run_info_t *info, kr_error_t *err)
{
    (void)opt;
    (void)info;
    if (k->config == OUT_BF16_PARTIALS || k->config == OUT_FP16_PARTIALS)
        return partials_run(in, act, k->config == OUT_FP16_PARTIALS, out, err);
    if (k->config == OUT_BF16_EACH || k->config == OUT_FP16_EACH)
        return each_element_run(in, act, k->config == OUT_FP16_EACH, out);
    const int64_t M = in->M, N = in->N;
    double *r = malloc((size_t)(M * N) * sizeof(double));
    if (!r || gemm_ref_f64(act->dequant, M, &in->weight, 0, r, err)) {
        free(r);
        return -1;
    }
    for (int64_t i = 0; i < M * N; i++) {
        const float f = (float)r[i];
        uint32_t u;
        memcpy(&u, &f, sizeof u);
        const int64_t row = i / N, col = i % N;
        switch (k->config) {
        case OUT_TRUNCATE:
            out[i] = (uint16_t)(u >> 16);
            break;
        case OUT_LAST_ROWS_UNWRITTEN:
            out[i] = row >= M - 4 ? 0 : rne_bits(f);
            break;
        case OUT_NAN_TILE:
            out[i] = col >= 32 && col < 48 ? 0x7FC0 : rne_bits(f);
            break;
        case OUT_CONSTANT:
            out[i] = 0x3F80; /* 1.0 */
            break;
        case OUT_NAN_TO_ZERO:
            out[i] = isnan(f) ? 0 : rne_bits(f);
            break;
        default:
            out[i] = rne_bits(f);
            break;
        }
    }
    free(r);
    return 0;
}

static kernel_desc_t broken_kernel(const char *name, int mode)
{
    kernel_desc_t d = *kernel_find("w4a8.folded"); /* its quantizer, its refs, its M band */
    d.name = name;
    d.config = mode;
    d.run_cpu = broken_run;
    d.m_min = 1;
    d.m_max = 0;
    return d;
}
/* Replays c through the kernels matching `patterns`, the broken models kd[0..n)
 * among them, without the recorded output; refs 0 = the default references,
 * vs: the --vs model or NULL; fp8: the quantizer, traced or not. */
typedef struct {
    const char *patterns;
    const kernel_desc_t *kd;
    int n;
    unsigned refs;
    const char *vs;
    int traced;
} replay_with_t;

static void replay_with(const case_t *c, const replay_with_t *w, result_list_t *rows)
{
    const kernel_desc_t *extra[4];
    for (int i = 0; i < w->n && i < 4; i++)
        extra[i] = &w->kd[i];
    replay_options_t o;
    replay_options_default(&o);
    o.kernel_patterns = w->patterns;
    o.include_recorded = 0;
    o.extra_kernels = extra;
    o.n_extra_kernels = w->n;
    if (w->refs)
        o.refs = w->refs;
    o.vs_kernel = w->vs;
    if (w->traced) {
        o.kernel.fp8_variant = FP8_TOKEN_TRACED;
        o.kernel.act_source = ACT_SOURCE_QUANTIZE;
    }
    replay_or_fail(c, &o, rows);
}

/* c replayed (replay_with) through the broken model NAME (MODE) beside
 * test.correct, the same model rounding to nearest even: the pair every
 * fault here is judged in. */
static void replay_beside_correct(const case_t *c, const char *name, int mode, unsigned refs,
                                  const char *vs, int traced, result_list_t *rows)
{
    const kernel_desc_t kd[2] = {broken_kernel(name, mode), broken_kernel("test.correct", OUT_RNE)};
    replay_with(c, &(replay_with_t){"test.*", kd, 2, refs, vs, traced}, rows);
}

static void read_or_fail(const char *path, case_t *c)
{
    kr_error_t err = {{0}};
    if (case_read(path, c, &err))
        fail_msg("case_read(%s): %s", path, err.msg);
}
/* Replay judges by the default policy's rule (cases/policies/default.yaml,
 * read here with the policy loader), not the descriptor's 0.01. */
static void test_replay_uses_the_policy(void **state)
{
    (void)state;
    case_t c;
    test_synth_default_or_fail(17, 256, 2048, 7, &c);
    policy_t pol;
    kr_error_t err = {{0}};
    assert_int_equal(policy_load(KREPLAY_SOURCE_DIR "/cases/policies/default.yaml", &pol, &err), 0);
    const policy_rule_t *rule = policy_match(&pol, "w4a8.folded", "R_exact", "decode");
    assert_non_null(rule);
    replay_options_t o;
    replay_options_default(&o);
    o.kernel_patterns = "w4a8.folded";
    o.include_recorded = 0;
    result_list_t rows = {0};
    replay_or_fail(&c, &o, &rows);
    const result_t *r = replay_find_row(&rows, "w4a8.folded", "R_exact");
    assert_true(r->threshold == rule->rel_fro);
    assert_true(r->threshold < kernel_find("w4a8.folded")->rel_tol_exact);
    assert_int_equal(r->verdict, VERDICT_PASS);
    assert_non_null(strstr(r->note, "default.yaml:"));
    result_list_free(&rows);

    /* A scale off by 0.8 %: rel ~0.008, over the policy's 0.00504 and under
     * the descriptor's 0.01.  It fails, and is diagnosed like any failure. */
    assert_int_equal(fault_parse("scale-const:0.992", &o.fault, &err), 0);
    replay_or_fail(&c, &o, &rows);
    r = replay_find_row(&rows, "w4a8.folded", "R_exact");
    assert_true(r->metrics.rel_fro > rule->rel_fro && r->metrics.rel_fro < 0.01);
    /* The fit explains the error by one constant factor: MAGNITUDE, decided
     * by the fit rather than by |out|/|ref| leaving [0.5, 2]. */
    assert_int_equal(r->verdict, VERDICT_MAGNITUDE);
    assert_non_null(strstr(r->diagnosis, "least squares c = 0.99"));
    result_list_free(&rows);
    policy_free(&pol);
    case_free(&c);
}

/* Poison never hides a bug.  On the NaN-head sample every row has NaN in x
 * (rows 0-16 x columns 1024-1151) but the recorded fp8 codes are finite, so
 * R_exact judges every row: a kernel that leaves its last rows unwritten
 * fails; a correct one passes, and its R_source / R_sanitized rows are
 * POISONED_INPUT with the block named and no line blaming it. */
static void test_poison_does_not_hide_a_bug(void **state)
{
    (void)state;
    case_t c;
    read_or_fail(NANHEAD, &c);
    result_list_t rows = {0};
    replay_beside_correct(&c, "test.rows_unwritten", OUT_LAST_ROWS_UNWRITTEN, 0, NULL, 0, &rows);

    const result_t *bad = replay_find_row(&rows, "test.rows_unwritten", "R_exact");
    assert_true(verdict_is_failure(bad->verdict));
    assert_non_null(strstr(bad->note, "x holds 2176 non-finite at rows 0-16 x columns 1024-1151 (17 x 128 = 2176 NaN)"));
    assert_non_null(strstr(bad->note, "the kernel's activations (recorded x_fp8/x_scale) are finite there"));

    const char *refs[3] = {"R_exact", "R_source", "R_sanitized"};
    for (int i = 0; i < 3; i++) {
        const result_t *r = replay_find_row(&rows, "test.correct", refs[i]);
        assert_false(verdict_is_failure(r->verdict));
        assert_string_equal(r->diagnosis, "");
        assert_null(strstr(r->note, "are wrong"));
        assert_null(strstr(r->note, "reciprocal"));
    }
    assert_int_equal(replay_find_row(&rows, "test.correct", "R_exact")->verdict, VERDICT_PASS);
    const result_t *san = replay_find_row(&rows, "test.correct", "R_sanitized");
    assert_int_equal(san->verdict, VERDICT_POISONED_INPUT);
    assert_non_null(strstr(san->note, "no row with finite inputs left to judge: 17 of 17 rows judged apart"));
    assert_non_null(strstr(san->note, "(x: rows 0-16 x columns 1024-1151 (17 x 128 = 2176 NaN))"));
    result_list_free(&rows);

    /* The traced quantizer hands the kernel NaN rows: those are judged apart,
     * and named as 'traced', never as vllm. */
    replay_with(&c, &(replay_with_t){"w4a8.folded", NULL, 0, 0, NULL, 1}, &rows);
    const result_t *ex = replay_find_row(&rows, "w4a8.folded", "R_exact");
    assert_int_equal(ex->verdict, VERDICT_POISONED_INPUT);
    assert_non_null(strstr(ex->note, "the kernel's activations: x quantized per token (traced), which left them non-finite"));
    assert_null(strstr(ex->note, "vllm"));
    assert_null(strstr(ex->diagnosis, "vllm"));
    result_list_free(&rows);
    case_free(&c);

    /* Rows 0-4 poisoned, rows 5-16 clean: the clean rows are judged by the
     * clean case's rule and the broken kernel fails on them against every
     * reference, the poisoned block named. */
    synth_params_t p = test_synth_params(17, 256, 2048, 13);
    p.nan_rows = 5;
    p.nan_cols = 128;
    p.nan_col0 = 256;
    test_synth_or_fail(&p, &c);
    /* traced: NaN operands on rows 0-4 for R_exact too */
    replay_beside_correct(&c, "test.rows_unwritten", OUT_LAST_ROWS_UNWRITTEN, 0, NULL, 1, &rows);
    for (int i = 0; i < 3; i++) {
        bad = replay_find_row(&rows, "test.rows_unwritten", refs[i]);
        assert_true(verdict_is_failure(bad->verdict));
        assert_non_null(strstr(bad->note, "on the rows with finite inputs: rel_fro"));
        assert_non_null(strstr(bad->note, "5 of 17 rows judged apart"));
        assert_non_null(strstr(bad->note, "rows 0-4 x columns 256-383 (5 x 128 = 640 NaN)"));
        const result_t *good = replay_find_row(&rows, "test.correct", refs[i]);
        assert_int_equal(good->verdict, VERDICT_POISONED_INPUT);
        assert_non_null(strstr(good->note, "the rows with finite inputs pass"));
        assert_string_equal(good->diagnosis, "");
    }
    result_list_free(&rows);
    case_free(&c);
}

/* A kernel that truncates to bf16 passes rel_fro but fails on its bias,
 * against R_exact and against a model (--vs); the correctly rounding one
 * passes both. */
static void test_truncation_is_biased(void **state)
{
    (void)state;
    case_t c;
    test_synth_default_or_fail(64, 512, 2048, 11, &c);
    result_list_t rows = {0};
    replay_beside_correct(&c, "test.truncate", OUT_TRUNCATE, 0, "w4a8.perblock", 0, &rows);

    const result_t *t = replay_find_row(&rows, "test.truncate", "R_exact");
    assert_true(t->metrics.rel_fro < t->threshold); /* the norm alone passes it */
    assert_int_equal(t->verdict, VERDICT_WRONG);
    assert_non_null(strstr(t->note, "biased rounding"));
    assert_non_null(strstr(t->note, "fit truncation rounding"));
    assert_true(t->ulp.toward_zero > 10 * t->ulp.away_zero);
    assert_int_equal(replay_find_row(&rows, "test.truncate", "model:w4a8.perblock")->verdict, VERDICT_WRONG);

    const result_t *g = replay_find_row(&rows, "test.correct", "R_exact");
    assert_int_equal(g->verdict, VERDICT_PASS);
    assert_int_equal(ulp_round_fit(&g->ulp), ROUND_NEAREST_EVEN);
    assert_int_equal(replay_find_row(&rows, "test.correct", "model:w4a8.perblock")->verdict, VERDICT_PASS);
    result_list_free(&rows);
    case_free(&c);
}

/* Significant but immaterial: a real triton dot_scaled on an H200 (M=4096,
 * N=5120, K=8704) rounded to nearest even, and its 1592 outputs that
 * differed from R_exact leaned 1078:514 toward zero (z 14): the matrix
 * unit's internal sums.  That passes; the same lean over 1% of the outputs,
 * or a tiny lean whose outputs fit truncation, fails. */
static void test_immaterial_lean_passes(void **state)
{
    (void)state;
    case_t c;
    test_synth_default_or_fail(64, 512, 2048, 11, &c);
    const kernel_desc_t kd = broken_kernel("test.correct", OUT_RNE);
    result_list_t rows = {0};
    replay_with(&c, &(replay_with_t){"test.*", &kd, 1, 0, NULL, 0}, &rows);
    result_t row = *replay_find_row(&rows, "test.correct", "R_exact");
    assert_int_equal(row.verdict, VERDICT_PASS);
    policy_rule_t rule;
    judge_rule_for(NULL, &kd, &row, 0.01, &rule);
    char note[512];

    row.ulp.count = 20971520;                 /* the device row's figures */
    row.ulp.toward_zero = 1078;
    row.ulp.away_zero = 514;
    row.ulp.round_decided = 11126122;
    memset(row.ulp.round_match, 0, sizeof row.ulp.round_match);
    row.ulp.round_match[ROUND_NEAREST_EVEN] = 11124766;
    row.ulp.round_match[ROUND_TOWARD_ZERO] = 5562000;
    assert_int_equal(judge_row(&rule, &row, NULL, note, sizeof note), VERDICT_PASS);

    /* The same lean over 1% of the outputs: a bias that moves results. */
    row.ulp.count = 100000;
    row.ulp.toward_zero = 2000;
    row.ulp.away_zero = 950;
    assert_int_equal(judge_row(&rule, &row, NULL, note, sizeof note), VERDICT_WRONG);
    assert_non_null(strstr(note, "biased rounding: 2000 of 2950"));
    assert_non_null(strstr(note, "net 0.0105 of the outputs"));

    /* A tiny lean, but the deciding outputs fit truncation: a rounding bug. */
    row.ulp.count = 20971520;
    row.ulp.toward_zero = 1078;
    row.ulp.away_zero = 514;
    row.ulp.round_match[ROUND_NEAREST_EVEN] = 5562000;
    row.ulp.round_match[ROUND_TOWARD_ZERO] = 11124766;
    assert_int_equal(judge_row(&rule, &row, NULL, note, sizeof note), VERDICT_WRONG);
    assert_non_null(strstr(note, "fit truncation rounding"));
    result_list_free(&rows);
    case_free(&c);
}

/* Accumulation precision: kernels that keep their running sum in bf16 or
 * fp16 (rounded after every 32-block, from exact fp64 block products) fail
 * at K=2048 against R_exact with a line naming the rounding -- the fp16 one
 * and the bf16 one on a short K under the rel_fro threshold, where only the
 * fit sees them -- and the correctly rounding kernel passes with its fit
 * measured and not reduced. */
#define XS_EACH "x_scale applied to each product: residual" /* the models sum act->dequant */
static void test_reduced_running_sum_fails(void **state)
{
    (void)state;
    static const struct {
        int64_t K;
        int mode;
        const char *line;
    } table[] = {
        {2048, OUT_BF16_PARTIALS, "running sum rounded to bf16 every 32-K block, " XS_EACH},
        {256, OUT_BF16_PARTIALS, "running sum rounded to bf16 every 32-K block, " XS_EACH},
        {2048, OUT_FP16_PARTIALS, "running sum rounded to fp16 every 32-K block, " XS_EACH},
    };
    for (size_t t = 0; t < sizeof table / sizeof table[0]; t++) {
        case_t c;
        test_synth_default_or_fail(16, 128, table[t].K, 21, &c);
        result_list_t rows = {0};
        replay_beside_correct(&c, "test.reduced", table[t].mode, REF_EXACT, NULL, 0, &rows);
        const result_t *b = replay_find_row(&rows, "test.reduced", "R_exact");
        print_message("K=%lld: rel_fro %.4g (threshold %.4g), fit %s %.3g vs fp32 %.3g on %lld; %s\n",
                      (long long)table[t].K, b->metrics.rel_fro, b->threshold, b->acc_fit.model,
                      b->acc_fit.resid_best, b->acc_fit.resid_fp32, (long long)b->acc_fit.sampled,
                      b->note);
        assert_int_equal(b->verdict, VERDICT_WRONG);
        if (!strstr(b->diagnosis, table[t].line))
            fail_msg("K=%lld diagnosis: %s", (long long)table[t].K, b->diagnosis);
        if (table[t].mode == OUT_FP16_PARTIALS || table[t].K == 256) {
            assert_true(b->metrics.rel_fro <= b->threshold); /* the norm alone passes it */
            assert_non_null(strstr(b->note, table[t].line));
        }
        const result_t *g = replay_find_row(&rows, "test.correct", "R_exact");
        assert_int_equal(g->verdict, VERDICT_PASS);
        assert_true(g->acc_fit.sampled > 0);
        assert_true(g->acc_fit.resid_fp32 < g->acc_fit.resid_best);
        result_list_free(&rows);
        case_free(&c);
    }
}

/* The per-element models, which run 8 sampled outputs side by side, give a
 * kernel that rounds its running sum after every element (written above
 * from the spec decoders) exactly: residual 0, on N = 64 (every sampled
 * column in a group of 8) and N = 61 (5 columns left over). */
static void check_each_element_fit(int64_t N, int mode, const char *model)
{
    case_t c;
    test_synth_default_or_fail(16, N, 512, 23, &c);
    result_list_t rows = {0};
    replay_beside_correct(&c, "test.each", mode, REF_EXACT, NULL, 0, &rows);
    const acc_fit_t *fit = &replay_find_row(&rows, "test.each", "R_exact")->acc_fit;
    print_message("N=%lld: fit %s residual %.3g vs fp32 %.3g on %lld\n", (long long)N, fit->model,
                  fit->resid_best, fit->resid_fp32, (long long)fit->sampled);
    assert_string_equal(fit->model, model);
    assert_true(fit->resid_best == 0.0);
    assert_true(fit->resid_fp32 > 1e-3);
    assert_int_equal(fit->sampled, 16 * N);
    result_list_free(&rows);
    case_free(&c);
}

static void test_each_element_rounding_fits_exactly(void **state)
{
    (void)state;
    check_each_element_fit(64, OUT_FP16_EACH, "fp16-elem");
    check_each_element_fit(61, OUT_FP16_EACH, "fp16-elem");
    check_each_element_fit(64, OUT_BF16_EACH, "bf16-elem");
    check_each_element_fit(61, OUT_BF16_EACH, "bf16-elem");
}

/* Poison masked: handed NaN x_scale by the 'traced' quantizer (the NaN-head
 * sample: every one of its 17 rows), a kernel that writes 0 where its
 * product is NaN fails, with the block and the quantizer named; the kernel
 * that propagates the NaN is POISONED_INPUT. */
static void test_poison_masked_fails(void **state)
{
    (void)state;
    case_t c;
    read_or_fail(NANHEAD, &c);
    result_list_t rows = {0};
    replay_beside_correct(&c, "test.nan_to_zero", OUT_NAN_TO_ZERO, REF_EXACT, NULL, 1, &rows);
    const result_t *z = replay_find_row(&rows, "test.nan_to_zero", "R_exact");
    assert_int_equal(z->verdict, VERDICT_WRONG);
    assert_non_null(strstr(z->note, "poison masked"));
    if (!strstr(z->diagnosis, "rows 0-16 (x: rows 0-16 x columns 1024-1151 (17 x 128 = 2176 NaN)): "
                              "the operands give NaN (x quantized per token (traced): non-finite "
                              "x_scale), the kernel wrote finite values there (all zero"))
        fail_msg("diagnosis: %s", z->diagnosis);
    const result_t *g = replay_find_row(&rows, "test.correct", "R_exact");
    assert_int_equal(g->verdict, VERDICT_POISONED_INPUT);
    assert_non_null(strstr(g->note, "no row with finite inputs left to judge"));
    assert_non_null(strstr(g->note, "x quantized per token (traced)"));
    assert_string_equal(g->diagnosis, "");
    result_list_free(&rows);
    case_free(&c);
}

/* --vs: an element NaN on one side only fails the row, whatever the norm. */
static void test_vs_nan_disagreement_fails(void **state)
{
    (void)state;
    case_t c;
    test_synth_default_or_fail(17, 256, 2048, 3, &c);
    const kernel_desc_t kd = broken_kernel("test.nan_tile", OUT_NAN_TILE);
    result_list_t rows = {0};
    replay_with(&c, &(replay_with_t){"test.*", &kd, 1, 0, "w4a8.perblock", 0}, &rows);
    const result_t *v = replay_find_row(&rows, "test.nan_tile", "model:w4a8.perblock");
    assert_true(verdict_is_failure(v->verdict));
    assert_non_null(strstr(v->note, "non-finite on one side: 272)"));
    /* The other way round (the model NaN, the kernel finite) fails too. */
    result_t flipped = *v;
    flipped.metrics.out_nf = v->metrics.ref_nf;
    flipped.metrics.ref_nf = v->metrics.out_nf;
    flipped.verdict = VERDICT_PASS;
    policy_rule_t rule;
    judge_rule_for(NULL, &kd, &flipped, 0.01, &rule);
    char note[512];
    assert_int_equal(judge_row(&rule, &flipped, NULL, note, sizeof note), VERDICT_WRONG);
    assert_non_null(strstr(note, "272 elements are NaN or Inf on one side only"));
    result_list_free(&rows);
    case_free(&c);
}

/* All-zero activations: the reference is exactly zero, relative error is
 * undefined; a zero output passes, a nonzero one is WRONG by absolute error. */
static void test_zero_reference(void **state)
{
    (void)state;
    synth_params_t p;
    synth_params_default(&p);
    p.M = 8;
    p.N = 256;
    p.K = 2048;
    p.seed = 5;
    p.zero_rows = 8;
    case_t c;
    kr_error_t err = {{0}};
    assert_int_equal(synth_case(&p, &c, &err), 0);
    for (int64_t i = 0; i < c.M * c.K; i++)
        assert_true(c.x[i] == 0.0f);
    const kernel_desc_t kd = broken_kernel("test.constant", OUT_CONSTANT);
    result_list_t rows = {0};
    replay_with(&c, &(replay_with_t){"w4a8.folded,test.*", &kd, 1, 0, NULL, 0}, &rows);
    const result_t *z = replay_find_row(&rows, "w4a8.folded", "R_exact");
    assert_int_equal(z->verdict, VERDICT_PASS);
    assert_non_null(strstr(z->note, "the reference is exactly zero and so is the output"));
    const result_t *k = replay_find_row(&rows, "test.constant", "R_source");
    assert_int_equal(k->verdict, VERDICT_WRONG);
    /* 1.0 everywhere: ||out||_F = sqrt(8 * 256) exactly. */
    assert_true(fabs(k->metrics.abs_fro - sqrt(8.0 * 256.0)) < 1e-12);
    assert_non_null(strstr(k->note, "relative error undefined; absolute ||out - ref||_F 45.25"));
    result_list_free(&rows);
    case_free(&c);
}

KR_TEST_MAIN(
    test_replay_uses_the_policy, test_poison_does_not_hide_a_bug, test_truncation_is_biased,
    test_immaterial_lean_passes, test_reduced_running_sum_fails,
    test_each_element_rounding_fits_exactly, test_poison_masked_fails,
    test_vs_nan_disagreement_fails, test_zero_reference);
