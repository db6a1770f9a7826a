/* ref_linear: the MXFP4 dispatch's RADIANCE_MXFP4_REFLINEAR branch, the
 * in-situ fallback that replaces the kernel's output with
 *     w = E2M1[codes] * pow(2, weight_scale - 127)      (fp32, checkpoint [N, K])
 *     out = (x.float() @ w.T.float()).to(bfloat16)
 * x is the layer's bf16 input (the case's x, rounded to bf16 if it was
 * stored as fp32), w the dequantized MXFP4 weight.
 *
 * Accumulation order, per output (m, n), IEEE fp32, no FMA:
 *   w[n][k] = e2m1(code) * 2^(E[n][k/32] - 127)          (exact in fp32)
 *   acc = 0; for k = 0 .. K-1 ascending: acc += x[m][k] * w[n][k]
 *   out[m][n] = bf16_rne(acc)
 * bf16 x (e2m1 * 2^e) products have at most 8 x 2 significant bits: exact in
 * fp32 unless they fall below 2^-126, so the order of the additions is the
 * contract.  torch's fp32 matmul order on the GPU (hipBLASLt/rocBLAS sgemm
 * tiling, split-K) is NOT known: this models a plain sequential dot, and a
 * real REFLINEAR output may differ from it in the last bf16 bit.
 *
 * The scale is torch's pow(2, E - 127) in fp32, whatever the replay's e8m0
 * mode: byte 0 is 2^-127 and byte 255 is +Inf (the OCP spec says NaN there,
 * Triton's fallback makes byte 0 zero; neither applies to this torch code).
 * The weight comes in checkpoint order (the harness undoes WPERM).  Note
 * that the production branch does NOT unpermute: with RADIANCE_MXFP4_WPERM=1
 * it reads fragment-order bytes as if they were checkpoint order, which this
 * model does not reproduce. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "act_prepare.h"
#include "formats.h"
#include "registry.h"
#include "tile_gemm.h"
#include "weight_tile.h"

/* x rounded to bf16 in `dequant` (no codes, no scales), as bf16_gemm.c does. */
static int ref_linear_prepare_act(const kernel_desc_t *k, const kernel_inputs_t *in,
                                  const kernel_options_t *opt, kernel_act_t *act, kr_error_t *err)
{
    (void)opt;
    memset(act, 0, sizeof *act);
    if (!in->weight.packed || !in->weight.scales)
        return kr_fail(err, "the case has no MXFP4 weight; %s dequantizes it", k->name);
    if (!in->x)
        return kr_fail(err, "the case has no source activations x; %s multiplies x.float() "
                            "(x_fp8 cannot stand in)", k->name);
    return act_prepare_bf16_values(in, act, err);
}

/* The weight as torch's expression builds it, chunk by chunk:
 * w = e2m1 * pow(2, E - 127) in fp32, pow2[E] being that power (byte 255
 * gives 2^128 = Inf, byte 0 the subnormal 2^-127). */
typedef struct {
    const mxfp4_weight_t *w;
    float pow2[256];
} ref_linear_source_t;

static void ref_linear_fill(const tile_gemm_t *g, int64_t n0, int64_t width, int64_t k0,
                            int64_t k1, float *value, float *block_scale)
{
    (void)block_scale;
    const ref_linear_source_t *s = g->fill_ctx;
    float factor[TILE_GEMM_KC / 32][TILE_N];
    weight_tile_fill(s->w, s->pow2, n0, width, k0, k1, value, &factor[0][0]);
    for (int64_t k = k0; k < k1; k++) {
        float *v = value + (k - k0) * TILE_N;
        const float *f = factor[(k - k0) / 32];
        for (int j = 0; j < TILE_N; j++)
            v[j] = v[j] * f[j];
    }
}

static int ref_linear_run(const kernel_desc_t *k, const kernel_inputs_t *in,
                          const kernel_act_t *act, const kernel_options_t *opt, uint16_t *out,
                          kernel_run_info_t *info, kr_error_t *err)
{
    (void)info;
    if (!in->weight.packed || !act->dequant)
        return kr_fail(err, "%s: no MXFP4 weight or activations", k->name);
    ref_linear_source_t source = {.w = &in->weight};
    for (int e = 0; e < 256; e++)
        source.pow2[e] = ldexpf(1.0f, e - 127);
    const tile_gemm_t g = {.M = in->M, .N = in->N, .K = in->K, .x = act->dequant,
                           .order = TILE_SUM_SPLITS, .splits = 1, .fill = ref_linear_fill,
                           .fill_ctx = &source, .out = out};
    tile_gemm_run(&g, opt ? opt->threads : 0);
    return 0;
}

const kernel_desc_t kernel_ref_linear = {
    .name = "ref_linear",
    .family = "ref",
    .summary = "RADIANCE_MXFP4_REFLINEAR: (x.float() @ dequant(W).T).to(bf16), sequential dot "
               "(torch's GPU order unknown)",
    KERNEL_BF16_ACT,
    .weight_format = "mxfp4 dequantized to fp32: e2m1 * pow(2, E-127)",
    .weight = OPERAND_MXFP4,
    .accumulation = "acc += x*w over k = 0..K-1 ascending, w = e2m1*2^(E-127) in fp32 (exact "
                    "products, fp32 adds); out = bf16(acc)",
    KERNEL_ANY_M_K32,
    .refs = REF_SOURCE,
    .rel_tol_exact = 0.0,
    .rel_tol_source = 0.01,
    .op = KERNEL_OP_GEMM,
    .prepare_act = ref_linear_prepare_act,
    .run_cpu = ref_linear_run,
};
