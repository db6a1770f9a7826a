/* ctest-labels: gpu */
/* The GPU worker's references (harness/engine/gpu_session.h: the weight
 * dequantized on the device, cuBLAS on the resident operands) against an
 * fp64 oracle computed here on the CPU, on every bundled sample: cuBLAS
 * SGEMM in pedantic mode and the CPU's OpenBLAS sgemm must both lie within
 * the fp32 bound
 *   |C - C_exact| <= gamma_K(2^-24) * (|A| @ |W|^T)   (Higham 3.5)
 * elementwise (plus the fp64 oracle's own, far smaller, gamma_K(2^-53)), and
 * be non-finite exactly where the oracle is.  The GPU DGEMM oracle must lie
 * within the fp64 bound of the CPU one.  Operands: the samples' activations x
 * (R_source's) against their MXFP4 weight, dequantized once here in double
 * by its own loop.  Skipped (77) without a CUDA device. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "case_io.h"
#include "gemm_ref.h"
#include "gpu_session.h"
#include "replay.h"
#include "test_main.h"
#include "test_support.h"

static const double E2M1[8] = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0};

static double weight_at(const case_t *c, const uint8_t *packed, int64_t n, int64_t k)
{
    const int64_t K = c->K, N = c->N;
    const uint8_t byte = packed[n * (K / 2) + k / 2];
    const uint8_t code = (k % 2 == 0) ? (byte & 0xF) : (byte >> 4);
    const uint8_t e = c->scale_layout == SCALE_LAYOUT_NK ? c->weight_scale[n * (K / 32) + k / 32]
                                                         : c->weight_scale[(k / 32) * N + n];
    const double s = e == 0xFF ? NAN : ldexp(1.0, (int)e - 127);
    const double mag = E2M1[code & 7] * s;
    return (code & 8) ? -mag : mag;
}

static int g_samples;
static gpu_session_t *g_gpu;

static void check_sample(const char *path)
{
    case_t c;
    kr_error_t err = {{0}};
    assert_int_equal(case_read(path, &c, &err), 0);
    if (!c.x || !c.weight) {
        case_free(&c);
        return;
    }
    uint8_t *owned = NULL;
    const uint8_t *packed = case_weight_checkpoint(&c, &owned, &err);
    assert_non_null(packed);
    const int64_t M = c.M, N = c.N, K = c.K;
    double *Wd = malloc((size_t)(N * K) * sizeof *Wd);
    double *C64 = calloc((size_t)(M * N), sizeof *C64), *AB = calloc((size_t)(M * N), sizeof *AB);
    float *cpu = malloc((size_t)(M * N) * sizeof *cpu), *gpu = malloc((size_t)(M * N) * sizeof *gpu);
    double *gpu64 = malloc((size_t)(M * N) * sizeof *gpu64);
    assert_true(Wd && C64 && AB && cpu && gpu && gpu64);
    for (int64_t n = 0; n < N; n++)
        for (int64_t k = 0; k < K; k++)
            Wd[n * K + k] = weight_at(&c, packed, n, k);
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            double s = 0, a = 0;
            for (int64_t k = 0; k < K; k++) {
                const double p = (double)c.x[m * K + k] * Wd[n * K + k];
                s += p;
                a += fabs(p);
            }
            C64[m * N + n] = s;
            AB[m * N + n] = a;
        }
    mxfp4_weight_t w = {.packed = packed, .scales = c.weight_scale, .layout = c.scale_layout,
                        .e8m0_mode = E8M0_SPEC, .N = N, .K = K};
    assert_int_equal(gemm_ref_f32(c.x, M, &w, 0, cpu, &err), 0);
    if (gpu_session_ref_mxfp4(g_gpu, c.x, M, &w, 0, 0, gpu, &err) != 0) {
        print_error("%s: %s\n", path, err.msg);
        fail();
    }
    assert_int_equal(gpu_session_ref_mxfp4(g_gpu, c.x, M, &w, 1, 0, gpu64, &err), 0);
    const double g32 = (double)K * 0x1p-24 / (1 - (double)K * 0x1p-24);
    const double g64 = 2.0 * (double)K * 0x1p-53; /* the oracle's and DGEMM's own */
    double worst_cpu = 0, worst_gpu = 0;
    int64_t differ = 0, checked = 0;
    for (int64_t i = 0; i < M * N; i++) {
        if (!isfinite(C64[i])) {
            assert_false(isfinite(cpu[i]));
            assert_false(isfinite(gpu[i]));
            continue;
        }
        const double bound = (g32 + g64) * AB[i];
        const double ec = fabs((double)cpu[i] - C64[i]), eg = fabs((double)gpu[i] - C64[i]);
        if (!(ec <= bound) || !(eg <= bound)) {
            print_error("%s: element %lld: cpu %.9g gpu %.9g exact %.17g bound %.3g\n", path,
                        (long long)i, cpu[i], gpu[i], C64[i], bound);
            fail();
        }
        assert_true(fabs(gpu64[i] - C64[i]) <= g64 * AB[i] + 1e-300);
        if (bound > 0) {
            worst_cpu = fmax(worst_cpu, ec / bound);
            worst_gpu = fmax(worst_gpu, eg / bound);
        }
        differ += cpu[i] != gpu[i];
        checked++;
    }
    print_message("  %s: %lld finite elements; worst |err|/bound cpu %.3f gpu %.3f; "
                  "cpu and gpu differ in %lld\n",
                  strrchr(path, '/') + 1, (long long)checked, worst_cpu, worst_gpu,
                  (long long)differ);
    g_samples++;
    TEST_FREE_ALL(Wd, C64, AB, cpu, gpu, gpu64, owned);
    case_free(&c);
}

static void test_samples(void **state)
{
    (void)state;
    const char *dir = KREPLAY_SOURCE_DIR "/cases/samples";
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d))) {
        const size_t n = strlen(e->d_name);
        if (n < 4 || strcmp(e->d_name + n - 3, ".h5"))
            continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        check_sample(path);
    }
    closedir(d);
    assert_true(g_samples >= 5);
}

static int close_session(void **state)
{
    (void)state;
    gpu_session_close(g_gpu);
    return 0;
}

int main(void)
{
    char name[128], why[KR_ERROR_MSG_MAX];
    kr_error_t err = {{0}};
    const gpu_session_options_t so = {.device = 0, .timeout_s = 300};
    if (gpu_session_open(&g_gpu, &so, &err) ||
        !gpu_session_device(g_gpu, name, sizeof name, why, sizeof why) ||
        !gpu_session_refs_supported(g_gpu)) {
        printf("test_gpu_ref: skipped: %s\n", err.msg[0] ? err.msg : why[0] ? why : "no cuBLAS");
        gpu_session_close(g_gpu);
        return 77;
    }
    printf("test_gpu_ref: the GPU worker on %s\n", name);
    KR_RUN_TESTS(NULL, close_session, test_samples);
}
