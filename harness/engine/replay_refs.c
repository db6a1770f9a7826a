/* The replay's references for one case: R_exact on a kernel's operands
 * (with its cache across kernels), R_source and R_sanitized on x, the fp64
 * oracle's error of an fp32 reference, on the CPU or on the run's GPU
 * worker.  The lowest part of the replay: it computes and frees buffers and
 * writes no row, so the row and kernel parts call it and it calls none of
 * them (replay_ctx.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "blas_threads.h"
#include "formats.h"
#include "gemm_ref.h"
#include "gpu_session.h"
#include "kr_alloc.h"
#include "replay_ctx.h"
#include "verdict.h"

int replay_gpu_refs_here(const replay_ctx_t *rc)
{
    return rc->opt->device_gpu && rc->opt->gpu && gpu_session_refs_supported(rc->opt->gpu);
}

/* rel_fro of an fp32 reference against the fp64 oracle on the same operands. */
double replay_reference_error_vs_f64(replay_ctx_t *rc, const float *A, const float *ref_f32,
                                     kr_error_t *err)
{
    const int64_t M = rc->c->M, N = rc->c->N;
    double *ref64 = kr_alloc_array((size_t)M * (size_t)N * sizeof(double));
    if (!ref64) {
        kr_fail(err, "out of memory for the fp64 oracle");
        return NAN;
    }
    const int f64_failed = replay_gpu_refs_here(rc)
                               ? gpu_session_ref_mxfp4(rc->opt->gpu, A, M, &rc->in.weight, 1, 0,
                                                       ref64, err)
                               : gemm_ref_f64(A, M, &rc->in.weight, 0, ref64, err);
    if (f64_failed) {
        free(ref64);
        return NAN;
    }
    double num = 0, den = 0;
    for (int64_t i = 0; i < M * N; i++) {
        if (!isfinite(ref64[i]) || !isfinite(ref_f32[i]))
            continue;
        double d = (double)ref_f32[i] - ref64[i];
        num += d * d;
        den += ref64[i] * ref64[i];
    }
    free(ref64);
    return den > 0 ? sqrt(num / den) : NAN;
}

/* Memory for the fp32 reference's dequantized weight: its default (the
 * whole weight when it is at most GEMM_REF_CHUNK_N rows, else chunks), except
 * in a row-block replay, which exists to bound memory. */
#define REPLAY_REF_CHUNK_BYTES (8ll << 20)

/* C = A @ dequant(W)^T through the case's reference context (made on first
 * use). */
static int reference_gemm(replay_ctx_t *rc, const float *A, float *C, kr_error_t *err)
{
    if (replay_gpu_refs_here(rc))
        return gpu_session_ref_mxfp4(rc->opt->gpu, A, rc->c->M, &rc->in.weight, 0,
                                     rc->opt->ref_panel_rows, C, err);
    if (!rc->ref_ctx) {
        if (gemm_ref_ctx_init(&rc->ref_ctx, &rc->in.weight,
                              rc->blocks ? REPLAY_REF_CHUNK_BYTES : 0, err))
            return -1;
        gemm_ref_ctx_set_panel_rows(rc->ref_ctx, rc->opt->ref_panel_rows);
        gemm_ref_ctx_set_park_blas(rc->ref_ctx, 1); /* one thread of the replay calls BLAS */
    }
    const int st = gemm_ref_ctx_f32(rc->ref_ctx, A, rc->c->M, C, err);
    blas_threads_park(); /* the models run next, on their own threads */
    return st;
}

/* R_exact for a set of activations: fp32 reference on their dequantized
 * values.  The W4A8 models share one quantizer, so most kernels of a case
 * bring bit-identical operands: the last R_exact is kept with its operands
 * and reused when the next kernel's are the same bits.  The operands are
 * not copied: the cache points at the act's own dequant, and release_act
 * hands that buffer to the cache when the act goes (so every act of this
 * file is released through it).  The result belongs to rc (freed by
 * replay_exact_cache_free). */
const float *replay_reference_exact(replay_ctx_t *rc, const kernel_act_t *act, kr_error_t *err)
{
    const int64_t MK = rc->c->M * rc->c->K;
    if (rc->exact_cache.A && rc->exact_cache.n == MK &&
        (rc->exact_cache.A == act->dequant ||
         memcmp(rc->exact_cache.A, act->dequant, (size_t)MK * sizeof(float)) == 0))
        return rc->exact_cache.R;
    float *r = kr_alloc_array((size_t)rc->c->M * (size_t)rc->c->N * sizeof(float));
    if (!r) {
        kr_fail(err, "out of memory for the reference");
        return NULL;
    }
    if (reference_gemm(rc, act->dequant, r, err)) {
        free(r);
        return NULL;
    }
    if (rc->exact_cache.A_owned)
        free(rc->exact_cache.A);
    free(rc->exact_cache.R);
    rc->exact_cache.A = act->dequant;
    rc->exact_cache.A_owned = 0;
    rc->exact_cache.R = r;
    rc->exact_cache.n = MK;
    return r;
}

/* Frees an act, its dequant going to the R_exact cache when the cache
 * holds it. */
void replay_release_act(replay_ctx_t *rc, kernel_act_t *act)
{
    if (act->dequant && act->dequant == rc->exact_cache.A && !rc->exact_cache.A_owned) {
        rc->exact_cache.A_owned = 1;
        act->dequant = NULL;
    }
    kernel_act_free(act);
}

void replay_exact_cache_free(replay_ctx_t *rc)
{
    if (rc->exact_cache.A_owned)
        free(rc->exact_cache.A);
    free(rc->exact_cache.R);
    memset(&rc->exact_cache, 0, sizeof rc->exact_cache);
}


/* The GEMM of the source references for one weight kind: MXFP4 through the
 * chunked dequantizing reference, bf16 through a dense sgemm on the decoded
 * weight (wf, cached by the caller). */
static int source_gemm(replay_ctx_t *rc, weight_kind_t wk, const float *A, const float *wf,
                       float *C, kr_error_t *err)
{
    const case_t *c = rc->c;
    if (wk == WEIGHT_KIND_MXFP4)
        return reference_gemm(rc, A, C, err);
    if (replay_gpu_refs_here(rc))
        return gpu_session_ref_bf16(rc->opt->gpu, A, c->M, c->weight_bf16, c->N, c->K,
                                    rc->opt->ref_panel_rows, C, err);
    gemm_dense_f32_panels(A, wf, c->M, c->N, c->K, rc->opt->ref_panel_rows, C);
    blas_threads_park();
    return 0;
}

/* R_source (and R_sanitized when x has non-finite values) for one weight
 * kind.  bf16 kernels consume bf16 activations, so their x is rounded.
 * recycled: an [M, N] fp32 buffer no longer needed, for R_source, or NULL. */
static int build_source_refs(replay_ctx_t *rc, weight_kind_t wk, float *recycled, kr_error_t *err)
{
    const case_t *c = rc->c;
    source_refs_t *src = &rc->src[wk];
    const int64_t MK = c->M * c->K, MN = c->M * c->N, NK = c->N * c->K;
    float *wf = NULL;
    int status = 0;
    src->x = c->x;
    if (wk == WEIGHT_KIND_BF16) {
        src->x_owned = kr_alloc_array((size_t)MK * sizeof(float));
        wf = kr_alloc_array((size_t)NK * sizeof(float));
        if (!src->x_owned || !wf) {
            free(wf);
            return kr_fail(err, "%s: out of memory for the bf16 reference", c->path);
        }
        for (int64_t i = 0; i < MK; i++)
            src->x_owned[i] = bf16_decode(bf16_encode(c->x[i]));
        for (int64_t i = 0; i < NK; i++)
            wf[i] = bf16_decode(c->weight_bf16[i]);
        src->x = src->x_owned;
    }
    src->r_source = recycled ? recycled : kr_alloc_array((size_t)MN * sizeof(float));
    if (!src->r_source)
        status = kr_fail(err, "%s: out of memory for R_source", c->path);
    else
        status = source_gemm(rc, wk, src->x, wf, src->r_source, err);
    /* Non-finite activations make R_source non-finite where they reach; the
     * reference a reader wants next is the one on sanitized input (non-finite
     * -> 0, as the dispatch's SANITIZE_X does). */
    if (status == 0 && nonfinite_total(&rc->health.x_nf) > 0) {
        src->x_sanitized = kr_alloc_array((size_t)MK * sizeof(float));
        src->r_sanitized = kr_alloc_array((size_t)MN * sizeof(float));
        if (!src->x_sanitized || !src->r_sanitized) {
            status = kr_fail(err, "%s: out of memory for R_sanitized", c->path);
        } else {
            for (int64_t i = 0; i < MK; i++)
                src->x_sanitized[i] = isfinite(src->x[i]) ? src->x[i] : 0.0f;
            status = source_gemm(rc, wk, src->x_sanitized, wf, src->r_sanitized, err);
        }
    }
    free(wf);
    return status;
}

/* The source references of weight kind wk, made on their first use: a
 * replay whose kernels never compare with them (quantizers only) never
 * computes them, and one whose only user is its last kernel computes them
 * after that kernel's R_exact row into R_exact's buffer, so the case never
 * holds both [M, N] references at once.  The calls, and so the bits, are
 * those of computing them first. */
int replay_ensure_source_refs(replay_ctx_t *rc, weight_kind_t wk, kr_error_t *err)
{
    const case_t *c = rc->c;
    source_refs_t *src = &rc->src[wk];
    if (src->built)
        return 0;
    src->built = 1;
    if (!c->x || !(rc->opt->refs & REF_SOURCE) ||
        !(wk == WEIGHT_KIND_MXFP4 ? (const void *)c->weight : (const void *)c->weight_bf16))
        return 0;
    float *recycled = NULL;
    if (rc->last_reference_user && rc->exact_cache.R) {
        recycled = rc->exact_cache.R;
        rc->exact_cache.R = NULL;
        replay_exact_cache_free(rc);
    }
    return build_source_refs(rc, wk, recycled, err);
}

void replay_free_source_refs(source_refs_t *src)
{
    free(src->r_source);
    free(src->x_owned);
    free(src->x_sanitized);
    free(src->r_sanitized);
    memset(src, 0, sizeof *src);
}
