/* CPU reference GEMMs (see gemm_ref.h).
 *
 * Both references hand OpenBLAS dense chunks of the dequantized W, each call
 * writing the chunk's columns of C in place (ldc = N), so C is never staged.
 * The fp32 reference keeps its dequant buffer in a context, so repeated
 * references on one weight neither allocate nor (when W fits) dequantize
 * again; the fp64 oracle allocates per call, as it runs once per case.
 *
 * The fp64 oracle deliberately does NOT reuse the fp32 dequant: it decodes
 * e2m1 and e8m0 itself, in double, so that a bug in the fp32 dequant shows up
 * as a disagreement between the two references instead of being shared by
 * both. */
#include "gemm_ref.h"

#include <cblas.h>
#include <limits.h>
#include <stdlib.h>

#include "blas_threads.h"
#include "mxfp4_dequant.h"
#include "kr_alloc.h"

/* OpenBLAS' blasint is int in the (non-ILP64) build we link, so every
 * dimension and leading dimension handed to it must fit in an int. */
static int check_weight(const mxfp4_weight_t *W, const char *who, kr_error_t *err)
{
    if (!W)
        return kr_fail(err, "%s: NULL weight", who);
    if (!W->packed || !W->scales)
        return kr_fail(err, "%s: weight has NULL packed or scales", who);
    if (W->N <= 0 || W->K <= 0)
        return kr_fail(err, "%s: dimensions must be positive (N=%lld K=%lld)", who,
                       (long long)W->N, (long long)W->K);
    if (W->K % 32 != 0)
        return kr_fail(err, "%s: K=%lld is not a multiple of the MX block size 32", who,
                       (long long)W->K);
    if (W->N > INT_MAX || W->K > INT_MAX)
        return kr_fail(err, "%s: dimensions exceed the BLAS int range (N=%lld K=%lld)", who,
                       (long long)W->N, (long long)W->K);
    if (W->layout != SCALE_LAYOUT_NK && W->layout != SCALE_LAYOUT_KN)
        return kr_fail(err, "%s: unknown scale layout %d", who, (int)W->layout);
    if (W->e8m0_mode != E8M0_SPEC && W->e8m0_mode != E8M0_ZERO_IS_ZERO)
        return kr_fail(err, "%s: unknown e8m0 mode %d", who, (int)W->e8m0_mode);
    return 0;
}

static int check_dims(const float *A, int64_t M, const mxfp4_weight_t *W, const void *C,
                      const char *who, kr_error_t *err)
{
    if (!A || !W || !C)
        return kr_fail(err, "%s: NULL argument (A=%p W=%p C=%p)", who, (const void *)A,
                       (const void *)W, C);
    if (M <= 0)
        return kr_fail(err, "%s: dimensions must be positive (M=%lld N=%lld K=%lld)", who,
                       (long long)M, (long long)W->N, (long long)W->K);
    if (M > INT_MAX)
        return kr_fail(err, "%s: dimensions exceed the BLAS int range (M=%lld N=%lld K=%lld)",
                       who, (long long)M, (long long)W->N, (long long)W->K);
    return check_weight(W, who, err);
}

static int64_t effective_chunk(int64_t chunk_n, int64_t N)
{
    if (chunk_n <= 0)
        chunk_n = GEMM_REF_CHUNK_N;
    return chunk_n < N ? chunk_n : N;
}

/* Rows of the budget (<= 0: the default), at least one; compared in rows,
 * never as N * K * 4, which can overflow. */
static int64_t budget_rows(int64_t K, int64_t budget_bytes)
{
    const int64_t rows =
        budget_bytes > 0 ? budget_bytes / (K * (int64_t)sizeof(float)) : GEMM_REF_CHUNK_N;
    return rows < 1 ? 1 : rows;
}

int64_t gemm_ref_chunk_rows(int64_t N, int64_t K)
{
    if (N <= 0 || K <= 0)
        return 0;
    int64_t target = GEMM_REF_CHUNK_BYTES / K / (int64_t)sizeof(float);
    if (target < 1)
        target = 1;
    if (target >= N)
        return N;
    const int64_t chunks = (N + target - 1) / target;
    return (N + chunks - 1) / chunks;
}

/* The grid of calls: for each chunk of columns [n0, n1) that B_chunk holds
 * (rows n0.. of the dense [N, K] operand, leading dimension K), every row
 * panel of A in turn.  The panels are counted from A's first row. */
static void sgemm_panels(const float *A, int64_t M, const float *B_chunk, int64_t n0,
                         int64_t n1, int64_t N, int64_t K, int64_t panel, float *C)
{
    for (int64_t m0 = 0; m0 < M; m0 += panel) {
        const int64_t rows = m0 + panel < M ? panel : M - m0;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, (int)(n1 - n0), (int)K,
                    1.0f, A + m0 * K, (int)K, B_chunk, (int)K, 0.0f, C + m0 * N + n0, (int)N);
    }
}

struct gemm_ref_ctx {
    mxfp4_weight_t W;        /* the caller's arrays, not copied */
    int64_t chunk_rows;      /* gemm_ref_chunk_rows(N, K) */
    int64_t panel_rows;
    int64_t buffer_rows;     /* N when the whole W is held, else chunk_rows */
    float *buffer;           /* [buffer_rows, K] */
    int whole_filled;        /* the whole W is held and dequantized */
    int64_t held_n0, held_n1; /* chunk the buffer holds from an earlier call (n0 == n1: none) */
    int park_blas;           /* park OpenBLAS' workers before each chunk's dequant */
};

int gemm_ref_ctx_init(gemm_ref_ctx_t **ctx, const mxfp4_weight_t *W, int64_t budget_bytes,
                      kr_error_t *err)
{
    if (!ctx)
        return kr_fail(err, "gemm_ref_ctx_init: NULL context pointer");
    *ctx = NULL;
    if (check_weight(W, "gemm_ref_ctx_init", err))
        return -1;
    gemm_ref_ctx_t *c = calloc(1, sizeof *c);
    if (!c)
        return kr_fail(err, "gemm_ref_ctx_init: out of memory");
    c->W = *W;
    c->chunk_rows = gemm_ref_chunk_rows(W->N, W->K);
    c->panel_rows = GEMM_REF_PANEL_ROWS;
    c->buffer_rows = budget_rows(W->K, budget_bytes) >= W->N ? W->N : c->chunk_rows;
    c->buffer = kr_alloc_large((size_t)c->buffer_rows * (size_t)W->K * sizeof *c->buffer);
    if (!c->buffer) {
        const long long rows = (long long)c->buffer_rows;
        free(c);
        return kr_fail(err,
                       "gemm_ref_ctx_init: cannot allocate the dequant buffer (%lld x %lld fp32)",
                       rows, (long long)W->K);
    }
    *ctx = c;
    return 0;
}

static void dequant_into(const gemm_ref_ctx_t *c, int64_t n0, int64_t n1, float *out)
{
    const mxfp4_weight_t *W = &c->W;
    mxfp4_dequant_rows_parallel(MXFP4_DEQUANT_AUTO, W->packed, W->scales, W->layout, W->N, W->K,
                                n0, n1, W->e8m0_mode, 0, out);
}

/* C[:, n0:n1) = A @ rows [n0, n1) of W, dequantizing them into the chunk
 * buffer unless it holds them already. */
static void ctx_chunk(gemm_ref_ctx_t *c, int64_t n0, int64_t n1, const float *A, int64_t M,
                      float *C)
{
    if (c->held_n0 != n0 || c->held_n1 != n1) {
        c->held_n0 = c->held_n1 = 0; /* a half-written buffer holds nothing */
        if (c->park_blas)
            blas_threads_park(); /* the dequant's threads need the cores */
        dequant_into(c, n0, n1, c->buffer);
        c->held_n0 = n0;
        c->held_n1 = n1;
    }
    sgemm_panels(A, M, c->buffer, n0, n1, c->W.N, c->W.K, c->panel_rows, C);
}

int gemm_ref_ctx_f32(gemm_ref_ctx_t *ctx, const float *A, int64_t M, float *C, kr_error_t *err)
{
    if (!ctx)
        return kr_fail(err, "gemm_ref_ctx_f32: NULL context");
    if (check_dims(A, M, &ctx->W, C, "gemm_ref_ctx_f32", err))
        return -1;
    const int64_t N = ctx->W.N, K = ctx->W.K, rows = ctx->chunk_rows;
    if (ctx->buffer_rows == N) {
        if (!ctx->whole_filled) {
            dequant_into(ctx, 0, N, ctx->buffer);
            ctx->whole_filled = 1;
        }
        for (int64_t n0 = 0; n0 < N; n0 += rows) {
            const int64_t n1 = n0 + rows < N ? n0 + rows : N;
            sgemm_panels(A, M, ctx->buffer + n0 * K, n0, n1, N, K, ctx->panel_rows, C);
        }
        return 0;
    }
    /* A chunk still in the buffer goes first: it need not be dequantized. */
    int64_t kept = -1;
    for (int64_t n0 = 0; n0 < N; n0 += rows)
        if (ctx->held_n0 == n0 && ctx->held_n1 == (n0 + rows < N ? n0 + rows : N))
            kept = n0;
    if (kept >= 0)
        ctx_chunk(ctx, kept, ctx->held_n1, A, M, C);
    for (int64_t n0 = 0; n0 < N; n0 += rows)
        if (n0 != kept)
            ctx_chunk(ctx, n0, n0 + rows < N ? n0 + rows : N, A, M, C);
    return 0;
}

void gemm_ref_ctx_set_panel_rows(gemm_ref_ctx_t *ctx, int64_t rows)
{
    if (ctx)
        ctx->panel_rows = rows > 0 ? rows : GEMM_REF_PANEL_ROWS;
}

void gemm_ref_ctx_set_park_blas(gemm_ref_ctx_t *ctx, int park)
{
    if (ctx)
        ctx->park_blas = park != 0;
}

int64_t gemm_ref_ctx_panel_rows(const gemm_ref_ctx_t *ctx)
{
    return ctx ? ctx->panel_rows : 0;
}

int gemm_ref_ctx_holds_whole_weight(const gemm_ref_ctx_t *ctx)
{
    return ctx && ctx->buffer_rows == ctx->W.N;
}

int64_t gemm_ref_ctx_buffer_bytes(const gemm_ref_ctx_t *ctx)
{
    return ctx ? ctx->buffer_rows * ctx->W.K * (int64_t)sizeof(float) : 0;
}

void gemm_ref_ctx_free(gemm_ref_ctx_t *ctx)
{
    if (!ctx)
        return;
    free(ctx->buffer);
    free(ctx);
}

int gemm_ref_f32(const float *A, int64_t M, const mxfp4_weight_t *W, int64_t chunk_n,
                 float *C, kr_error_t *err)
{
    if (check_dims(A, M, W, C, "gemm_ref_f32", err))
        return -1;
    gemm_ref_ctx_t *ctx;
    const int64_t budget = effective_chunk(chunk_n, W->N) * W->K * (int64_t)sizeof(float);
    if (gemm_ref_ctx_init(&ctx, W, budget, err))
        return -1;
    const int rc = gemm_ref_ctx_f32(ctx, A, M, C, err);
    gemm_ref_ctx_free(ctx);
    return rc;
}

/* Rows [n0, n1) of W into out[(n1-n0), K] as doubles.  e2m1 x 2^e is exact
 * in double (3 significant bits, exponent well inside the range), and so is
 * widening the fp32 decodes: every e2m1 value and every 2^(b-127) is an fp32
 * value, and byte 0xFF's quiet NaN widens to the quiet NaN 0x7FF8... */
static void dequant_rows_f64(const mxfp4_weight_t *W, int64_t n0, int64_t n1, double *out)
{
    const int64_t N = W->N, K = W->K, nb = K / 32;
    for (int64_t n = n0; n < n1; n++) {
        const uint8_t *row = W->packed + n * (K / 2);
        double *o = out + (n - n0) * K;
        for (int64_t b = 0; b < nb; b++) {
            const double s = (double)e8m0_decode(
                mxfp4_scale_at(W->scales, W->layout, N, K, n, b), W->e8m0_mode);
            for (int64_t j = 0; j < 16; j++) {
                const uint8_t byte = row[b * 16 + j];
                o[b * 32 + 2 * j] = (double)e2m1_decode(byte & 0x0F) * s;
                o[b * 32 + 2 * j + 1] = (double)e2m1_decode(byte >> 4) * s;
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

void gemm_dense_f32_panels(const float *A, const float *B, int64_t M, int64_t N, int64_t K,
                           int64_t panel_rows, float *C)
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
    const int64_t rows = gemm_ref_chunk_rows(N, K);
    const int64_t panel = panel_rows > 0 ? panel_rows : GEMM_REF_PANEL_ROWS;
    for (int64_t n0 = 0; n0 < N; n0 += rows) {
        const int64_t n1 = n0 + rows < N ? n0 + rows : N;
        sgemm_panels(A, M, B + n0 * K, n0, n1, N, K, panel, C);
    }
}

void gemm_dense_f32(const float *A, const float *B, int64_t M, int64_t N, int64_t K, float *C)
{
    gemm_dense_f32_panels(A, B, M, N, K, 0, C);
}
