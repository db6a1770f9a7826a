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

/* How the bits are kept independent of M, of the memory budget and of the
 * BLAS kernel's blocking.
 *
 * OpenBLAS' per-element summation order depends on the shape of the call
 * that computes the element: with OpenBLAS 0.3.21's Zen kernel, splitting one
 * sgemm into row panels (even of a multiple of 16 rows, even single-threaded)
 * or into column chunks changes the last bits of most elements; its Prescott
 * and Haswell kernels change them with the number of rows per call too.  So
 * every fp32 reference is computed as a fixed grid of sgemm calls:
 *   - columns in chunks of gemm_ref_chunk_rows(N, K) rows of W, a function of
 *     the weight's shape alone (about GEMM_REF_CHUNK_BYTES of fp32 each);
 *   - rows in panels of GEMM_REF_PANEL_ROWS (or a context's own panel size)
 *     counted from the first row the caller passes.
 * A caller that computes a case's rows in blocks starting at multiples of the
 * panel size therefore makes exactly the calls, on exactly the operands, that
 * one call over the whole case makes, and gets the same bits by construction,
 * on any core OpenBLAS picks.  The bits still differ between BLAS cores (every
 * result stays within gamma_K of the exact product); results files record the
 * core (blas_info.h).
 *
 * Chunks of about 48 MiB: every chunk's sgemm packs all of A again, so at
 * prefill sizes small chunks cost more than they save.  Measured with
 * OpenBLAS 0.3.21's Cooperlake core on a 2-core AVX-512 EPYC (KVM), the
 * grid's calls alone against one sgemm of 17408 x 5120 (best of two):
 * M = 1024, 601-row (12 MiB) chunks 0.61-0.64 s, 2176-row (48 MiB) 0.53-0.55
 * s, one call 0.49 s; M = 4096, 2.56-2.61 s, 2.15-2.22 s and 1.94 s; M = 1 and
 * 64 no slower with the larger chunk.  (On a 2-core Zen 3 with 32 MiB L3, 12
 * MiB chunks had been measured 5-20% faster at M = 1 and 64, where a chunk
 * stayed in the cache between its dequant and its sgemm.)  The bits of the
 * AVX-512 cores did not change with the chunk at those shapes; those of
 * Haswell and Zen did in 7% of the elements (each grid's result is held to
 * the same gamma_K bound by the tests).
 * Panels of 512 rows: single-threaded sgemm, M = 1024, N = 2048, K = 5120,
 * 614-row chunks, against one call: 64-row panels 1.66x, 256 1.26x, 512 1.12x,
 * 1024 1.08x (each call repacks its chunk of W). */
#define GEMM_REF_CHUNK_BYTES ((int64_t)48 << 20)
#define GEMM_REF_PANEL_ROWS 512

/* Rows of W per sgemm call for an N x K weight: N when N * K fp32 is at most
 * GEMM_REF_CHUNK_BYTES, otherwise N split into equal chunks of about that size
 * (ceil(N / chunks) rows, so no call is a sliver), at least one row.  Depends
 * on nothing else.  Returns 0 for N <= 0 or K <= 0. */
int64_t gemm_ref_chunk_rows(int64_t N, int64_t K);

/* A weight prepared for repeated fp32 references.  Not safe for concurrent
 * use: one thread at a time per context (separate contexts are independent).
 * W's packed and scales arrays are read, never copied: they must stay alive
 * and unchanged for the life of the context. */
typedef struct gemm_ref_ctx gemm_ref_ctx_t;

/* Checks W (as gemm_ref_f32 does) and allocates the buffer: the whole
 * dequantized W when it fits in budget_bytes (<= 0: the default budget),
 * otherwise one chunk (gemm_ref_chunk_rows), even when that is more than the
 * budget.  The budget decides only what is dequantized again; it changes no
 * bit.  Nothing is dequantized yet.  Row panels of GEMM_REF_PANEL_ROWS.
 * Returns 0 with *ctx set, or -1 with err filled and *ctx NULL. */
int gemm_ref_ctx_init(gemm_ref_ctx_t **ctx, const mxfp4_weight_t *W, int64_t budget_bytes,
                      kr_error_t *err);

/* C[M, N] fp32 = A[M, K] fp32 @ dequant(W)^T, for any M, as the grid of
 * calls described above (row panels counted from A's first row).  The first
 * call on a context whose W fits dequantizes it; later calls only multiply.
 * A chunked context dequantizes every chunk on every call, except a chunk its
 * buffer still holds from the previous call, which goes first.  Returns 0, or
 * -1 with err filled (NULL arguments, M out of range). */
int gemm_ref_ctx_f32(gemm_ref_ctx_t *ctx, const float *A, int64_t M, float *C, kr_error_t *err);

/* The context's row panel (default GEMM_REF_PANEL_ROWS; rows <= 0 restores
 * it).  Only a caller that splits its rows into blocks needs it: blocks must
 * start at multiples of it. */
void gemm_ref_ctx_set_panel_rows(gemm_ref_ctx_t *ctx, int64_t rows);
int64_t gemm_ref_ctx_panel_rows(const gemm_ref_ctx_t *ctx);

/* park != 0: before dequantizing a chunk the context parks OpenBLAS' idle
 * workers (blas_threads.h), which otherwise spin on the cores the dequant's
 * threads need.  Only for a caller in whose process no other thread is
 * inside BLAS meanwhile (the replay).  Changes no bit. */
void gemm_ref_ctx_set_park_blas(gemm_ref_ctx_t *ctx, int park);

/* Whether the context keeps the whole dequantized W (filled by its first
 * call) rather than dequantizing chunk by chunk; the bytes of its buffer. */
int gemm_ref_ctx_holds_whole_weight(const gemm_ref_ctx_t *ctx);
int64_t gemm_ref_ctx_buffer_bytes(const gemm_ref_ctx_t *ctx);

/* Frees the context and its buffer; NULL is allowed. */
void gemm_ref_ctx_free(gemm_ref_ctx_t *ctx);

/* One reference without a context to keep: a temporary context with a
 * budget of chunk_n rows (chunk_n <= 0 means GEMM_REF_CHUNK_N).  The same
 * bits as any context on the same rows, whatever chunk_n.  Returns 0, or -1
 * with err filled (allocation failure, bad dimensions).  To compute several
 * references on one weight use a context instead, which dequantizes it once. */
int gemm_ref_f32(const float *A, int64_t M, const mxfp4_weight_t *W, int64_t chunk_n,
                 float *C, kr_error_t *err);

/* Same product in fp64: A widened from fp32, W dequantized exactly in double. */
int gemm_ref_f64(const float *A, int64_t M, const mxfp4_weight_t *W, int64_t chunk_n,
                 double *C, kr_error_t *err);

/* Plain dense fp32 GEMM C = A[M,K] @ B[N,K]^T through sgemm (bf16 kernels'
 * reference, where B is not MXFP4), in the same grid of calls: column chunks
 * of gemm_ref_chunk_rows(N, K), row panels of panel_rows (<= 0:
 * GEMM_REF_PANEL_ROWS) counted from A's first row. */
void gemm_dense_f32(const float *A, const float *B, int64_t M, int64_t N, int64_t K, float *C);
void gemm_dense_f32_panels(const float *A, const float *B, int64_t M, int64_t N, int64_t K,
                           int64_t panel_rows, float *C);

#endif
