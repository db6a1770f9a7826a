/* w4a8.folded, w4a8.folded.wperm, w4a8.atiled: the W4A8 kernel's prefill
 * folded path (the MXFP4 dispatch's mxfp4_linear with a per-row weight_ref),
 * in its three memory layouts.  See folded_weight.h for the pre-shifted
 * weight w8 and the reference exponent ref[n].
 *
 * Accumulation order, per output (m, n), all in IEEE fp32, no FMA:
 *   acc = +0; for k = 0 .. K-1 ascending: acc += fp8(x[m][k]) * w8[n][k]   (products exact)
 *   out[m][n] = bf16_rne(acc * (x_scale[m] * 2^(ref[n] - 127)))   (the scale product first)
 * x is the fp8 value of the activation code (e4m3fn or e4m3fnuz), unscaled.
 *
 * The layouts change where operands are read from, never the arithmetic:
 *   config FOLDED_ROWMAJOR  weight [N, K/2] checkpoint order, activations [M, K].
 *   config FOLDED_WPERM     (RADIANCE_MXFP4_WPERM) the weight is first permuted
 *                           with permute_w, as production does at load, and read
 *                           through the fragment-order index; needs N % 16 == 0.
 *   config FOLDED_ATILED    (RADIANCE_MXFP4_A_TILED) the activation codes are
 *                           first packed into the gfx12 WMMA A-fragment layout
 *                           [ceil(M/16)][K/16][32 lanes][8 bytes] and read
 *                           through it.  Production takes it at M >= A_TILED_MIN_M;
 *                           the model runs at any M so replays can compare.
 * All three must give the same bits. */
#include <stdio.h>
#include <stdlib.h>

#include "act_prepare.h"
#include "folded_weight.h"
#include "registry.h"

enum { FOLDED_ROWMAJOR = 0, FOLDED_WPERM = 1, FOLDED_ATILED = 2 };

typedef struct {
    folded_plan_t *plan;
    folded_act_t act;
    uint16_t *out;
} folded_job_t;

static void folded_rows(void *ctx, const folded_tile_t *t, int64_t m0, int64_t m1)
{
    folded_job_t *job = ctx;
    const int64_t N = job->plan->N, K = job->plan->K;
    float sums[FOLDED_MB][TILE_N];
    for (int64_t m = m0; m < m1; m += FOLDED_MB) {
        const int mb = (int)(m1 - m < FOLDED_MB ? m1 - m : FOLDED_MB);
        folded_dot(t, &job->act, m, mb, 0, K, sums);
        for (int i = 0; i < mb; i++)
            folded_store(t, sums[i], job->act.scale[m + i], job->out + (m + i) * N, 0, t->width);
    }
}

static int w4a8_folded_run(const kernel_desc_t *k, const kernel_inputs_t *in,
                           const kernel_act_t *act, const kernel_options_t *opt, uint16_t *out,
                           kernel_run_info_t *info, kr_error_t *err)
{
    const int config = k->config;
    if (act->kind != ACT_FP8_PER_TOKEN || act->M != in->M || act->K != in->K)
        return kr_fail(err, "%s needs fp8 per-token activations [M, K]", k->name);
    folded_plan_t *plan = malloc(sizeof *plan);
    if (!plan)
        return kr_fail(err, "out of memory for the folded weight plan");
    if (folded_plan_init(plan, in,
                         config == FOLDED_WPERM ? FOLDED_W_FRAGMENT : FOLDED_W_CHECKPOINT, err)) {
        free(plan);
        return -1;
    }
    uint8_t *tiled = NULL;
    if (config == FOLDED_ATILED) {
        tiled = folded_pack_atiled(act->codes, in->M, in->K);
        if (!tiled) {
            folded_plan_free(plan);
            free(plan);
            return kr_fail(err, "out of memory tiling the activations");
        }
    }
    folded_job_t job = {.plan = plan, .out = out};
    folded_act_init(&job.act, tiled ? tiled : act->codes, tiled != NULL, in->M, in->K,
                    act->token_scale, act->fp8_format);
    int rc = 0;
    if (folded_run(plan, in->M, opt->threads, folded_rows, &job)) {
        rc = kr_fail(err, "out of memory for weight tiles");
    } else if (info) {
        const char *layout = config == FOLDED_WPERM    ? "weight read in fragment order"
                             : config == FOLDED_ATILED ? "activations read A-tiled"
                                                       : "";
        snprintf(info->note, sizeof info->note, "%s%s%s", layout,
                 *layout && plan->ref_from_case ? "; " : "",
                 plan->ref_from_case ? "ref = case weight_ref" : "");
        folded_stats_note(plan, info->note, (int)sizeof info->note);
    }
    free(tiled);
    folded_plan_free(plan);
    free(plan);
    return rc;
}

#define FOLDED_ACCUMULATION                                                                   \
    "w8 = e4m3fn(e2m1 * 2^(E - ref[n])) (RNE, underflows beyond 8 binades); "                \
    "acc += x*w8 over k = 0..K-1 ascending (exact products, fp32 adds); "                    \
    "out = bf16(acc * (x_scale[m] * 2^(ref[n]-127)))"

const kernel_desc_t kernel_w4a8_folded = {
    .name = "w4a8.folded",
    .family = "w4a8",
    .summary = "W4A8 prefill folded path: block exponent pre-shifted into e4m3 weights "
               "against a per-row reference exponent",
    .act_format = "e4m3fn per-token (fp32 scale per row)",
    .weight_format = "mxfp4: e2m1 [N,K/2] + e8m0 per 32 along K, folded to e4m3 per row",
    .accumulation = FOLDED_ACCUMULATION,
    .act = OPERAND_E4M3FN_PER_TOKEN,
    .weight = OPERAND_MXFP4,
    .k_multiple = 64,
    .m_min = 1,
    .m_max = 0,
    .refs = REF_EXACT | REF_SOURCE,
    .rel_tol_exact = 0.01,
    .rel_tol_source = 0.08,
    .op = KERNEL_OP_GEMM,
    .config = FOLDED_ROWMAJOR,
    .gpu_entry = KERNEL_GPU_W4A8_FOLDED,
    .gpu_matrix = 1,
    .compare_role = COMPARE_ROLE_W4A8_PRODUCTION,
    .prepare_act = act_prepare_fp8_token,
    .run_cpu = w4a8_folded_run,
};

const kernel_desc_t kernel_w4a8_folded_wperm = {
    .name = "w4a8.folded.wperm",
    .family = "w4a8",
    .summary = "w4a8.folded reading the weight in WMMA fragment order (RADIANCE_MXFP4_WPERM); "
               "needs N % 16 == 0; bit-identical to w4a8.folded",
    .act_format = "e4m3fn per-token (fp32 scale per row)",
    .weight_format = "mxfp4 in fragment order (permute_w), folded to e4m3 per row",
    .accumulation = FOLDED_ACCUMULATION,
    .act = OPERAND_E4M3FN_PER_TOKEN,
    .weight = OPERAND_MXFP4,
    .k_multiple = 64,
    .m_min = 1,
    .m_max = 0,
    .refs = REF_EXACT | REF_SOURCE,
    .rel_tol_exact = 0.01,
    .rel_tol_source = 0.08,
    .op = KERNEL_OP_GEMM,
    .config = FOLDED_WPERM,
    .prepare_act = act_prepare_fp8_token,
    .run_cpu = w4a8_folded_run,
};

const kernel_desc_t kernel_w4a8_atiled = {
    .name = "w4a8.atiled",
    .family = "w4a8",
    .summary = "w4a8.folded reading fragment-tiled activations (RADIANCE_MXFP4_A_TILED; "
               "production uses it at M >= A_TILED_MIN_M, modelled at any M); "
               "bit-identical to w4a8.folded",
    .act_format = "e4m3fn per-token, A-tiled [M/16][K/16][32][8]",
    .weight_format = "mxfp4: e2m1 [N,K/2] + e8m0 per 32 along K, folded to e4m3 per row",
    .accumulation = FOLDED_ACCUMULATION,
    .act = OPERAND_E4M3FN_PER_TOKEN,
    .weight = OPERAND_MXFP4,
    .k_multiple = 64,
    .m_min = 1,
    .m_max = 0,
    .refs = REF_EXACT | REF_SOURCE,
    .rel_tol_exact = 0.01,
    .rel_tol_source = 0.08,
    .op = KERNEL_OP_GEMM,
    .config = FOLDED_ATILED,
    .prepare_act = act_prepare_fp8_token,
    .run_cpu = w4a8_folded_run,
};
