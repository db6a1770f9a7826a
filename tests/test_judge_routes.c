/* The one judgement (harness/judge/judge.h) by the routes that reach it: a
 * recorded output judged by its route, the bf16 rounding modes against an
 * oracle in double arithmetic, replay and gate agreeing on verdict and note,
 * rows judged apart in the metrics, and replay --policy FILE.  The judgement
 * of broken kernels on one route: test_judge.c. */
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

/* A recorded output from the W4A4 route is judged as W4A4: by fit when the
 * case does not say, by the route attribute when it does. */
static void test_recorded_route(void **state)
{
    (void)state;
    case_t c;
    test_synth_default_or_fail(17, 256, 2048, 9, &c);
    const kernel_desc_t *w4a4 = kernel_find("w4a4.aiter");
    kernel_inputs_t in = {.M = c.M, .N = c.N, .K = c.K, .x = c.x,
                          .weight = {.packed = c.weight, .scales = c.weight_scale, .layout = c.scale_layout,
                                     .e8m0_mode = E8M0_SPEC, .N = c.N, .K = c.K},
                          .dispatch_M = c.M};
    kernel_options_t ko;
    kernel_options_default(&ko);
    ko.act_source = ACT_SOURCE_QUANTIZE;
    kernel_act_t act;
    kr_error_t err = {{0}};
    assert_int_equal(w4a4->prepare_act(w4a4, &in, &ko, &act, &err), 0);
    c.out = malloc((size_t)(c.M * c.N) * sizeof(uint16_t));
    kernel_run_info_t info = {{0}};
    assert_int_equal(w4a4->run_cpu(w4a4, &in, &act, &ko, c.out, &info, &err), 0);
    kernel_act_free(&act);

    replay_options_t o;
    replay_options_default(&o);
    o.kernel_patterns = "quant.fp8_token";
    o.refs = REF_EXACT;
    result_list_t rows = {0};
    replay_or_fail(&c, &o, &rows);
    const result_t *r = replay_find_row(&rows, "recorded.out", "R_exact");
    assert_int_equal(r->verdict, VERDICT_PASS);
    assert_non_null(strstr(r->note, "the output fits W4A4"));
    result_list_free(&rows);

    c.route = strdup("w4a4");
    replay_or_fail(&c, &o, &rows);
    r = replay_find_row(&rows, "recorded.out", "R_exact");
    assert_int_equal(r->verdict, VERDICT_PASS);
    assert_non_null(strstr(r->note, "judged as the W4A4 route (the case's route attribute)"));
    result_list_free(&rows);

    /* The attribute is believed: the same output said to be W4A8 is wrong as W4A8. */
    free(c.route);
    c.route = strdup("w4a8");
    replay_or_fail(&c, &o, &rows);
    assert_true(verdict_is_failure(replay_find_row(&rows, "recorded.out", "R_exact")->verdict));
    result_list_free(&rows);
    case_free(&c);
}

/* The bf16 roundings against an oracle in double arithmetic: the value
 * scaled to an integer mantissa and rounded by rint / trunc / round, and
 * double rounding through 10 mantissa bits first. */
static double round_scaled(double v, int bits, int mode)
{
    int e;
    frexp(v, &e); /* v = f 2^e, 0.5 <= |f| < 1 */
    const double q = ldexp(v, bits + 1 - e);
    const double r = mode == ROUND_TOWARD_ZERO ? trunc(q) : mode == ROUND_HALF_AWAY ? round(q) : rint(q);
    return ldexp(r, e - bits - 1);
}

static void test_rounding_modes_against_double(void **state)
{
    (void)state;
    test_rng_t rng = {0x5eed};
    ulp_stats_t fit[ROUND_MODE_COUNT];
    memset(fit, 0, sizeof fit);
    for (int i = 0; i < 200000; i++) {
        /* Random normal fp32 values, a quarter of them forced onto a tie
         * (low 16 bits 0x8000) and some onto a double-rounding edge. */
        uint32_t u = (uint32_t)test_rng_u64(&rng);
        uint32_t ex = 1 + (uint32_t)(test_rng_u64(&rng) % 200);
        u = (u & 0x807FFFFFu) | (ex << 23);
        if (i % 4 == 0)
            u = (u & 0xFFFF0000u) | 0x8000u;
        else if (i % 4 == 1)
            u = (u & 0xFFFF0000u) | 0x7000u | (uint32_t)(test_rng_u64(&rng) & 0xFFFu);
        float f;
        memcpy(&f, &u, sizeof f);
        const double v = f;
        double want[ROUND_MODE_COUNT];
        want[ROUND_NEAREST_EVEN] = round_scaled(v, 7, ROUND_NEAREST_EVEN);
        want[ROUND_TOWARD_ZERO] = round_scaled(v, 7, ROUND_TOWARD_ZERO);
        want[ROUND_HALF_AWAY] = round_scaled(v, 7, ROUND_HALF_AWAY);
        want[ROUND_DOUBLE] = round_scaled(round_scaled(v, 10, ROUND_NEAREST_EVEN), 7, ROUND_NEAREST_EVEN);
        for (int m = 0; m < ROUND_MODE_COUNT; m++) {
            const float w = (float)want[m];
            uint32_t wu;
            memcpy(&wu, &w, sizeof wu);
            assert_int_equal(wu & 0xFFFFu, 0); /* the oracle's result is a bf16 value */
            const uint16_t got = bf16_round_mode(f, (round_mode_t)m);
            if (got != (uint16_t)(wu >> 16))
                fail_msg("mode %s on 0x%08x: got 0x%04x want 0x%04x", round_mode_name((round_mode_t)m), u,
                         got, wu >> 16);
            /* An output rounded by mode m, classified against its fp32 reference. */
            const uint16_t out = (uint16_t)(wu >> 16);
            ulp_stats_t one;
            ulp_stats_bf16_vs_f32(&out, &f, 1, &one);
            ulp_stats_merge(&fit[m], &one);
        }
    }
    for (int m = 0; m < ROUND_MODE_COUNT; m++) {
        assert_int_equal(ulp_round_fit(&fit[m]), m);
        assert_int_equal(fit[m].round_match[m], fit[m].round_decided);
        /* and it beats every other mode by a wide margin */
        for (int o = 0; o < ROUND_MODE_COUNT; o++)
            if (o != m)
                assert_true(fit[m].round_match[o] < fit[m].round_decided * 9 / 10);
    }
    assert_true(fit[ROUND_TOWARD_ZERO].toward_zero > 0 && fit[ROUND_TOWARD_ZERO].away_zero == 0);
}

/* replay and gate give the same verdict and note on the same row, a
 * policy-only failure (a scale off by 0.8 %) included, with its diagnosis. */
static void test_replay_and_gate_agree(void **state)
{
    (void)state;
    static const char *const samples[3] = {"moe_gate_N256_K2048_M8", "gdn_out_proj_slice_N512_K3072_M17_nanhead",
                                           "prefill_N256_K2048_M300_kn_wperm"};
    char dir[512], suite[600], run[600];
    test_tmp_path(dir, sizeof dir, "judge-gate");
    assert_int_equal(mkdir(dir, 0777), 0);
    snprintf(suite, sizeof suite, "%s/suite.yaml", dir);
    snprintf(run, sizeof run, "%s/run", dir);
    FILE *fp = fopen(suite, "w");
    assert_non_null(fp);
    fprintf(fp, "suite: judge-agree\ncases:\n  - files: [");
    for (int i = 0; i < 3; i++)
        fprintf(fp, "%s\"%s/cases/samples/%s.h5\"", i ? ", " : "", KREPLAY_SOURCE_DIR, samples[i]);
    fprintf(fp, "]\nkernels: [\"w4a8.folded\", \"w4a8.perblock\", \"w4a4.aiter\"]\n");
    fclose(fp);
    gate_options_t go = {.suite_path = suite, .run_dir = run, .inject = "w4a8.folded=scale-const:0.992"};
    result_list_t grows = {0};
    results_meta_t meta;
    gate_summary_t sum;
    kr_error_t err = {{0}};
    if (gate_run(&go, &grows, &meta, &sum, &err))
        fail_msg("gate_run: %s", err.msg);
    assert_true(grows.count > 0);

    replay_options_t o;
    replay_options_default(&o);
    o.kernel_patterns = "w4a8.folded,w4a8.perblock,w4a4.aiter";
    assert_int_equal(fault_parse("scale-const:0.992", &o.fault, &err), 0);
    o.fault_kernels = "w4a8.folded";
    int compared = 0, policy_only = 0;
    for (int i = 0; i < 3; i++) {
        char path[600];
        snprintf(path, sizeof path, "%s/cases/samples/%s.h5", KREPLAY_SOURCE_DIR, samples[i]);
        case_t c;
        assert_int_equal(case_read(path, &c, &err), 0);
        result_list_t rows = {0};
        replay_or_fail(&c, &o, &rows);
        for (int64_t j = 0; j < rows.count; j++) {
            const result_t *r = &rows.rows[j];
            const result_t *g = NULL;
            for (int64_t k = 0; k < grows.count && !g; k++)
                if (!strcmp(grows.rows[k].case_name, r->case_name) && !strcmp(grows.rows[k].kernel, r->kernel) &&
                    !strcmp(grows.rows[k].reference, r->reference))
                    g = &grows.rows[k];
            if (!g)
                fail_msg("gate has no row %s %s %s", r->case_name, r->kernel, r->reference);
            if (g->verdict != r->verdict || strcmp(g->note, r->note) || strcmp(g->diagnosis, r->diagnosis))
                fail_msg("%s %s %s: replay %s '%s' / gate %s '%s'", r->case_name, r->kernel, r->reference,
                         verdict_name(r->verdict), r->note, verdict_name(g->verdict), g->note);
            compared++;
            if ((r->verdict == VERDICT_WRONG || r->verdict == VERDICT_MAGNITUDE) &&
                r->metrics.rel_fro < kernel_find("w4a8.folded")->rel_tol_exact &&
                !strcmp(r->kernel, "w4a8.folded") && !strcmp(r->reference, "R_exact")) {
                policy_only++;
                assert_true(r->diagnosis[0] != '\0');
            }
        }
        result_list_free(&rows);
        case_free(&c);
    }
    assert_true(compared >= 18);
    assert_true(policy_only >= 2);
    result_list_free(&grows);
}

/* Rows judged apart leave the norms, stay in the non-finite counts, and
 * merge over row blocks exactly (against sums computed here in fp64). */
static void test_metrics_rows_apart(void **state)
{
    (void)state;
    enum { M = 10, N = 33 };
    float out[M * N], ref[M * N];
    uint16_t bits[M * N];
    test_rng_t rng = {42};
    for (int i = 0; i < M * N; i++) {
        ref[i] = (float)test_rng_normal(&rng);
        out[i] = ref[i] * (float)(1.0 + 0.01 * test_rng_normal(&rng));
    }
    out[2 * N + 5] = NAN;        /* row 2: apart, an output NaN */
    ref[7 * N + 1] = INFINITY;   /* row 7: apart, a reference Inf */
    out[4 * N + 3] = NAN;        /* row 4: judged, an output NaN */
    const unsigned char apart[M] = {0, 0, 1, 0, 0, 0, 0, 1, 0, 0};
    double d2 = 0, r2 = 0;
    int64_t finite = 0;
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N && !apart[m]; n++) {
            const int i = m * N + n;
            if (!isfinite(out[i]) || !isfinite(ref[i]))
                continue;
            d2 += ((double)out[i] - ref[i]) * ((double)out[i] - ref[i]);
            r2 += (double)ref[i] * ref[i];
            finite++;
        }
    metrics_t whole;
    metrics_sums_t ws;
    metrics_compute_apart(out, NULL, ref, M, N, apart, &whole, &ws);
    assert_int_equal(whole.rows_apart, 2);
    assert_int_equal(whole.finite_count, finite);
    assert_int_equal(whole.out_nf.nan, 2);
    assert_int_equal(whole.out_nf_apart.nan, 1);
    assert_int_equal(whole.ref_nf_apart.pos_inf, 1);
    assert_true(fabs(whole.rel_fro - sqrt(d2 / r2)) <= 1e-13 * sqrt(d2 / r2));
    assert_true(fabs(whole.abs_fro - sqrt(d2)) <= 1e-13 * sqrt(d2));
    assert_true(whole.worst_row != 2 && whole.worst_row != 7);

    metrics_t acc, part;
    metrics_sums_t as, ps;
    metrics_merge_init(&acc, &as);
    metrics_compute_apart(out, NULL, ref, 4, N, apart, &part, &ps);
    metrics_merge_rows(&acc, &as, &part, &ps, 0, N);
    metrics_compute_apart(out + 4 * N, NULL, ref + 4 * N, M - 4, N, apart + 4, &part, &ps);
    metrics_merge_rows(&acc, &as, &part, &ps, 4, N);
    assert_int_equal(acc.rows_apart, whole.rows_apart);
    assert_int_equal(acc.finite_count, whole.finite_count);
    assert_memory_equal(&acc.out_nf_apart, &whole.out_nf_apart, sizeof acc.out_nf_apart);
    assert_memory_equal(&acc.ref_nf_apart, &whole.ref_nf_apart, sizeof acc.ref_nf_apart);
    assert_int_equal(acc.max_abs_index, whole.max_abs_index);
    assert_true(fabs(acc.rel_fro - whole.rel_fro) <= 1e-15 * whole.rel_fro);

    /* the ULP statistics skip the same rows, and add up over blocks */
    for (int i = 0; i < M * N; i++)
        bits[i] = isfinite(out[i]) && isfinite(ref[i]) ? bf16_round_mode(ref[i], ROUND_TOWARD_ZERO) : 0x7FC0;
    ulp_stats_t uw, u1, u2, um;
    ulp_stats_bf16_vs_f32_apart(bits, ref, M, N, apart, &uw);
    assert_int_equal(uw.count, (M - 2) * N);
    ulp_stats_bf16_vs_f32_apart(bits, ref, 4, N, apart, &u1);
    ulp_stats_bf16_vs_f32_apart(bits + 4 * N, ref + 4 * N, M - 4, N, apart + 4, &u2);
    memset(&um, 0, sizeof um);
    ulp_stats_merge(&um, &u1);
    ulp_stats_merge(&um, &u2);
    assert_memory_equal(um.bins, uw.bins, sizeof uw.bins);
    assert_int_equal(um.toward_zero, uw.toward_zero);
    assert_int_equal(um.away_zero, uw.away_zero);
    assert_int_equal(um.signed_ulp_sum, uw.signed_ulp_sum);
    assert_memory_equal(um.round_match, uw.round_match, sizeof uw.round_match);
    assert_true(uw.toward_zero > 0 && uw.away_zero == 0);
    assert_int_equal(ulp_round_fit(&uw), ROUND_TOWARD_ZERO);
}

/* replay --policy FILE judges by FILE; a bad policy is one error, exit 2. */
static void test_cli_policy_option(void **state)
{
    (void)state;
    char path[512], args[1400];
    test_tmp_path(path, sizeof path, "strict-policy.yaml");
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "policy: strict\nrules:\n  - kernel: \"w4a8.folded\"\n    reference: R_exact\n    rel_fro: 0.0001\n");
    fclose(f);
    char *out = NULL;
    snprintf(args, sizeof args, "replay --json --kernels w4a8.folded --refs exact --no-recorded --policy %s %s", path,
             NANHEAD);
    assert_int_equal(test_run_kreplay(args, &out), 1);
    char where[600];
    snprintf(where, sizeof where, "%s:3)", path);
    assert_non_null(strstr(out, where));
    free(out);
    snprintf(args, sizeof args, "replay --kernels w4a8.folded --refs exact --no-recorded %s", NANHEAD);
    assert_int_equal(test_run_kreplay(args, &out), 0);
    free(out);
    snprintf(args, sizeof args, "replay --policy %s.missing %s", path, NANHEAD);
    assert_int_equal(test_run_kreplay(args, &out), 2);
    assert_non_null(strstr(out, ".missing"));
    free(out);
    remove(path);
}

KR_TEST_MAIN(
    test_recorded_route, test_rounding_modes_against_double, test_metrics_rows_apart,
    test_cli_policy_option, test_replay_and_gate_agree);
