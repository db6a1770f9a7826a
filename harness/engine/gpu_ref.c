/* GPU references in a child process (see gpu_ref.h). */
#include "gpu_ref.h"

#include <stdlib.h>
#include <string.h>

#include "isolate.h"
#include "kr_gpu.h"
#include "mxfp4_dequant.h"

typedef struct {
    const float *A;
    int64_t M, N, K;
    const mxfp4_weight_t *W; /* NULL: B is dense */
    const float *B;
    int f64;
} gpu_ref_job_t;

int gpu_ref_built(void)
{
    return strcmp(kr_gpu_backend(), "cuda") == 0;
}

static int gpu_fail(int status, const char *what, kr_error_t *err)
{
    const char *detail = kr_gpu_last_error();
    return kr_fail(err, "GPU reference: %s: %s%s%s", what, kr_gpu_status_name(status),
                   detail && *detail ? ": " : "", detail ? detail : "");
}

/* Runs in the child: everything here, the dequant included, is freed with
 * the child's memory. */
static int gpu_ref_child(void *ctx, void *out, size_t out_bytes, kr_error_t *err)
{
    (void)out_bytes;
    const gpu_ref_job_t *j = ctx;
    int count = 0;
    int st = kr_gpu_device_count(&count);
    if (st != KR_GPU_OK || count == 0)
        return kr_fail(err, "GPU reference: no %s device%s%s",
                       strcmp(kr_gpu_backend(), "hip") == 0 ? "ROCm" : "CUDA",
                       *kr_gpu_last_error() ? ": " : "", kr_gpu_last_error());
    const float *B = j->B;
    float *owned = NULL;
    if (j->W) {
        owned = malloc((size_t)j->N * (size_t)j->K * sizeof *owned);
        if (!owned)
            return kr_fail(err, "GPU reference: out of memory for the dequantized weight");
        mxfp4_dequant_rows_parallel(MXFP4_DEQUANT_AUTO, j->W->packed, j->W->scales, j->W->layout,
                                    j->N, j->K, 0, j->N, j->W->e8m0_mode, 0, owned);
        B = owned;
    }
    if (!j->f64) {
        st = kr_gpu_gemm_f32_nt(j->A, B, j->M, j->N, j->K, out);
        free(owned);
        return st == KR_GPU_OK ? 0 : gpu_fail(st, "SGEMM", err);
    }
    /* fp64: both operands widened exactly */
    double *Ad = malloc((size_t)j->M * (size_t)j->K * sizeof *Ad);
    double *Bd = malloc((size_t)j->N * (size_t)j->K * sizeof *Bd);
    if (!Ad || !Bd) {
        free(Ad);
        free(Bd);
        free(owned);
        return kr_fail(err, "GPU reference: out of memory for the fp64 operands");
    }
    for (int64_t i = 0; i < j->M * j->K; i++)
        Ad[i] = (double)j->A[i];
    for (int64_t i = 0; i < j->N * j->K; i++)
        Bd[i] = (double)B[i];
    free(owned);
    st = kr_gpu_gemm_f64_nt(Ad, Bd, j->M, j->N, j->K, out);
    free(Ad);
    free(Bd);
    return st == KR_GPU_OK ? 0 : gpu_fail(st, "DGEMM", err);
}

static int run_job(const gpu_ref_job_t *j, void *C, size_t elem, double timeout_s,
                   kr_error_t *err)
{
    if (!gpu_ref_built())
        return kr_fail(err, "GPU reference: this build has no CUDA backend (GPU backend: %s)",
                       kr_gpu_backend());
    isolate_result_t res;
    const size_t bytes = (size_t)j->M * (size_t)j->N * elem;
    if (isolate_run(gpu_ref_child, (void *)j, C, bytes, timeout_s, &res, err) != 0)
        return -1;
    if (res.status != ISOLATE_OK)
        return kr_fail(err, "%s%s", res.status == ISOLATE_FAILED ? "" : "GPU reference: ",
                       res.message);
    return 0;
}

int gpu_ref_mxfp4_f32(const float *A, int64_t M, const mxfp4_weight_t *W, float *C,
                      double timeout_s, kr_error_t *err)
{
    const gpu_ref_job_t j = {.A = A, .M = M, .N = W->N, .K = W->K, .W = W};
    return run_job(&j, C, sizeof(float), timeout_s, err);
}

int gpu_ref_mxfp4_f64(const float *A, int64_t M, const mxfp4_weight_t *W, double *C,
                      double timeout_s, kr_error_t *err)
{
    const gpu_ref_job_t j = {.A = A, .M = M, .N = W->N, .K = W->K, .W = W, .f64 = 1};
    return run_job(&j, C, sizeof(double), timeout_s, err);
}

int gpu_ref_dense_f32(const float *A, int64_t M, const float *B, int64_t N, int64_t K, float *C,
                      double timeout_s, kr_error_t *err)
{
    const gpu_ref_job_t j = {.A = A, .M = M, .N = N, .K = K, .B = B};
    return run_job(&j, C, sizeof(float), timeout_s, err);
}
