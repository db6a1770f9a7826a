/* `kreplay replay` on the bundled samples reports relative errors that an
 * independent fp64 computation confirms to 3 significant digits.
 *
 * Independent means: this file decodes fp8, e2m1 and e8m0 from the spec's
 * formulas itself, undoes WPERM with its own index formula, reads the scale
 * in either layout itself, and multiplies in long double.  Only the kernel
 * outputs and the operands each kernel consumed are taken from kreplay
 * (--save-outputs), because those are what the errors are about. */
/* ctest-labels: oracle;blas-bits */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <hdf5.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "case_io.h"
#include "spec_formats.h"
#include "test_main.h"
#include "test_support.h"

/* W[n][k] in double, from the stored (possibly fragment-order) bytes. */
static double *oracle_weight(const case_t *c)
{
    const int64_t N = c->N, K = c->K, row_bytes = K / 2, ks_count = K / 16;
    double *w = malloc((size_t)(N * K) * sizeof(double));
    for (int64_t n = 0; n < N; n++) {
        for (int64_t kb = 0; kb < row_bytes; kb++) {
            int64_t src = n * row_bytes + kb;
            if (c->weight_order == WEIGHT_ORDER_FRAGMENT) {
                /* permute_w: view(N/16, 16, K/16, 2, 4).permute(0, 2, 3, 1, 4) */
                int64_t nt = n / 16, r = n % 16, ks = kb / 8, half = (kb % 8) / 4, j = kb % 4;
                src = (((nt * ks_count + ks) * 2 + half) * 16 + r) * 4 + j;
            }
            uint8_t byte = c->weight[src];
            for (int h = 0; h < 2; h++) {
                int64_t k = 2 * kb + h;
                uint8_t e = c->scale_layout == SCALE_LAYOUT_NK ? c->weight_scale[n * (K / 32) + k / 32]
                                                               : c->weight_scale[(k / 32) * N + n];
                w[n * K + k] = spec_e2m1(h ? byte >> 4 : byte & 15) * pow(2.0, (int)e - 127);
            }
        }
    }
    return w;
}

static double *oracle_gemm(const double *A, const double *W, int64_t M, int64_t N, int64_t K)
{
    double *C = malloc((size_t)(M * N) * sizeof(double));
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            long double acc = 0;
            for (int64_t k = 0; k < K; k++)
                acc += (long double)A[m * K + k] * W[n * K + k];
            C[m * N + n] = (double)acc;
        }
    return C;
}

static double oracle_rel(const uint16_t *out, const double *ref, int64_t n)
{
    long double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double o = spec_bf16(out[i]);
        if (!isfinite(o) || !isfinite(ref[i]))
            continue;
        num += ((long double)o - ref[i]) * ((long double)o - ref[i]);
        den += (long double)ref[i] * ref[i];
    }
    return (double)sqrtl(num / den);
}

static void *read_saved(hid_t file, const char *path, hid_t mem_type, size_t elem, int64_t count)
{
    hid_t d = H5Dopen2(file, path, H5P_DEFAULT);
    assert_true(d >= 0);
    void *buf = malloc((size_t)count * elem);
    assert_true(H5Dread(d, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) >= 0);
    H5Dclose(d);
    return buf;
}

static void check_case(const char *sample)
{
    char case_path[1024], saved[1024], args[4096];
    snprintf(case_path, sizeof case_path, "%s/cases/samples/%s.h5", KREPLAY_SOURCE_DIR, sample);
    test_tmp_path(saved, sizeof saved, "oracle-outputs.h5");
    snprintf(args, sizeof args, "replay --json --no-recorded --kernels 'w4a8.perblock,w4a4.aiter' --save-outputs '%s' '%s'", saved, case_path);
    char *output = NULL;
    int rc = test_run_kreplay(args, &output);
    assert_true(rc == 0 || rc == 1);
    json_error_t jerr;
    json_t *root = json_loads(output, 0, &jerr);
    if (!root)
        fail_msg("kreplay --json output is not JSON: %s\n%s", jerr.text, output);
    free(output);

    case_t c;
    kr_error_t err;
    assert_int_equal(case_read(case_path, &c, &err), 0);
    const int64_t M = c.M, N = c.N, K = c.K;
    double *W = oracle_weight(&c);
    double *A_source = malloc((size_t)(M * K) * sizeof(double));
    for (int64_t i = 0; i < M * K; i++)
        A_source[i] = c.x[i];
    double *R_source = oracle_gemm(A_source, W, M, N, K);

    hid_t file = H5Fopen(saved, H5F_ACC_RDONLY, H5P_DEFAULT);
    assert_true(file >= 0);
    json_t *results = json_object_get(root, "results");
    int checked = 0;
    for (size_t i = 0; i < json_array_size(results); i++) {
        json_t *row = json_array_get(results, i);
        const char *kernel = json_string_value(json_object_get(row, "kernel"));
        const char *reference = json_string_value(json_object_get(row, "reference"));
        double reported = json_real_value(json_object_get(json_object_get(row, "metrics"), "rel_fro"));
        char path[256];
        snprintf(path, sizeof path, "/%s/%s/out", sample, kernel);
        uint16_t *out = read_saved(file, path, H5T_NATIVE_UINT16, 2, M * N);
        double expected;
        if (!strcmp(reference, "R_source")) {
            expected = oracle_rel(out, R_source, M * N);
        } else {
            snprintf(path, sizeof path, "/%s/%s/act_codes", sample, kernel);
            uint8_t *codes = read_saved(file, path, H5T_NATIVE_UINT8, 1, M * K);
            double *A = malloc((size_t)(M * K) * sizeof(double));
            snprintf(path, sizeof path, "/%s/%s/act_scale", sample, kernel);
            if (!strncmp(kernel, "w4a8", 4)) {
                float *scale = read_saved(file, path, H5T_NATIVE_FLOAT, 4, M);
                for (int64_t m = 0; m < M; m++)
                    for (int64_t k = 0; k < K; k++)
                        A[m * K + k] = spec_e4m3fn(codes[m * K + k]) * (double)scale[m];
                free(scale);
            } else {
                uint8_t *scale = read_saved(file, path, H5T_NATIVE_UINT8, 1, M * (K / 32));
                for (int64_t m = 0; m < M; m++)
                    for (int64_t k = 0; k < K; k++)
                        A[m * K + k] = spec_e2m1(codes[m * K + k]) *
                                       pow(2.0, (int)scale[m * (K / 32) + k / 32] - 127);
                free(scale);
            }
            double *R = oracle_gemm(A, W, M, N, K);
            expected = oracle_rel(out, R, M * N);
            TEST_FREE_ALL(R, A, codes);
        }
        free(out);
        print_message("%s %s %s: kreplay %.6g, fp64 oracle %.6g\n", sample, kernel, reference,
                      reported, expected);
        /* 3 significant digits. */
        assert_true(expected > 0);
        assert_true(fabs(reported - expected) <= 5e-4 * expected);
        checked++;
    }
    assert_true(checked >= 4); /* w4a8 and w4a4, each against R_exact and R_source */
    H5Fclose(file);
    unlink(saved);
    json_decref(root);
    TEST_FREE_ALL(W, A_source, R_source);
    case_free(&c);
}

static void test_gdn_in_proj_ba(void **state)
{
    (void)state;
    check_case("gdn_in_proj_ba_N48_K5120_M17");
}

static void test_moe_gate(void **state)
{
    (void)state;
    check_case("moe_gate_N256_K2048_M8");
}

/* Fragment-order weights and [K/32, N] scales: the oracle undoes both itself. */
static void test_prefill_kn_wperm(void **state)
{
    (void)state;
    check_case("prefill_N256_K2048_M300_kn_wperm");
}

KR_TEST_MAIN(test_gdn_in_proj_ba, test_moe_gate, test_prefill_kn_wperm);
