/* w4a8.partitioned: the MXFP4 dispatch's mxfp4_linear_pqp, a merged linear
 * whose output column blocks read per-partition (rotated) activation copies
 * in one launch: P = 3 copies a[P, M, K] (fp8) with scales x_scale[P, M].
 *
 * Output column n belongs to partition p = 0 if n < pb1, 1 if n < pb2, else 2
 * (pb1, pb2 = --partition-bounds; by default N/3 and 2N/3, each rounded down
 * to a multiple of 16).  Column n reads copy p's codes and scale.
 *
 * Accumulation order, per output (m, n) with p = partition(n), IEEE fp32, no FMA,
 * exactly w4a8.folded on copy p (folded_weight.h: w8, ref[n]):
 *   acc = +0; for k = 0 .. K-1 ascending: acc += fp8(x_p[m][k]) * w8[n][k]
 *   out[m][n] = bf16_rne(acc * (x_scale_p[m] * 2^(ref[n] - 127)))
 *
 * The copies: the case's x_fp8_parts / x_scale_parts when it holds them
 * (parts == 3, fp8 format x_fp8_format); otherwise (a schema-v1 case holds
 * one copy) all three partitions read the kernel's prepared activations. */
#include <stdio.h>

#include "folded_model.h"
#include "w4a8_family.h"

#define PQP_PARTS 3

_Static_assert(PQP_PARTS <= FOLDED_MAX_PARTS, "the folded model holds every copy");

static int w4a8_partitioned_run(const kernel_desc_t *k, const kernel_inputs_t *in,
                                const kernel_act_t *act, const kernel_options_t *opt,
                                uint16_t *out, kernel_run_info_t *info, kr_error_t *err)
{
    const int64_t M = in->M, N = in->N, K = in->K;
    if (act->kind != ACT_FP8_PER_TOKEN || act->M != M || act->K != K)
        return kr_fail(err, "%s needs fp8 per-token activations [M, K]", k->name);
    const int have_parts = in->x_fp8_parts != NULL;
    if (have_parts && (in->parts != PQP_PARTS || !in->x_scale_parts))
        return kr_fail(err, "%s reads %d activation copies with their scales; the case holds %d",
                       k->name, PQP_PARTS, in->parts);
    int64_t pb1 = opt->partition_bounds[0] ? opt->partition_bounds[0] : N / 3 / 16 * 16;
    int64_t pb2 = opt->partition_bounds[1] ? opt->partition_bounds[1] : 2 * N / 3 / 16 * 16;
    if (pb1 < 0 || pb1 > pb2 || pb2 > N)
        return kr_fail(err, "partition bounds %lld, %lld must satisfy 0 <= pb1 <= pb2 <= N=%lld",
                       (long long)pb1, (long long)pb2, (long long)N);
    folded_model_t model = {.wlayout = FOLDED_W_CHECKPOINT, .parts = PQP_PARTS,
                            .part_end = {pb1, pb2, N}, .splits = 1};
    for (int p = 0; p < PQP_PARTS; p++) {
        if (have_parts)
            folded_act_init(&model.act[p], in->x_fp8_parts + (int64_t)p * M * K, 0, M, K,
                            in->x_scale_parts + (int64_t)p * M, in->x_fp8_format);
        else
            folded_act_init(&model.act[p], act->codes, 0, M, K, act->token_scale,
                            act->fp8_format);
    }
    char layout[sizeof info->note];
    snprintf(layout, sizeof layout, "partitions n<%lld, n<%lld, n<%lld; %s", (long long)pb1,
             (long long)pb2, (long long)N,
             have_parts ? "3 recorded activation copies (x_fp8_parts)"
                        : "3 identical activation copies");
    model.layout_note = layout;
    return folded_model_run(&model, in, opt, out, info, err);
}

const kernel_desc_t kernel_w4a8_partitioned = {
    .name = "w4a8.partitioned",
    W4A8_FAMILY_FIELDS,
    .summary = "mxfp4_linear_pqp: folded W4A8 where output columns of partition p "
               "(bounds pb1, pb2) read activation copy p of 3",
    .act_format = "3 copies of e4m3fn per-token activations [3, M, K] + scales [3, M]",
    .weight_format = "mxfp4: e2m1 [N,K/2] + e8m0 per 32 along K, folded to e4m3 per row",
    .accumulation = "as w4a8.folded on copy p = partition(n): acc += x_p*w8 over k ascending "
                    "(fp32); out = bf16(acc * (x_scale_p[m] * 2^(ref[n]-127)))",
    .m_max = 0,
    .config = 0,
    .run_cpu = w4a8_partitioned_run,
};
