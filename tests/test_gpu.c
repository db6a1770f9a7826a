/* The GPU kernels (kernels/gpu/) against their CPU models, through the GPU
 * runner (harness/engine/gpu_run.h).
 *
 * Skipped (exit 77) where the build has no GPU support or no device is
 * present.  On a GPU:
 *  - every SIMT kernel (quant.fp8_token, quant.mxfp4, w4a8.perblock,
 *    w4a8.folded, w4a8.decode, w4a4.aiter, bf16.skinny, bf16.sequential)
 *    matches its CPU model (kernel_find(name)->run_cpu / prepare_act) bit for
 *    bit on synthetic cases (N = 48 .. 1280, M = 1, 17, 64, 300, K = 2048,
 *    3072, 5120, both scale layouts, e8m0 byte 0 as 0, NaN heads, zero rows,
 *    decode split counts 4, 8, 32) and on the samples in cases/samples;
 *    reruns are bit-identical, canaries intact, every element written;
 *  - the fault kernels are caught: race -> NONDETERMINISTIC, oob -> OOB_WRITE,
 *    unwritten tile -> the poison survives (WRONG);
 *  - the fp8 matrix-unit variant (NVIDIA mma e4m3) is MEASURED against the
 *    folded model and an fp64 sum of the same operands as K grows, and the
 *    table is printed: nothing asserts it is zero. */
/* ctest-labels: gpu */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>

#include "act_prepare.h"
#include "case_io.h"
#include "formats.h"
#include "gpu_run.h"
#include "kr_gpu.h"
#include "metrics.h"
#include "registry.h"
#include "replay.h"
#include "synth.h"
#include "test_cases.h"
#include "test_support.h"

/* The GPU ctest allotted this process (RESOURCE_GROUPS gpus:1, the id in
 * CTEST_RESOURCE_GROUP_0_GPUS), else 0: under `ctest -j` each test runs on
 * the GPU it was given and no other. */
static int g_device = 0;

static int g_checked, g_skipped_rows;

/* ------------------------------------------------------------ helpers */

static kernel_inputs_t inputs_of(const case_t *c, const uint8_t *weight, e8m0_mode_t mode)
{
    return (kernel_inputs_t){
        .M = c->M, .N = c->N, .K = c->K,
        .x = c->x, .x_fp8 = c->x_fp8, .x_scale = c->x_scale, .x_fp8_format = c->x_fp8_format,
        .weight = {.packed = weight, .scales = c->weight_scale, .layout = c->scale_layout,
                   .e8m0_mode = mode, .N = c->N, .K = c->K},
        .weight_ref = c->weight_ref, .weight_ref_len = c->weight_ref_len,
        .weight_bf16 = c->weight_bf16,
    };
}

static int bytes_equal_count(const uint8_t *a, const uint8_t *b, size_t n)
{
    int64_t d = 0;
    for (size_t i = 0; i < n; i++)
        d += a[i] != b[i];
    return (int)d;
}

/* One kernel on one case: model vs GPU, bit for bit.  Returns 1 if checked. */
static int check_kernel(const char *label, const kernel_inputs_t *in, const char *name,
                        const kernel_options_t *kopt)
{
    const kernel_desc_t *k = kernel_find(name);
    if (!k) {
        print_message("  %-44s %-16s SKIP: no such model in the registry\n", label, name);
        g_skipped_rows++;
        return 0;
    }
    char why[256];
    if (kernel_unsupported_reason(k, in->M, in->N, in->K, why, sizeof why))
        return 0;
    if ((k->op == KERNEL_OP_GEMM && k->weight_kind == WEIGHT_KIND_BF16 && !in->weight_bf16) ||
        (k->op == KERNEL_OP_GEMM && k->weight_kind == WEIGHT_KIND_MXFP4 && !in->weight.packed))
        return 0;
    kernel_act_t act;
    kr_error_t err = {{0}};
    if (k->prepare_act(k, in, kopt, &act, &err) != 0)
        return 0;   /* the model declines the case (no x, no split-K config, ...) */

    gpu_run_options_t o;
    gpu_run_options_default(&o);
        o.device = g_device;
    o.reruns = 2;
    o.timed_runs = 1;
    gpu_run_result_t res;
    kr_error_t gerr = {{0}};
    int rc = gpu_run_kernel(k, in, &act, kopt, &o, &res, &gerr);
    if (rc != 0)
        fail_msg("%s %s: GPU run failed: %s", label, name, gerr.msg);

    if (k->op == KERNEL_OP_QUANT) {
        const size_t mk = (size_t)in->M * (size_t)in->K;
        int dc = bytes_equal_count(res.q_codes, act.codes, mk), ds;
        if (res.q_token_scale)
            ds = bytes_equal_count((const uint8_t *)res.q_token_scale, (const uint8_t *)act.token_scale,
                                   (size_t)in->M * sizeof(float));
        else
            ds = bytes_equal_count(res.q_block_scale, act.block_scale, (size_t)in->M * (size_t)(in->K / 32));
        print_message("  %-44s %-16s codes %s (%d differ), scales %s (%d bytes differ)  %s  %.3f ms\n", label,
                      name, dc ? "DIFFER" : "bit-identical", dc, ds ? "DIFFER" : "bit-identical", ds,
                      verdict_name(res.verdict), res.ms_median);
        if (dc || ds || res.verdict != VERDICT_PASS)
            fail_msg("%s %s: GPU quantizer differs from its model (%s)", label, name, res.note);
    } else {
        uint16_t *model = malloc((size_t)in->M * (size_t)in->N * sizeof(uint16_t));
        assert_non_null(model);
        kernel_run_info_t info = {{0}};
        if (k->run_cpu(k, in, &act, kopt, model, &info, &err) != 0)
            fail_msg("%s %s: CPU model failed: %s", label, name, err.msg);
        gpu_run_check_model(&res, model, 0);
        print_message("  %-44s %-16s %lld/%lld bit-identical (max %llu ULP)  %s  %.3f ms\n", label,
                      name, (long long)res.model.identical, (long long)res.model.count,
                      (unsigned long long)res.model.max_ulp, verdict_name(res.verdict), res.ms_median);
        free(model);
        if (res.verdict != VERDICT_PASS)
            fail_msg("%s %s: %s: %s", label, name, verdict_name(res.verdict), res.note);
    }
    g_checked++;
    gpu_run_result_free(&res);
    kernel_act_free(&act);
    return 1;
}

static const char *const simt_kernels[] = {
    "quant.fp8_token", "quant.mxfp4", "w4a8.perblock", "w4a8.folded", "w4a8.decode",
    "w4a4.aiter",      "bf16.skinny", "bf16.sequential",
};

static void check_all_kernels(const char *label, const case_t *c, e8m0_mode_t mode, int decode_splits)
{
    uint8_t *owned = NULL;
    kr_error_t err = {{0}};
    const uint8_t *w = c->weight ? case_weight_checkpoint(c, &owned, &err) : NULL;
    if (c->weight && !w)
        fail_msg("%s: %s", label, err.msg);
    kernel_inputs_t in = inputs_of(c, w, mode);
    kernel_options_t kopt;
    kernel_options_default(&kopt);
    for (size_t i = 0; i < sizeof simt_kernels / sizeof simt_kernels[0]; i++) {
        kopt.decode_splits = strcmp(simt_kernels[i], "w4a8.decode") == 0 ? decode_splits : 0;
        check_kernel(label, &in, simt_kernels[i], &kopt);
    }
    free(owned);
}

static void synth_one(int64_t M, int64_t N, int64_t K, uint64_t seed, scale_layout_t layout,
                      int nan_rows, int zero_rows, e8m0_mode_t mode, int decode_splits)
{
    synth_params_t p = test_synth_params(M, N, K, seed);
    p.scale_layout = layout;
    p.weight_format = SYNTH_WEIGHT_BOTH;
    if (nan_rows) {
        p.nan_rows = nan_rows;
        p.nan_cols = 64;
        p.nan_col0 = 128;
    }
    p.zero_rows = zero_rows;
    case_t c;
    test_synth_or_fail(&p, &c);
    char label[128];
    snprintf(label, sizeof label, "synth M=%lld N=%lld K=%lld %s%s%s%s", (long long)M, (long long)N,
             (long long)K, layout == SCALE_LAYOUT_KN ? "kn" : "nk", nan_rows ? " nan" : "",
             zero_rows ? " zero" : "", mode == E8M0_ZERO_IS_ZERO ? " e8m0-0=0" : "");
    if (decode_splits) {
        size_t len = strlen(label);
        snprintf(label + len, sizeof label - len, " SK=%d", decode_splits);
    }
    check_all_kernels(label, &c, mode, decode_splits);
    case_free(&c);
}

/* ------------------------------------------------------------ tests */

static void test_simt_synthetic(void **state)
{
    (void)state;
    synth_one(1, 48, 5120, 11, SCALE_LAYOUT_NK, 0, 0, E8M0_SPEC, 0);
    synth_one(17, 48, 5120, 12, SCALE_LAYOUT_KN, 0, 0, E8M0_SPEC, 0);
    synth_one(64, 96, 5120, 13, SCALE_LAYOUT_KN, 0, 2, E8M0_SPEC, 8);
    synth_one(8, 256, 2048, 14, SCALE_LAYOUT_NK, 0, 0, E8M0_SPEC, 0);
    synth_one(17, 512, 3072, 15, SCALE_LAYOUT_NK, 4, 0, E8M0_SPEC, 0);
    synth_one(300, 256, 3072, 16, SCALE_LAYOUT_KN, 0, 0, E8M0_SPEC, 0);
    synth_one(64, 1280, 5120, 17, SCALE_LAYOUT_KN, 0, 0, E8M0_SPEC, 32);   /* decode: SIMT fallback path */
    synth_one(33, 200, 2048, 18, SCALE_LAYOUT_NK, 0, 0, E8M0_ZERO_IS_ZERO, 0);
    synth_one(2, 17408, 5120, 19, SCALE_LAYOUT_KN, 0, 0, E8M0_SPEC, 0);    /* the decode bench shape */
}

static void test_simt_samples(void **state)
{
    (void)state;
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/cases/samples", KREPLAY_SOURCE_DIR);
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d))) {
        const size_t len = strlen(e->d_name);
        if (len < 4 || strcmp(e->d_name + len - 3, ".h5") != 0)
            continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        case_t c;
        kr_error_t err = {{0}};
        if (case_read(path, &c, &err) != 0)
            fail_msg("%s", err.msg);
        check_all_kernels(e->d_name, &c, E8M0_SPEC, 0);
        case_free(&c);
        n++;
    }
    closedir(d);
    assert_true(n >= 1);
}

static void test_faults_caught(void **state)
{
    (void)state;
    case_t c;
    test_synth_default_or_fail(64, 1000, 4096, 99, &c);
    kr_error_t err = {{0}};
    kernel_inputs_t in = inputs_of(&c, c.weight, E8M0_SPEC);
    const kernel_desc_t *k = kernel_find("w4a8.folded");
    assert_non_null(k);
    kernel_options_t kopt;
    kernel_options_default(&kopt);
    kernel_act_t act;
    if (k->prepare_act(k, &in, &kopt, &act, &err) != 0)
        fail_msg("%s", err.msg);
    static const struct {
        const char *fault;
        verdict_t want;
    } faults[] = {
        {NULL, VERDICT_PASS},
        {"race", VERDICT_NONDETERMINISTIC},
        {"oob", VERDICT_OOB_WRITE},
        {"unwritten", VERDICT_WRONG},
    };
    for (size_t i = 0; i < sizeof faults / sizeof faults[0]; i++) {
        gpu_run_options_t o;
        gpu_run_options_default(&o);
        o.device = g_device;
        o.fault = faults[i].fault;
        o.reruns = 5;
        o.timed_runs = 0;
        gpu_run_result_t res;
        kr_error_t gerr = {{0}};
        if (gpu_run_kernel(k, &in, &act, &kopt, &o, &res, &gerr) != 0)
            fail_msg("fault %s: %s", faults[i].fault ? faults[i].fault : "none", gerr.msg);
        print_message("  fault %-10s -> %-18s rerun_diff=%lld canary_bad=%lld unwritten=%lld: %s\n",
                      faults[i].fault ? faults[i].fault : "(none)", verdict_name(res.verdict),
                      (long long)res.rerun_diff, (long long)res.canary_bad, (long long)res.unwritten,
                      res.note);
        assert_int_equal(res.verdict, faults[i].want);
        if (faults[i].want == VERDICT_WRONG)
            assert_true(res.unwritten > 0);
        gpu_run_result_free(&res);
    }
    kernel_act_free(&act);
    case_free(&c);
}

/* The folded operands summed two ways on the CPU: in fp64 (out64) and in
 * fp32 in k order as the model does (out32, before the bf16 rounding); both
 * times x_scale[m] * 2^(ref[n]-127) (the fp32 one with the model's rounding). */
static void folded_sums(const kernel_inputs_t *in, const kernel_act_t *act, double *out64, float *out32)
{
    const int64_t M = in->M, N = in->N, K = in->K;
    float *w = malloc((size_t)K * sizeof(float));
    float *xv = malloc((size_t)M * (size_t)K * sizeof(float));
    assert_true(w && xv);
    for (int64_t i = 0; i < M * K; i++)
        xv[i] = e4m3fn_decode(act->codes[i]);
    for (int64_t n = 0; n < N; n++) {
        int r = 0;
        if (in->weight_ref && in->weight_ref_len == N)
            r = in->weight_ref[n];
        else
            for (int64_t b = 0; b < K / 32; b++) {
                const int e = mxfp4_scale_at(in->weight.scales, in->weight.layout, N, K, n, b);
                r = e > r ? e : r;
            }
        for (int64_t k = 0; k < K; k++) {
            const int e = mxfp4_scale_at(in->weight.scales, in->weight.layout, N, K, n, k / 32);
            const float v = ldexpf(e2m1_decode(mxfp4_code_at(in->weight.packed, K, n, k)), e - r);
            w[k] = e4m3fn_decode(e4m3fn_encode(v, FP8_SATURATE));
        }
        const float epi = e8m0_decode((uint8_t)r, E8M0_SPEC);
        for (int64_t m = 0; m < M; m++) {
            double s64 = 0;
            float s32 = 0.0f;
            const float *xr = xv + m * K;
            for (int64_t k = 0; k < K; k++) {
                s64 += (double)xr[k] * (double)w[k];
                s32 += xr[k] * w[k];
            }
            out64[m * N + n] = s64 * ((double)act->token_scale[m] * (double)epi);
            const float f = act->token_scale[m] * epi;
            out32[m * N + n] = s32 * f;
        }
    }
    free(w);
    free(xv);
}

static double rel_f32_vs_f64(const float *v, const double *ref, int64_t n)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(v[i]) || !isfinite(ref[i]))
            continue;
        num += (v[i] - ref[i]) * (v[i] - ref[i]);
        den += ref[i] * ref[i];
    }
    return den > 0 ? sqrt(num / den) : NAN;
}

static double rel_vs_f64(const uint16_t *bits, const double *ref, int64_t n)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        const double o = bf16_decode(bits[i]);
        if (!isfinite(o) || !isfinite(ref[i]))
            continue;
        num += (o - ref[i]) * (o - ref[i]);
        den += ref[i] * ref[i];
    }
    return den > 0 ? sqrt(num / den) : NAN;
}

/* ULP distance of two finite floats in the total order (+0 and -0 equal). */
static uint64_t f32_ulp(float a, float b)
{
    int64_t ia = (int32_t)f32_bits(a), ib = (int32_t)f32_bits(b);
    ia = ia < 0 ? INT64_C(0x80000000) - ia : ia;
    ib = ib < 0 ? INT64_C(0x80000000) - ib : ib;
    return (uint64_t)(ia > ib ? ia - ib : ib - ia);
}

/* The MMA kernel's fp32 output (before bf16) for one case, through kr_gpu directly. */
static int mma_f32(const kernel_inputs_t *in, const kernel_act_t *act, float *out)
{
    const size_t M = (size_t)in->M, N = (size_t)in->N, K = (size_t)in->K;
    void *packed = NULL, *scales = NULL, *ref = NULL, *w8 = NULL, *x = NULL, *xs = NULL, *o = NULL;
    int st = kr_gpu_malloc(&packed, N * K / 2);
    if (!st) st = kr_gpu_memcpy_h2d(packed, in->weight.packed, N * K / 2);
    if (!st) st = kr_gpu_malloc(&scales, N * K / 32);
    if (!st) st = kr_gpu_memcpy_h2d(scales, in->weight.scales, N * K / 32);
    kr_gpu_mxfp4_t w = {.packed = packed, .scales = scales,
                        .scale_layout = in->weight.layout == SCALE_LAYOUT_KN,
                        .e8m0_zero_is_zero = 0, .N = in->N, .K = in->K};
    if (!st) st = kr_gpu_malloc(&ref, N);
    if (!st) st = kr_gpu_w4a8_row_ref(&w, NULL, ref, NULL);
    if (!st) st = kr_gpu_malloc(&w8, N * K);
    if (!st) st = kr_gpu_w4a8_preshift(&w, ref, w8, NULL);
    if (!st) st = kr_gpu_malloc(&x, M * K);
    if (!st) st = kr_gpu_memcpy_h2d(x, act->codes, M * K);
    if (!st) st = kr_gpu_malloc(&xs, M * sizeof(float));
    if (!st) st = kr_gpu_memcpy_h2d(xs, act->token_scale, M * sizeof(float));
    if (!st) st = kr_gpu_malloc(&o, M * N * sizeof(float));
    if (!st) st = kr_gpu_w4a8_mma_f32(x, xs, in->M, w8, ref, 0, in->N, in->K, o, NULL);
    if (!st) st = kr_gpu_synchronize();
    if (!st) st = kr_gpu_memcpy_d2h(out, o, M * N * sizeof(float));
    kr_gpu_free(packed); kr_gpu_free(scales); kr_gpu_free(ref); kr_gpu_free(w8);
    kr_gpu_free(x); kr_gpu_free(xs); kr_gpu_free(o);
    return st;
}

static void test_matrix_units_measured(void **state)
{
    (void)state;
    if (!gpu_kernel_supported("w4a8.folded", GPU_VARIANT_MATRIX)) {
        print_message("  matrix-unit variant not built; nothing to measure\n");
        return;
    }
    const kernel_desc_t *k = kernel_find("w4a8.folded");
    assert_non_null(k);
    print_message("  MMA: fp8 matrix units vs the fp32 folded model, M=128 N=512 (synthetic), as K grows\n");
    print_message("  MMA: %5s | %-40s | %-46s | %-31s\n", "", "bf16 output: ULP vs model", "fp32 before rounding: ULP vs model's fp32 sum",
                  "rel. Frobenius error vs fp64");
    print_message("  MMA: %5s | %8s %6s %6s %6s %6s %5s | %7s %6s %6s %6s %7s %7s | %9s %9s %9s\n", "K",
                  "ident", "1", "2", "3-4", ">4", "max", "ident", "1", "2-4", "5-16", "17-256", ">256",
                  "mma f32", "model f32", "mma bf16");
    for (int64_t K = 256; K <= 8192; K *= 2) {
        case_t c;
        test_synth_default_or_fail(128, 512, K, 1000 + (uint64_t)K, &c);
        kr_error_t err = {{0}};
        /* synth's weight_ref is the row max, which mma_f32 computes on the device */
        kernel_inputs_t in = inputs_of(&c, c.weight, E8M0_SPEC);
        kernel_options_t kopt;
        kernel_options_default(&kopt);
        kernel_act_t act;
        if (k->prepare_act(k, &in, &kopt, &act, &err) != 0)
            fail_msg("%s", err.msg);
        const int64_t MN = c.M * c.N;
        uint16_t *model = malloc((size_t)MN * sizeof(uint16_t));
        double *f64 = malloc((size_t)MN * sizeof(double));
        float *m32 = malloc((size_t)MN * sizeof(float)), *g32 = malloc((size_t)MN * sizeof(float));
        assert_true(model && f64 && m32 && g32);
        kernel_run_info_t info = {{0}};
        if (k->run_cpu(k, &in, &act, &kopt, model, &info, &err) != 0)
            fail_msg("%s", err.msg);
        folded_sums(&in, &act, f64, m32);
        gpu_run_options_t o;
        gpu_run_options_default(&o);
        o.device = g_device;
        o.variant = GPU_VARIANT_MATRIX;
        o.reruns = 2;
        o.timed_runs = 3;
        gpu_run_result_t res;
        kr_error_t gerr = {{0}};
        if (gpu_run_kernel(k, &in, &act, &kopt, &o, &res, &gerr) != 0) {
            print_message("  K=%lld: matrix-unit run not possible here: %s\n", (long long)K, gerr.msg);
            free(model); free(f64); free(m32); free(g32);
            kernel_act_free(&act);
            case_free(&c);
            return;
        }
        /* A matrix kernel must still be deterministic, write everything, stay in bounds. */
        assert_int_equal(res.rerun_diff, 0);
        assert_int_equal(res.unwritten, 0);
        assert_int_equal(res.canary_bad, 0);
        gpu_run_check_model(&res, model, UINT64_MAX);
        int64_t over4 = 0;
        for (int b = ULP_BIN_3_4 + 1; b < ULP_BIN_COUNT; b++)
            over4 += res.model.bins[b];
        if (mma_f32(&in, &act, g32) != KR_GPU_OK)
            fail_msg("mma_f32: %s", kr_gpu_last_error());
        int64_t fb[6] = {0};
        for (int64_t i = 0; i < MN; i++) {
            if (!isfinite(g32[i]) || !isfinite(m32[i])) {
                fb[5]++;
                continue;
            }
            const uint64_t d = f32_ulp(g32[i], m32[i]);
            fb[d == 0 ? 0 : d == 1 ? 1 : d <= 4 ? 2 : d <= 16 ? 3 : d <= 256 ? 4 : 5]++;
        }
        const double rel_mma_bf16 = rel_vs_f64(res.out, f64, MN);
        print_message("  MMA: %5lld | %7.3f%% %6lld %6lld %6lld %6lld %5llu | %6.2f%% %6lld %6lld %6lld %7lld %7lld | %9.2e %9.2e %9.2e\n",
                      (long long)K, 100.0 * res.model.identical_frac, (long long)res.model.bins[ULP_BIN_1],
                      (long long)res.model.bins[ULP_BIN_2], (long long)res.model.bins[ULP_BIN_3_4],
                      (long long)over4, (unsigned long long)res.model.max_ulp, 100.0 * (double)fb[0] / (double)MN,
                      (long long)fb[1], (long long)fb[2], (long long)fb[3], (long long)fb[4], (long long)fb[5],
                      rel_f32_vs_f64(g32, f64, MN), rel_f32_vs_f64(m32, f64, MN), rel_mma_bf16);
        /* Loose sanity only (a layout bug gives rel ~1): the difference is the finding, not a failure. */
        assert_true(rel_mma_bf16 < 1e-2);
        if (K == 2048) {
            /* The 128-wide tile must give the same bits as the default 256 (same k order per output). */
            const int prev = kr_gpu_w4a8_mma_set_tile(128);
            gpu_run_result_t r128;
            if (gpu_run_kernel(k, &in, &act, &kopt, &o, &r128, &gerr) != 0)
                fail_msg("%s", gerr.msg);
            kr_gpu_w4a8_mma_set_tile(prev);
            assert_memory_equal(r128.out, res.out, (size_t)MN * sizeof(uint16_t));
            gpu_run_result_free(&r128);
        }
        gpu_run_result_free(&res);
        free(model); free(f64); free(m32); free(g32);
        kernel_act_free(&act);
        case_free(&c);
    }
}

static void test_summary(void **state)
{
    (void)state;
    print_message("  %d kernel/case pairs bit-identical to their models; %d rows skipped (model missing)\n",
                  g_checked, g_skipped_rows);
    assert_true(g_checked > 0);
}

/* "id:1,slots:1" -> 1; -1 when absent or malformed. */
static int allotted_gpu(void)
{
    const char *count = getenv("CTEST_RESOURCE_GROUP_COUNT");
    const char *spec = getenv("CTEST_RESOURCE_GROUP_0_GPUS");
    if (!count || !spec)
        return -1;
    const char *id = strstr(spec, "id:");
    return id ? atoi(id + 3) : -1;
}

/* usage: test_gpu [--part simt|samples|faults|matrix] (default: all) */
int main(int argc, char **argv)
{
    char why[256];
    if (!gpu_available(why, sizeof why)) {
        printf("test_gpu: skipped: %s\n", why);
        return TEST_SKIPPED;
    }
    const char *part = argc >= 3 && !strcmp(argv[1], "--part") ? argv[2] : "all";
    int allotted = allotted_gpu();
    if (allotted >= 0)
        g_device = allotted;
    int count = 0;
    kr_gpu_device_count(&count);
    if (g_device >= count) {
        fprintf(stderr, "test_gpu: allotted GPU %d but only %d present\n", g_device, count);
        return 1;
    }
    char name[128] = "?";
    kr_gpu_device_name(g_device, name, sizeof name);
    printf("test_gpu: part %s: %s backend on GPU %d of %d (%s), allotted by ctest: %s\n", part,
           kr_gpu_backend(), g_device, count, name, allotted >= 0 ? "yes" : "no");
    /* A ledger of which part ran on which GPU, for the resource check. */
    const char *ledger = getenv("KREPLAY_GPU_LEDGER");
    if (ledger) {
        FILE *fp = fopen(ledger, "a");
        if (fp) {
            fprintf(fp, "part=%s allotted=%d used=%d pid=%d\n", part, allotted, g_device, (int)getpid());
            fclose(fp);
        }
    }
    struct CMUnitTest all[] = {
        cmocka_unit_test(test_simt_synthetic),
        cmocka_unit_test(test_simt_samples),
        cmocka_unit_test(test_faults_caught),
        cmocka_unit_test(test_matrix_units_measured),
        cmocka_unit_test(test_summary),
    };
    const char *names[] = {"simt", "samples", "faults", "matrix"};
    if (strcmp(part, "all") != 0) {
        for (int i = 0; i < 4; i++)
            if (!strcmp(part, names[i])) {
                struct CMUnitTest one[] = {all[i]};
                return cmocka_run_group_tests_name(names[i], one, NULL, NULL);
            }
        fprintf(stderr, "test_gpu: unknown part '%s'\n", part);
        return 2;
    }
    return cmocka_run_group_tests(all, NULL, NULL);
}
