/* w4a8.decode and w4a8.r4d: the W4A8 decode band (M <= DECODE_MAX_M), split-K
 * over the folded weight (folded_weight.h: w8, ref[n]).
 *
 * Accumulation order, per output (m, n), all in IEEE fp32, no FMA:
 *   K is cut into SK contiguous equal ranges R_s = [s*K/SK, (s+1)*K/SK);
 *   partial[s] = +0; for k in R_s ascending: partial[s] += fp8(x[m][k]) * w8[n][k]
 *   acc = partial[0]; for s = 1 .. SK-1: acc += partial[s]
 *       (the last block to arrive reduces the fp32 scratch in split order)
 *   out[m][n] = bf16_rne(acc * (x_scale[m] * 2^(ref[n] - 127)))
 * With SK = 1 this is exactly w4a8.folded.
 *
 *   config DECODE_OWN  the dispatch's own decode kernel: SK = opt->decode_splits
 *                      (4 when 0); K % (SK * 32) == 0 required.
 *   config DECODE_R4D  libr4d gemm_mxfp4a8_nt_m64: SK from the dispatch's
 *                      _r4d_cfg(M, K) (8 if M <= 16 else 4, halved while
 *                      K % (SK*32) != 0), weight read in fragment order
 *                      (needs N % 16 == 0).  WV, MB and NPW only change the
 *                      launch shape and are reported, not modelled.
 * Open question: the order in which r4d reduces its SK partials is assumed to
 * be the split order, as for the dispatch's own decode kernel. */
#include <stdio.h>

#include "folded_model.h"
#include "w4a8_family.h"

enum { DECODE_OWN = 0, DECODE_R4D = 1 };

/* kernel_desc_t.split_k: SK of the dispatch's own decode kernel (its GPU
 * twin reads it too): --decode-splits, else 4; r4d's from _r4d_cfg(M, K). */
static int decode_split_k(const kernel_desc_t *k, int64_t M, int64_t N, int64_t K,
                          const kernel_options_t *opt, kr_error_t *err)
{
    (void)N;
    int sk, wv = 0, mb = 0, npw = 0;
    if (k->config == DECODE_R4D) {
        folded_r4d_cfg(M, K, &wv, &sk, &mb, &npw);
        return sk;
    }
    sk = opt && opt->decode_splits ? opt->decode_splits : 4;
    if (sk < 1) {
        kr_fail(err, "decode split count %d must be positive", sk);
        return 0;
    }
    return sk;
}

static int w4a8_decode_run(const kernel_desc_t *k, const kernel_inputs_t *in,
                           const kernel_act_t *act, const kernel_options_t *opt, uint16_t *out,
                           kernel_run_info_t *info, kr_error_t *err)
{
    if (act->kind != ACT_FP8_PER_TOKEN || act->M != in->M || act->K != in->K)
        return kr_fail(err, "%s needs fp8 per-token activations [M, K]", k->name);
    int sk, wv = 0, mb = 0, npw = 0;
    const int64_t dispatch_M = in->dispatch_M > 0 ? in->dispatch_M : in->M;
    if (k->config == DECODE_R4D)
        folded_r4d_cfg(dispatch_M, in->K, &wv, &sk, &mb, &npw);
    else if ((sk = decode_split_k(k, dispatch_M, in->N, in->K, opt, err)) == 0)
        return -1;
    if (in->K % ((int64_t)sk * 32) != 0) {
        kr_fail(err, "%s: K=%lld is not a multiple of SK*32 = %d", k->name, (long long)in->K,
                sk * 32);
        return KERNEL_RUN_UNSUPPORTED;
    }
    char layout[sizeof info->note];
    if (k->config == DECODE_R4D)
        snprintf(layout, sizeof layout, "r4d cfg WV=%d SK=%d MB=%d NPW=%d", wv, sk, mb, npw);
    else
        snprintf(layout, sizeof layout, "decode SK=%d (%d x %lld k)", sk, sk,
                 (long long)(in->K / sk));
    folded_model_t model = {
        .wlayout = k->config == DECODE_R4D ? FOLDED_W_FRAGMENT : FOLDED_W_CHECKPOINT,
        .parts = 1,
        .splits = sk,
        .layout_note = layout,
    };
    folded_act_init(&model.act[0], act->codes, 0, in->M, in->K, act->token_scale,
                    act->fp8_format);
    return folded_model_run(&model, in, opt, out, info, err);
}

/* The two decode kernels are one model: its band, its split count and its run. */
#define DECODE_FIELDS                                                                         \
    W4A8_FAMILY_FIELDS, .act_format = "e4m3fn per-token (fp32 scale per row)", .m_max = 64,   \
    .split_k = decode_split_k, .run_cpu = w4a8_decode_run

const kernel_desc_t kernel_w4a8_decode = {
    .name = "w4a8.decode",
    DECODE_FIELDS,
    .summary = "W4A8 decode band: folded e4m3 weights, split-K (SK = --decode-splits, default 4) "
               "with fp32 partials reduced in split order",
    .weight_format = "mxfp4: e2m1 [N,K/2] + e8m0 per 32 along K, folded to e4m3 per row",
    .accumulation = "w8 = e4m3fn(e2m1 * 2^(E - ref[n])); partial[s] += x*w8 over k ascending "
                    "within each of SK equal K ranges (fp32); acc = partial[0], acc += partial[s] "
                    "for s = 1..SK-1; out = bf16(acc * (x_scale[m] * 2^(ref[n]-127)))",
    .config = DECODE_OWN,
    .gpu_entry = KERNEL_GPU_W4A8_DECODE,
};

const kernel_desc_t kernel_w4a8_r4d = {
    .name = "w4a8.r4d",
    DECODE_FIELDS,
    .summary = "libr4d gemm_mxfp4a8_nt_m64 (decode band): folded e4m3 weights in fragment order, "
               "split-K with SK from _r4d_cfg(M, K); needs N % 16 == 0",
    .weight_format = "mxfp4 in fragment order (permute_w), folded to e4m3 per row",
    .accumulation = "w8 = e4m3fn(e2m1 * 2^(E - ref[n])); SK = 8 if M <= 16 else 4, halved while "
                    "K % (SK*32); partial[s] += x*w8 over k ascending within each K range (fp32); "
                    "acc = partial[0], acc += partial[s] in split order; "
                    "out = bf16(acc * (x_scale[m] * 2^(ref[n]-127)))",
    .config = DECODE_R4D,
};
