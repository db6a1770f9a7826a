/* w4a8.perblock: the W4A8 kernel's per-block-rescale path (weight_ref of 2
 * elements in the MXFP4 dispatch, and the path for layers the folded path
 * cannot take).
 *
 * Accumulation order, per output (m, n), all in IEEE fp32, no FMA:
 *   for each 32-block b in increasing k:
 *       s = 0; for k in block, increasing: s += fp8(x[m][k]) * e2m1(w[n][k])   (products exact)
 *       acc += s * 2^(E[n][b] - 127)
 *   out[m][n] = bf16_rne(acc * x_scale[m])
 * fp8 x e2m1 products have at most 4 x 2 significant bits, so they are exact
 * in fp32, and with exact products an FMA gives the same bits as mul + add:
 * the order of the additions is the whole contract. */
#include <stdlib.h>
#include <string.h>

#include "act_prepare.h"
#include "formats.h"
#include "parallel.h"
#include "registry.h"
#include "tile_dot.h"
#include "weight_tile.h"

typedef struct {
    const kernel_inputs_t *in;
    const kernel_act_t *act;
    const float *x_value;   /* [M, K] fp8 values, unscaled */
    uint16_t *out;
    int failed;
} perblock_job_t;

static void perblock_tile(void *ctx, int64_t tile_index)
{
    perblock_job_t *job = ctx;
    const int64_t M = job->in->M, N = job->in->N, K = job->in->K;
    weight_tile_t t;
    if (weight_tile_load(&job->in->weight, tile_index * TILE_N, &t)) {
        job->failed = 1;
        return;
    }
    float acc[TILE_DOT_MB][TILE_N];
    for (int64_t m0 = 0; m0 < M; m0 += TILE_DOT_MB) {
        const int mb = (int)(M - m0 < TILE_DOT_MB ? M - m0 : TILE_DOT_MB);
        tile_dot_blocks(t.value, job->x_value + m0 * K, K, mb, K, t.block_scale, NULL, 0, acc);
        for (int i = 0; i < mb; i++) {
            const float xs = job->act->token_scale[m0 + i];
            uint16_t *orow = job->out + (m0 + i) * N + t.n0;
            for (int64_t j = 0; j < t.width; j++)
                orow[j] = bf16_encode(acc[i][j] * xs);
        }
    }
    weight_tile_free(&t);
}

static int w4a8_perblock_run(const kernel_desc_t *k, const kernel_inputs_t *in, const kernel_act_t *act,
                             const kernel_options_t *opt, uint16_t *out, kernel_run_info_t *info,
                             kr_error_t *err)
{
    (void)k;
    (void)info;
    perblock_job_t job = {.in = in, .act = act, .out = out};
    job.x_value = act_fp8_values(act);
    if (!job.x_value)
        return kr_fail(err, "out of memory decoding activations");
    parallel_for((in->N + TILE_N - 1) / TILE_N, opt->threads, perblock_tile, &job);
    free((void *)job.x_value);
    return job.failed ? kr_fail(err, "out of memory for weight tiles") : 0;
}

const kernel_desc_t kernel_w4a8_perblock = {
    .name = "w4a8.perblock",
    .family = "w4a8",
    .summary = "MXFP4 weights x fp8 per-token activations, block scale applied per 32-block",
    .act_format = "e4m3fn per-token (fp32 scale per row)",
    .weight_format = "mxfp4: e2m1 [N,K/2] + e8m0 per 32 along K",
    .accumulation = "per 32-block: s += x*w over k ascending (exact products, fp32 adds); "
                    "acc += s * 2^(E-127) over blocks ascending; out = bf16(acc * x_scale[m])",
    .k_multiple = 64,
    .m_min = 1,
    .m_max = 0,
    .refs = REF_EXACT | REF_SOURCE,
    .rel_tol_exact = 0.01,
    .rel_tol_source = 0.08,
    .prepare_act = act_prepare_fp8_token,
    .run_cpu = w4a8_perblock_run,
};
