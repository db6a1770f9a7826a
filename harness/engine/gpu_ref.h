/* The fp32 references and the fp64 oracle on the GPU, for `--device gpu`.
 *
 * cuBLAS SGEMM in pedantic math mode (no TF32) and DGEMM, each in a child
 * process (harness/common/isolate.h): the parent never initialises the GPU runtime,
 * so the kernels' own isolated launches keep working, and a GPU fault is an
 * error line instead of a dead run.  The weight is dequantized on the host
 * (the same dequant as the CPU reference; exact in fp32, widened exactly for
 * DGEMM) and multiplied as a dense [N, K] operand.  The results differ from
 * the CPU reference's in the last bits (another summation order), within the
 * same fp32 bound (gamma_K of the exact product). */
#ifndef KR_GPU_REF_H
#define KR_GPU_REF_H

#include <stdint.h>

#include "gemm_ref.h"
#include "kr_error.h"

/* Whether this build can compute references on the GPU (a CUDA build).  Asks
 * nothing of the runtime. */
int gpu_ref_built(void);

/* C[M, N] = A[M, K] @ dequant(W)^T in fp32 / fp64; B dense [N, K] for the
 * dense one.  Returns 0, or -1 with err naming what failed (no device, the
 * runtime's error, a crash or a timeout of the child). */
int gpu_ref_mxfp4_f32(const float *A, int64_t M, const mxfp4_weight_t *W, float *C,
                      double timeout_s, kr_error_t *err);
int gpu_ref_mxfp4_f64(const float *A, int64_t M, const mxfp4_weight_t *W, double *C,
                      double timeout_s, kr_error_t *err);
int gpu_ref_dense_f32(const float *A, int64_t M, const float *B, int64_t N, int64_t K, float *C,
                      double timeout_s, kr_error_t *err);

#endif
