/* CPU reference GEMMs: C[M, N] = A[M, K] @ W[N, K]^T with W an MXFP4 weight.
 *
 * The fp32 reference dequantizes W (mxfp4_dequant.h: vector kernels, split
 * over threads) and multiplies with OpenBLAS sgemm.  A context
 * (gemm_ref_ctx_t) holds the dequantized weight between calls: when the
 * whole of W fits in its memory budget it is dequantized once and every call
 * is a single sgemm; otherwise it dequantizes W a chunk of rows at a time (as
 * the dispatch's _exact_ref chunks over N) into one buffer it keeps.  The
 * fp64 oracle does the same with dgemm on the same operands, widened to
 * double: it is used to bound the fp32 reference's own error, never as the
 * reference. */
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

/* The default memory budget of a context, in rows of W: GEMM_REF_CHUNK_N * K
 * fp32 (the dispatch's _exact_ref dequantizes 2048 rows at a time). */
#define GEMM_REF_CHUNK_N 2048

/* When W does not fit the budget, the chunk size aims at the larger of:
 *  - GEMM_REF_CHUNK_BYTES of fp32: small enough that a chunk stays in the
 *    last-level cache between its dequant and its sgemm, so neither goes
 *    through DRAM, which is what a small M pays for (the dequant writes as
 *    many bytes as the sgemm reads);
 *  - GEMM_REF_CHUNK_ROWS_PER_M * M rows: every sgemm call packs A again, and
 *    at large M that costs more than the cache saves.
 * Measured (best of several runs, 2 shared cores of an EPYC with 32 MiB of
 * L3), K = 5120 and 8704, against 2048-row chunks: at M = 1 and 64, 10-13 MiB
 * chunks take 5-20% off the reference (5 MiB ones lose from the call count);
 * at M = 512, 342-row chunks cost 11% more than one sgemm and 1024-2048-row
 * ones 4-6%. */
#define GEMM_REF_CHUNK_BYTES ((int64_t)12 << 20)
#define GEMM_REF_CHUNK_ROWS_PER_M 4

/* How the bits depend on the chunking.  Each chunk of rows [n0, n1) of W is
 * one sgemm writing columns n0..n1-1 of C, and OpenBLAS' per-element
 * summation order can depend on that call's shape: OpenBLAS 0.3.21 on
 * SkylakeX-class cores sends calls with M*n <= 1200 and M*n*K <= 1e6 to a
 * "small matrix" kernel with another order than its blocked kernel (whose
 * order does not depend on n or on the thread split).  So results can differ
 * in the last bits between chunkings (and between CPUs OpenBLAS picks other
 * kernels for), while every result stays within gamma_K of the exact
 * product.  The chunking is a pure function of (M, N, K, budget) --
 * gemm_ref_chunk_rows -- so the bits are reproducible for a given (M, N, K,
 * budget) on a given machine, whatever was computed before on the same
 * context: whether a chunk was dequantized in this call or kept from an
 * earlier one, and the order the chunks are computed in, change no bit.
 * Chunks near GEMM_REF_CHUNK_BYTES hold millions of elements, far outside
 * that small-matrix kernel's range (only a budget below that can make chunks
 * small enough to enter it). */

/* Rows per chunk for an M-row product with an N x K weight under budget_bytes
 * of fp32 dequantized weight (<= 0: the default, GEMM_REF_CHUNK_N rows):
 *   - N, when the whole dequantized W fits, whatever M: it is dequantized
 *     once, and every call is one sgemm;
 *   - otherwise the larger of GEMM_REF_CHUNK_BYTES and
 *     GEMM_REF_CHUNK_ROWS_PER_M * M rows, or the budget when that is less,
 *     rounded to equal chunks of ceil(N / chunks) rows so no call is a sliver
 *     that falls into OpenBLAS' small-matrix kernel;
 *   - at least one row, even when one row is over the budget.
 * Returns 0 for N <= 0 or K <= 0. */
int64_t gemm_ref_chunk_rows(int64_t M, int64_t N, int64_t K, int64_t budget_bytes);

/* A weight prepared for repeated fp32 references.  Not safe for concurrent
 * use: one thread at a time per context (separate contexts are independent).
 * W's packed and scales arrays are read, never copied: they must stay alive
 * and unchanged for the life of the context. */
typedef struct gemm_ref_ctx gemm_ref_ctx_t;

/* Checks W (as gemm_ref_f32 does) and allocates the buffer: the whole
 * dequantized W when it fits in budget_bytes (<= 0: the default budget),
 * otherwise the budget's worth of rows (pages are only touched as far as a
 * call's chunks reach).  Nothing is dequantized yet.  Returns 0 with *ctx
 * set, or -1 with err filled and *ctx NULL. */
int gemm_ref_ctx_init(gemm_ref_ctx_t **ctx, const mxfp4_weight_t *W, int64_t budget_bytes,
                      kr_error_t *err);

/* C[M, N] fp32 = A[M, K] fp32 @ dequant(W)^T, for any M.  The first call on a
 * context whose W fits dequantizes it; later calls are one sgemm.  A chunked
 * context dequantizes every chunk on every call, except a chunk its buffer
 * still holds from the previous call, which goes first.  Returns 0, or -1
 * with err filled (NULL arguments, M out of range). */
int gemm_ref_ctx_f32(gemm_ref_ctx_t *ctx, const float *A, int64_t M, float *C, kr_error_t *err);

/* Whether the context keeps the whole dequantized W (filled by its first
 * call) rather than working in chunks; the rows per chunk it uses for an
 * M-row product (N when it keeps W); the bytes of its dequant buffer. */
int gemm_ref_ctx_holds_whole_weight(const gemm_ref_ctx_t *ctx);
int64_t gemm_ref_ctx_chunk_rows(const gemm_ref_ctx_t *ctx, int64_t M);
int64_t gemm_ref_ctx_buffer_bytes(const gemm_ref_ctx_t *ctx);

/* Frees the context and its buffer; NULL is allowed. */
void gemm_ref_ctx_free(gemm_ref_ctx_t *ctx);

/* One reference without a context to keep: a temporary context with a
 * budget of chunk_n rows (chunk_n <= 0 means GEMM_REF_CHUNK_N), so W is
 * dequantized all at once when N <= chunk_n, and otherwise in equal chunks of
 * at most chunk_n rows (gemm_ref_chunk_rows): the same chunking, and so the
 * same bits, as a context with that budget.  Returns 0, or -1
 * with err filled (allocation failure, bad dimensions).  For bit-stable
 * references keep chunk_n fixed; to compute several references on one weight
 * use a context instead, which dequantizes it once. */
int gemm_ref_f32(const float *A, int64_t M, const mxfp4_weight_t *W, int64_t chunk_n,
                 float *C, kr_error_t *err);

/* Same product in fp64: A widened from fp32, W dequantized exactly in double. */
int gemm_ref_f64(const float *A, int64_t M, const mxfp4_weight_t *W, int64_t chunk_n,
                 double *C, kr_error_t *err);

/* Plain dense fp32 GEMM C = A[M,K] @ B[N,K]^T through sgemm (bf16 kernels'
 * reference, where B is not MXFP4). */
void gemm_dense_f32(const float *A, const float *B, int64_t M, int64_t N, int64_t K, float *C);

#endif
