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
#include "parallel.h"
#include "registry.h"
#include "tile_dot.h"
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

typedef struct {
    const kernel_inputs_t *in;
    const float *x;         /* [M, K] bf16 values */
    uint16_t *out;
    int failed;
} ref_linear_job_t;

static void ref_linear_tile(void *ctx, int64_t tile_index)
{
    ref_linear_job_t *job = ctx;
    const int64_t M = job->in->M, N = job->in->N, K = job->in->K;
    weight_tile_t t;
    if (weight_tile_load(&job->in->weight, tile_index * TILE_N, &t)) {
        job->failed = 1;
        return;
    }
    /* w = e2m1 * pow(2, E - 127), in place over the tile's values. */
    float pow2[256];
    for (int e = 0; e < 256; e++)
        pow2[e] = ldexpf(1.0f, e - 127);
    for (int64_t b = 0; b < K / 32; b++) {
        float f[TILE_N];
        for (int j = 0; j < TILE_N; j++)
            f[j] = pow2[t.block_exp[b * TILE_N + j]];
        for (int64_t k = b * 32; k < b * 32 + 32; k++) {
            float *v = t.value + k * TILE_N;
            for (int j = 0; j < TILE_N; j++)
                v[j] = v[j] * f[j];
        }
    }
    float acc[TILE_DOT_MB][TILE_N];
    for (int64_t m0 = 0; m0 < M; m0 += TILE_DOT_MB) {
        const int mb = (int)(M - m0 < TILE_DOT_MB ? M - m0 : TILE_DOT_MB);
        tile_dot_splits(t.value, job->x + m0 * K, K, mb, K, 1, acc);
        for (int i = 0; i < mb; i++) {
            uint16_t *orow = job->out + (m0 + i) * N + t.n0;
            for (int64_t j = 0; j < t.width; j++)
                orow[j] = bf16_encode(acc[i][j]);
        }
    }
    weight_tile_free(&t);
}

static int ref_linear_run(const kernel_desc_t *k, const kernel_inputs_t *in,
                          const kernel_act_t *act, const kernel_options_t *opt, uint16_t *out,
                          kernel_run_info_t *info, kr_error_t *err)
{
    (void)info;
    if (!in->weight.packed || !act->dequant)
        return kr_fail(err, "%s: no MXFP4 weight or activations", k->name);
    ref_linear_job_t job = {.in = in, .x = act->dequant, .out = out};
    parallel_for((in->N + TILE_N - 1) / TILE_N, opt ? opt->threads : 0, ref_linear_tile, &job);
    return job.failed ? kr_fail(err, "out of memory for weight tiles") : 0;
}

const kernel_desc_t kernel_ref_linear = {
    .name = "ref_linear",
    .family = "ref",
    .summary = "RADIANCE_MXFP4_REFLINEAR: (x.float() @ dequant(W).T).to(bf16), sequential dot "
               "(torch's GPU order unknown)",
    .act_format = "bf16 (x rounded to bf16)",
    .weight_format = "mxfp4 dequantized to fp32: e2m1 * pow(2, E-127)",
    .accumulation = "acc += x*w over k = 0..K-1 ascending, w = e2m1*2^(E-127) in fp32 (exact "
                    "products, fp32 adds); out = bf16(acc)",
    .k_multiple = 32,
    .m_min = 1,
    .m_max = 0,
    .refs = REF_SOURCE,
    .rel_tol_exact = 0.0,
    .rel_tol_source = 0.01,
    .op = KERNEL_OP_GEMM,
    .prepare_act = ref_linear_prepare_act,
    .run_cpu = ref_linear_run,
};
