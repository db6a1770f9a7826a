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
 * acc and the final rounding decide the bits.  Assumption 5 of docs/NUMERICS.md:
 * Triton on gfx12 decomposes dot_scaled into bf16 WMMA, whose accumulation
 * order across k may differ from this per-block model. */
#include <stdlib.h>

#include "act_prepare.h"
#include "registry.h"
#include "scratch.h"
#include "tile_gemm.h"
#include "weight_tile.h"

static int w4a4_aiter_run(const kernel_desc_t *k, const kernel_inputs_t *in, const kernel_act_t *act,
                          const kernel_options_t *opt, uint16_t *out, kernel_run_info_t *info,
                          kr_error_t *err)
{
    (void)k;
    (void)info;
    const int64_t M = in->M, K = in->K, nblocks = K / 32;
    scratch_t value_buffer, scale_buffer;
    float *a_value = scratch_get(&value_buffer, (size_t)M * (size_t)K * sizeof(float));
    float *a_scale = scratch_get(&scale_buffer, (size_t)M * (size_t)nblocks * sizeof(float));
    if (!a_value || !a_scale) {
        scratch_put(&value_buffer);
        scratch_put(&scale_buffer);
        return kr_fail(err, "out of memory decoding MXFP4 activations");
    }
    act_mxfp4_values(act, a_value, a_scale, opt->threads);
    const tile_gemm_t g = {.M = M, .N = in->N, .K = K, .x = a_value, .x_block = a_scale,
                           .out = out};
    weight_tile_gemm_blocks(&g, &in->weight, opt->threads);
    scratch_put(&value_buffer);
    scratch_put(&scale_buffer);
    return 0;
}

const kernel_desc_t kernel_w4a4_aiter = {
    .name = "w4a4.aiter",
    .family = "w4a4",
    .summary = "MXFP4 x MXFP4 (aiter gemm_with_dynamic_quant), activations quantized aiter-even",
    .act_format = "mxfp4 per 32-block (e2m1 + e8m0), quantized from x",
    .weight_format = "mxfp4: e2m1 [N,K/2] + e8m0 per 32 along K",
    .act = OPERAND_MXFP4,
    .weight = OPERAND_MXFP4,
    .accumulation = "per 32-block: s += a*w over k ascending (exact); "
                    "acc += s * (2^(Ea-127) * 2^(Ew-127)) over blocks ascending; out = bf16(acc)",
    KERNEL_ANY_M_K32,
    .refs = REF_EXACT | REF_SOURCE,
    .rel_tol_exact = 0.01,
    .rel_tol_source = 0.25,
    .prepare_act = act_prepare_mxfp4,
    .run_cpu = w4a4_aiter_run,
    .gpu_entry = KERNEL_GPU_W4A4_AITER,
    .compare_role = COMPARE_ROLE_W4A4_EMULATION,
};
