/* CPU reference GEMMs: C[M, N] = A[M, K] @ W[N, K]^T with W an MXFP4 weight.
 *
 * The fp32 reference dequantizes W in chunks of rows (as the dispatch's
 * _exact_ref chunks over N) so memory stays bounded, and multiplies with
 * OpenBLAS sgemm.  The fp64 oracle does the same with dgemm on the same
 * operands, widened to double: it is used to bound the fp32 reference's own
 * error, never as the reference. */
#ifndef KR_GEMM_REF_H
#define KR_GEMM_REF_H

#include <stdint.h>

#include "formats.h"
#include "kr_error.h"
#include "mxfp4_weight.h"

typedef struct {
    const uint8_t *packed;      /* [N, K/2], checkpoint order */
    const uint8_t *scales;      /* e8m0 */
    scale_layout_t layout;
    e8m0_mode_t e8m0_mode;
    int64_t N, K;
} mxfp4_weight_t;

/* Default rows of W dequantized at a time (the dispatch uses 2048). */
#define GEMM_REF_CHUNK_N 2048

/* C[M, N] fp32 = A[M, K] fp32 @ dequant(W)^T; chunk_n <= 0 means the default.
 * Returns 0, or -1 with err filled (allocation failure, bad dimensions).
 * The bits can depend on chunk_n (and on the CPU OpenBLAS picks kernels for):
 * OpenBLAS 0.3.21 on SkylakeX-class cores sends calls with M*n <= 1200 and
 * M*n*K <= 1e6 to a "small matrix" kernel with another summation order.
 * Every result stays within gamma_K of the exact product; for bit-stable
 * references keep chunk_n fixed. */
int gemm_ref_f32(const float *A, int64_t M, const mxfp4_weight_t *W, int64_t chunk_n,
                 float *C, kr_error_t *err);

/* Same product in fp64: A widened from fp32, W dequantized exactly in double. */
int gemm_ref_f64(const float *A, int64_t M, const mxfp4_weight_t *W, int64_t chunk_n,
                 double *C, kr_error_t *err);

/* Plain dense fp32 GEMM C = A[M,K] @ B[N,K]^T through sgemm (bf16 kernels'
 * reference, where B is not MXFP4). */
void gemm_dense_f32(const float *A, const float *B, int64_t M, int64_t N, int64_t K, float *C);

#endif
