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
#include <stdlib.h>

#include "act_prepare.h"
#include "folded_weight.h"
#include "registry.h"

enum { DECODE_OWN = 0, DECODE_R4D = 1 };

typedef struct {
    folded_plan_t *plan;
    folded_act_t act;
    int sk;
    uint16_t *out;
} decode_job_t;

static void decode_rows(void *ctx, const folded_tile_t *t, int64_t m0, int64_t m1)
{
    decode_job_t *job = ctx;
    const int64_t N = job->plan->N, K = job->plan->K, span = K / job->sk;
    float acc[FOLDED_MB][TILE_N], part[FOLDED_MB][TILE_N];
    for (int64_t m = m0; m < m1; m += FOLDED_MB) {
        const int mb = (int)(m1 - m < FOLDED_MB ? m1 - m : FOLDED_MB);
        folded_dot(t, &job->act, m, mb, 0, span, acc);              /* acc = partial[0] */
        for (int s = 1; s < job->sk; s++) {
            folded_dot(t, &job->act, m, mb, s * span, (s + 1) * span, part);
            for (int i = 0; i < mb; i++)
                for (int j = 0; j < TILE_N; j++)
                    acc[i][j] += part[i][j];                          /* split order */
        }
        for (int i = 0; i < mb; i++)
            folded_store(t, acc[i], job->act.scale[m + i], job->out + (m + i) * N, 0, t->width);
    }
}

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
    folded_plan_t *plan = malloc(sizeof *plan);
    if (!plan)
        return kr_fail(err, "out of memory for the folded weight plan");
    if (folded_plan_init(plan, in,
                         k->config == DECODE_R4D ? FOLDED_W_FRAGMENT : FOLDED_W_CHECKPOINT,
                         err)) {
        free(plan);
        return -1;
    }
    decode_job_t job = {.plan = plan, .sk = sk, .out = out};
    folded_act_init(&job.act, act->codes, 0, in->M, in->K, act->token_scale, act->fp8_format);
    int rc = 0;
    if (folded_run(plan, in->M, opt->threads, decode_rows, &job)) {
        rc = kr_fail(err, "out of memory for weight tiles");
    } else if (info) {
        if (k->config == DECODE_R4D)
            snprintf(info->note, sizeof info->note, "r4d cfg WV=%d SK=%d MB=%d NPW=%d%s", wv, sk,
                     mb, npw, plan->ref_from_case ? "; ref = case weight_ref" : "");
        else
            snprintf(info->note, sizeof info->note, "decode SK=%d (%d x %lld k)%s", sk, sk,
                     (long long)(in->K / sk), plan->ref_from_case ? "; ref = case weight_ref" : "");
        folded_stats_note(plan, info->note, (int)sizeof info->note);
    }
    folded_plan_free(plan);
    free(plan);
    return rc;
}

const kernel_desc_t kernel_w4a8_decode = {
    .name = "w4a8.decode",
    .family = "w4a8",
    .summary = "W4A8 decode band: folded e4m3 weights, split-K (SK = --decode-splits, default 4) "
               "with fp32 partials reduced in split order",
    .act_format = "e4m3fn per-token (fp32 scale per row)",
    .weight_format = "mxfp4: e2m1 [N,K/2] + e8m0 per 32 along K, folded to e4m3 per row",
    .accumulation = "w8 = e4m3fn(e2m1 * 2^(E - ref[n])); partial[s] += x*w8 over k ascending "
                    "within each of SK equal K ranges (fp32); acc = partial[0], acc += partial[s] "
                    "for s = 1..SK-1; out = bf16(acc * (x_scale[m] * 2^(ref[n]-127)))",
    .act = OPERAND_E4M3FN_PER_TOKEN,
    .weight = OPERAND_MXFP4,
    .k_multiple = 64,
    .m_min = 1,
    .m_max = 64,
    .refs = REF_EXACT | REF_SOURCE,
    .rel_tol_exact = 0.01,
    .rel_tol_source = 0.08,
    .op = KERNEL_OP_GEMM,
    .config = DECODE_OWN,
    .gpu_entry = KERNEL_GPU_W4A8_DECODE,
    .split_k = decode_split_k,
    .prepare_act = act_prepare_fp8_token,
    .run_cpu = w4a8_decode_run,
};

const kernel_desc_t kernel_w4a8_r4d = {
    .name = "w4a8.r4d",
    .family = "w4a8",
    .summary = "libr4d gemm_mxfp4a8_nt_m64 (decode band): folded e4m3 weights in fragment order, "
               "split-K with SK from _r4d_cfg(M, K); needs N % 16 == 0",
    .act_format = "e4m3fn per-token (fp32 scale per row)",
    .weight_format = "mxfp4 in fragment order (permute_w), folded to e4m3 per row",
    .accumulation = "w8 = e4m3fn(e2m1 * 2^(E - ref[n])); SK = 8 if M <= 16 else 4, halved while "
                    "K % (SK*32); partial[s] += x*w8 over k ascending within each K range (fp32); "
                    "acc = partial[0], acc += partial[s] in split order; "
                    "out = bf16(acc * (x_scale[m] * 2^(ref[n]-127)))",
    .act = OPERAND_E4M3FN_PER_TOKEN,
    .weight = OPERAND_MXFP4,
    .k_multiple = 64,
    .m_min = 1,
    .m_max = 64,
    .refs = REF_EXACT | REF_SOURCE,
    .rel_tol_exact = 0.01,
    .rel_tol_source = 0.08,
    .op = KERNEL_OP_GEMM,
    .config = DECODE_R4D,
    .split_k = decode_split_k,
    .prepare_act = act_prepare_fp8_token,
    .run_cpu = w4a8_decode_run,
};
