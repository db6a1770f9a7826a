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
#include <stdlib.h>

#include "folded_model.h"
#include "w4a8_family.h"

enum { FOLDED_ROWMAJOR = 0, FOLDED_WPERM = 1, FOLDED_ATILED = 2 };

static int w4a8_folded_run(const kernel_desc_t *k, const kernel_inputs_t *in,
                           const kernel_act_t *act, const kernel_options_t *opt, uint16_t *out,
                           kernel_run_info_t *info, kr_error_t *err)
{
    const int config = k->config;
    if (act->kind != ACT_FP8_PER_TOKEN || act->M != in->M || act->K != in->K)
        return kr_fail(err, "%s needs fp8 per-token activations [M, K]", k->name);
    uint8_t *tiled = NULL;
    if (config == FOLDED_ATILED) {
        tiled = folded_pack_atiled(act->codes, in->M, in->K);
        if (!tiled)
            return kr_fail(err, "out of memory tiling the activations");
    }
    folded_model_t model = {
        .wlayout = config == FOLDED_WPERM ? FOLDED_W_FRAGMENT : FOLDED_W_CHECKPOINT,
        .parts = 1,
        .splits = 1,
        .layout_note = config == FOLDED_WPERM    ? "weight read in fragment order"
                       : config == FOLDED_ATILED ? "activations read A-tiled"
                                                 : "",
    };
    folded_act_init(&model.act[0], tiled ? tiled : act->codes, tiled != NULL, in->M, in->K,
                    act->token_scale, act->fp8_format);
    const int rc = folded_model_run(&model, in, opt, out, info, err);
    free(tiled);
    return rc;
}

#define FOLDED_ACCUMULATION                                                                   \
    "w8 = e4m3fn(e2m1 * 2^(E - ref[n])) (RNE, underflows beyond 8 binades); "                \
    "acc += x*w8 over k = 0..K-1 ascending (exact products, fp32 adds); "                    \
    "out = bf16(acc * (x_scale[m] * 2^(ref[n]-127)))"

/* The three layouts are one model with one order. */
#define FOLDED_FIELDS                                                                         \
    W4A8_FAMILY_FIELDS, .accumulation = FOLDED_ACCUMULATION, .m_max = 0,                      \
    .run_cpu = w4a8_folded_run

const kernel_desc_t kernel_w4a8_folded = {
    .name = "w4a8.folded",
    FOLDED_FIELDS,
    .summary = "W4A8 prefill folded path: block exponent pre-shifted into e4m3 weights "
               "against a per-row reference exponent",
    .act_format = "e4m3fn per-token (fp32 scale per row)",
    .weight_format = "mxfp4: e2m1 [N,K/2] + e8m0 per 32 along K, folded to e4m3 per row",
    .config = FOLDED_ROWMAJOR,
    .gpu_entry = KERNEL_GPU_W4A8_FOLDED,
    .gpu_matrix = 1,
    .compare_role = COMPARE_ROLE_W4A8_PRODUCTION,
};

const kernel_desc_t kernel_w4a8_folded_wperm = {
    .name = "w4a8.folded.wperm",
    FOLDED_FIELDS,
    .summary = "w4a8.folded reading the weight in WMMA fragment order (RADIANCE_MXFP4_WPERM); "
               "needs N % 16 == 0; bit-identical to w4a8.folded",
    .act_format = "e4m3fn per-token (fp32 scale per row)",
    .weight_format = "mxfp4 in fragment order (permute_w), folded to e4m3 per row",
    .config = FOLDED_WPERM,
};

const kernel_desc_t kernel_w4a8_atiled = {
    .name = "w4a8.atiled",
    FOLDED_FIELDS,
    .summary = "w4a8.folded reading fragment-tiled activations (RADIANCE_MXFP4_A_TILED; "
               "production uses it at M >= A_TILED_MIN_M, modelled at any M); "
               "bit-identical to w4a8.folded",
    .act_format = "e4m3fn per-token, A-tiled [M/16][K/16][32][8]",
    .weight_format = "mxfp4: e2m1 [N,K/2] + e8m0 per 32 along K, folded to e4m3 per row",
    .config = FOLDED_ATILED,
};
