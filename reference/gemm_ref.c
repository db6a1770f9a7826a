/* CPU reference GEMMs (see gemm_ref.h).
 *
 * Both references dequantize W a chunk of rows at a time into a dense buffer
 * and hand that chunk to OpenBLAS, writing the chunk's columns of C in place
 * (ldc = N).  Memory is therefore bounded by one chunk of W plus, for fp64,
 * one widened copy of A; C is written directly and never staged.
 *
 * The fp64 oracle deliberately does NOT reuse mxfp4_dequant_rows: it decodes
 * e2m1 and e8m0 itself, in double, so that a bug in the fp32 dequant shows up
 * as a disagreement between the two references instead of being shared by
 * both. */
#include "gemm_ref.h"

#include <cblas.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>

/* OpenBLAS' blasint is int in the (non-ILP64) build we link, so every
 * dimension and leading dimension handed to it must fit in an int. */
static int check_dims(const float *A, int64_t M, const mxfp4_weight_t *W, const void *C,
                      const char *who, kr_error_t *err)
{
    if (!A || !W || !C)
        return kr_fail(err, "%s: NULL argument (A=%p W=%p C=%p)", who, (const void *)A,
                       (const void *)W, C);
    if (!W->packed || !W->scales)
        return kr_fail(err, "%s: weight has NULL packed or scales", who);
    if (M <= 0 || W->N <= 0 || W->K <= 0)
        return kr_fail(err, "%s: dimensions must be positive (M=%lld N=%lld K=%lld)", who,
                       (long long)M, (long long)W->N, (long long)W->K);
    if (W->K % 32 != 0)
        return kr_fail(err, "%s: K=%lld is not a multiple of the MX block size 32", who,
                       (long long)W->K);
    if (M > INT_MAX || W->N > INT_MAX || W->K > INT_MAX)
        return kr_fail(err, "%s: dimensions exceed the BLAS int range (M=%lld N=%lld K=%lld)",
                       who, (long long)M, (long long)W->N, (long long)W->K);
    if (W->layout != SCALE_LAYOUT_NK && W->layout != SCALE_LAYOUT_KN)
        return kr_fail(err, "%s: unknown scale layout %d", who, (int)W->layout);
    if (W->e8m0_mode != E8M0_SPEC && W->e8m0_mode != E8M0_ZERO_IS_ZERO)
        return kr_fail(err, "%s: unknown e8m0 mode %d", who, (int)W->e8m0_mode);
    return 0;
}

static int64_t effective_chunk(int64_t chunk_n, int64_t N)
{
    if (chunk_n <= 0)
        chunk_n = GEMM_REF_CHUNK_N;
    return chunk_n < N ? chunk_n : N;
}

int gemm_ref_f32(const float *A, int64_t M, const mxfp4_weight_t *W, int64_t chunk_n,
                 float *C, kr_error_t *err)
{
    if (check_dims(A, M, W, C, "gemm_ref_f32", err))
        return -1;
    const int64_t N = W->N, K = W->K;
    const int64_t chunk = effective_chunk(chunk_n, N);

    float *Wc = malloc((size_t)chunk * (size_t)K * sizeof *Wc);
    if (!Wc)
        return kr_fail(err, "gemm_ref_f32: cannot allocate the dequant chunk (%lld x %lld fp32)",
                       (long long)chunk, (long long)K);

    for (int64_t n0 = 0; n0 < N; n0 += chunk) {
        const int64_t n1 = n0 + chunk < N ? n0 + chunk : N;
        mxfp4_dequant_rows(W->packed, W->scales, W->layout, N, K, n0, n1, W->e8m0_mode, Wc);
        /* C[:, n0:n1] = A @ Wc^T; Wc is [n1-n0, K] row-major, i.e. a
         * transposed column operand with ldb = K. */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)M, (int)(n1 - n0), (int)K,
                    1.0f, A, (int)K, Wc, (int)K, 0.0f, C + n0, (int)N);
    }
    free(Wc);
    return 0;
}

/* e2m1 magnitudes for codes 0..7; bit 3 is the sign. */
static const double E2M1_F64[16] = {
    0.0,  0.5,  1.0,  1.5,  2.0,  3.0,  4.0,  6.0,
    -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0,
};

/* e8m0 in double, exact: every 2^(b-127) for b in 0..254 is a normal double. */
static double e8m0_f64(uint8_t b, e8m0_mode_t mode)
{
    if (b == 0xFF)
        return NAN;
    if (b == 0 && mode == E8M0_ZERO_IS_ZERO)
        return 0.0;
    return ldexp(1.0, (int)b - 127);
}

/* Rows [n0, n1) of W into out[(n1-n0), K] as doubles.  e2m1 x 2^e is exact
 * in double (3 significant bits, exponent well inside the range). */
static void dequant_rows_f64(const mxfp4_weight_t *W, int64_t n0, int64_t n1, double *out)
{
    const int64_t N = W->N, K = W->K, nb = K / 32;
    for (int64_t n = n0; n < n1; n++) {
        const uint8_t *row = W->packed + n * (K / 2);
        double *o = out + (n - n0) * K;
        for (int64_t b = 0; b < nb; b++) {
            const double s = e8m0_f64(mxfp4_scale_at(W->scales, W->layout, N, K, n, b),
                                      W->e8m0_mode);
            for (int64_t j = 0; j < 16; j++) {
                const uint8_t byte = row[b * 16 + j];
                o[b * 32 + 2 * j] = E2M1_F64[byte & 0x0F] * s;
                o[b * 32 + 2 * j + 1] = E2M1_F64[byte >> 4] * s;
            }
        }
    }
}

int gemm_ref_f64(const float *A, int64_t M, const mxfp4_weight_t *W, int64_t chunk_n,
                 double *C, kr_error_t *err)
{
    if (check_dims(A, M, W, C, "gemm_ref_f64", err))
        return -1;
    const int64_t N = W->N, K = W->K;
    const int64_t chunk = effective_chunk(chunk_n, N);

    double *Ad = malloc((size_t)M * (size_t)K * sizeof *Ad);
    double *Wc = malloc((size_t)chunk * (size_t)K * sizeof *Wc);
    if (!Ad || !Wc) {
        free(Ad);
        free(Wc);
        return kr_fail(err,
                       "gemm_ref_f64: cannot allocate A in fp64 (%lld x %lld) and a dequant "
                       "chunk (%lld x %lld)",
                       (long long)M, (long long)K, (long long)chunk, (long long)K);
    }
    for (int64_t i = 0; i < M * K; i++)
        Ad[i] = (double)A[i]; /* exact widening */

    for (int64_t n0 = 0; n0 < N; n0 += chunk) {
        const int64_t n1 = n0 + chunk < N ? n0 + chunk : N;
        dequant_rows_f64(W, n0, n1, Wc);
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)M, (int)(n1 - n0), (int)K,
                    1.0, Ad, (int)K, Wc, (int)K, 0.0, C + n0, (int)N);
    }
    free(Wc);
    free(Ad);
    return 0;
}

void gemm_dense_f32(const float *A, const float *B, int64_t M, int64_t N, int64_t K, float *C)
{
    /* No error channel in this signature: nothing to compute for an empty
     * output, and an empty inner dimension is the zero matrix (BLAS would
     * reject lda = K = 0). */
    if (M <= 0 || N <= 0)
        return;
    if (K <= 0) {
        for (int64_t i = 0; i < M * N; i++)
            C[i] = 0.0f;
        return;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)M, (int)N, (int)K, 1.0f, A,
                (int)K, B, (int)K, 0.0f, C, (int)N);
}
