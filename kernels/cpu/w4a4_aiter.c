/* w4a4.aiter: aiter's W4A4 GEMM (gemm_with_dynamic_quant), the checkpoint's
 * declared numerics: activations quantized to MXFP4 per 32-block, weights
 * MXFP4.
 *
 * Accumulation order, per output (m, n), IEEE fp32, no FMA:
 *   for each 32-block b in increasing k:
 *       s = 0; for k in block, increasing: s += e2m1(a[m][k]) * e2m1(w[n][k])
 *       acc += s * (2^(Ea[m][b]-127) * 2^(Ew[n][b]-127))
 *   out[m][n] = bf16_rne(acc)
 * e2m1 x e2m1 products are multiples of 1/4 below 36, and 32 of them sum
 * exactly in fp32, so each block sum is exact; the product of the two power-
 * of-two scales is 2^(Ea+Ew-254) correctly rounded.  Only the block order of
 * acc and the final rounding decide the bits.  Open question (NUMERICS.md):
 * Triton on gfx12 decomposes dot_scaled into bf16 WMMA, whose accumulation
 * order across k may differ from this per-block model. */
#include <stdlib.h>

#include "act_prepare.h"
#include "formats.h"
#include "parallel.h"
#include "registry.h"
#include "tile_dot.h"
#include "weight_tile.h"

typedef struct {
    const kernel_inputs_t *in;
    const kernel_act_t *act;
    const float *a_value;       /* [M, K] e2m1 values, unscaled */
    const float *a_scale;       /* [M, K/32] 2^(Ea-127) */
    uint16_t *out;
    int failed;
} w4a4_job_t;

static void w4a4_tile(void *ctx, int64_t tile_index)
{
    w4a4_job_t *job = ctx;
    const int64_t M = job->in->M, N = job->in->N, K = job->in->K, nblocks = K / 32;
    weight_tile_t t;
    if (weight_tile_load(&job->in->weight, tile_index * TILE_N, &t)) {
        job->failed = 1;
        return;
    }
    float acc[TILE_DOT_MB][TILE_N];
    for (int64_t m0 = 0; m0 < M; m0 += TILE_DOT_MB) {
        const int mb = (int)(M - m0 < TILE_DOT_MB ? M - m0 : TILE_DOT_MB);
        tile_dot_blocks(t.value, job->a_value + m0 * K, K, mb, K, t.block_scale,
                        job->a_scale + m0 * nblocks, nblocks, acc);
        for (int i = 0; i < mb; i++) {
            uint16_t *orow = job->out + (m0 + i) * N + t.n0;
            for (int64_t j = 0; j < t.width; j++)
                orow[j] = bf16_encode(acc[i][j]);
        }
    }
    weight_tile_free(&t);
}

static int w4a4_aiter_run(const kernel_desc_t *k, const kernel_inputs_t *in, const kernel_act_t *act,
                          const kernel_options_t *opt, uint16_t *out, kernel_run_info_t *info,
                             kr_error_t *err)
{
    (void)k;
    (void)info;
    const int64_t M = in->M, K = in->K, nblocks = K / 32;
    float *a_value = malloc((size_t)M * (size_t)K * sizeof(float));
    float *a_scale = malloc((size_t)M * (size_t)nblocks * sizeof(float));
    if (!a_value || !a_scale) {
        free(a_value);
        free(a_scale);
        return kr_fail(err, "out of memory decoding MXFP4 activations");
    }
    for (int64_t i = 0; i < M * K; i++)
        a_value[i] = e2m1_decode(act->codes[i]);
    for (int64_t i = 0; i < M * nblocks; i++)
        a_scale[i] = e8m0_decode(act->block_scale[i], E8M0_SPEC);
    w4a4_job_t job = {.in = in, .act = act, .a_value = a_value, .a_scale = a_scale, .out = out};
    parallel_for((in->N + TILE_N - 1) / TILE_N, opt->threads, w4a4_tile, &job);
    free(a_value);
    free(a_scale);
    return job.failed ? kr_fail(err, "out of memory for weight tiles") : 0;
}

const kernel_desc_t kernel_w4a4_aiter = {
    .name = "w4a4.aiter",
    .family = "w4a4",
    .summary = "MXFP4 x MXFP4 (aiter gemm_with_dynamic_quant), activations quantized aiter-even",
    .act_format = "mxfp4 per 32-block (e2m1 + e8m0), quantized from x",
    .weight_format = "mxfp4: e2m1 [N,K/2] + e8m0 per 32 along K",
    .accumulation = "per 32-block: s += a*w over k ascending (exact); "
                    "acc += s * (2^(Ea-127) * 2^(Ew-127)) over blocks ascending; out = bf16(acc)",
    .k_multiple = 32,
    .m_min = 1,
    .m_max = 0,
    .refs = REF_EXACT | REF_SOURCE,
    .rel_tol_exact = 0.01,
    .rel_tol_source = 0.25,
    .prepare_act = act_prepare_mxfp4,
    .run_cpu = w4a4_aiter_run,
};
