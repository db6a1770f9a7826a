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

#include "act_prepare.h"
#include "registry.h"
#include "scratch.h"
#include "tile_gemm.h"
#include "w4a8_family.h"
#include "weight_tile.h"

static int w4a8_perblock_run(const kernel_desc_t *k, const kernel_inputs_t *in, const kernel_act_t *act,
                             const kernel_options_t *opt, uint16_t *out, kernel_run_info_t *info,
                             kr_error_t *err)
{
    (void)k;
    (void)info;
    scratch_t x_buffer;
    float *x_value = scratch_get(&x_buffer, (size_t)in->M * (size_t)in->K * sizeof(float));
    if (!x_value)
        return kr_fail(err, "out of memory decoding activations");
    act_fp8_values(act, x_value, opt->threads);
    const tile_gemm_t g = {.M = in->M, .N = in->N, .K = in->K, .x = x_value,
                           .row_scale = act->token_scale, .out = out};
    weight_tile_gemm_blocks(&g, &in->weight, opt->threads);
    scratch_put(&x_buffer);
    return 0;
}

const kernel_desc_t kernel_w4a8_perblock = {
    .name = "w4a8.perblock",
    W4A8_FAMILY_FIELDS,
    .summary = "MXFP4 weights x fp8 per-token activations, block scale applied per 32-block",
    .act_format = "e4m3fn per-token (fp32 scale per row)",
    .weight_format = "mxfp4: e2m1 [N,K/2] + e8m0 per 32 along K",
    .accumulation = "per 32-block: s += x*w over k ascending (exact products, fp32 adds); "
                    "acc += s * 2^(E-127) over blocks ascending; out = bf16(acc * x_scale[m])",
    .m_max = 0,
    .run_cpu = w4a8_perblock_run,
    .gpu_entry = KERNEL_GPU_W4A8_PERBLOCK,
    .compare_role = COMPARE_ROLE_W4A8_MODEL,
};
