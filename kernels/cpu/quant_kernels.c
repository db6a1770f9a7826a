/* quant.*: the activation quantizers as kernels of their own.  The GPU runs
 * them as separate launches (vLLM's dynamic_per_token_scaled_fp8_quant,
 * aiter's dynamic MXFP4 quant), so they are checked like any kernel: against
 * the exact rule they implement, and for how they treat NaN and Inf.
 *
 * The model of each is the reference/ quantizer of the same name; a replay
 * row compares the dequantized operand with x itself (reference "x"), and
 * the row's note says how non-finite inputs were propagated.
 *
 * Order: per-token fp8 reduces amax over the row (max is order-free, NaN
 * handling aside) and quantizes each element independently; MXFP4 does the
 * same per 32-block.  No sums: the bits are fixed by the rule alone. */
#include <stdio.h>

#include "act_prepare.h"
#include "registry.h"

/* The quantizer is the descriptor's act operand; config is its variant. */
static int quant_prepare(const kernel_desc_t *k, const kernel_inputs_t *in,
                         const kernel_options_t *opt, kernel_act_t *act, kr_error_t *err)
{
    kernel_options_t o = *opt;
    o.act_source = ACT_SOURCE_QUANTIZE;
    if (k->act.scale == SCALE_E8M0_PER_BLOCK) {
        o.mxfp4_variant = (mxfp4_variant_t)k->config;
        return act_prepare_mxfp4(k, in, &o, act, err);
    }
    o.fp8_variant = (fp8_token_variant_t)k->config;
    return act_prepare_fp8_token(k, in, &o, act, err);
}

/* What one quantizer family's descriptors share. */
#define QUANT_KERNEL(sym, kname, variant, gpu, text, act_text, act_operand, accum, kmul, tol)   \
    const kernel_desc_t sym = {                                                               \
        .name = kname,                                                                        \
        .family = "quant",                                                                    \
        .summary = text,                                                                      \
        .act_format = act_text,                                                               \
        .weight_format = "-",                                                                 \
        .act = act_operand,                                                                   \
        .weight = OPERAND_NONE,                                                               \
        .accumulation = accum,                                                                \
        .k_multiple = kmul,                                                                   \
        .m_min = 1,                                                                           \
        .refs = 0,                                                                            \
        .rel_tol_source = tol,                                                                \
        .op = KERNEL_OP_QUANT,                                                                \
        .config = variant,                                                                    \
        .prepare_act = quant_prepare,                                                         \
        .gpu_entry = gpu,                                                                     \
    }

#define QUANT_FP8(sym, kname, variant, gpu, text)                                             \
    QUANT_KERNEL(sym, kname, variant, gpu, text,                                              \
                 "x (bf16 or fp32) -> e4m3fn codes + fp32 scale per row",                     \
                 OPERAND_E4M3FN_PER_TOKEN,                                                    \
                 "none: amax over the row, then each element independently", 1, 0.06)

#define QUANT_MXFP4(sym, kname, variant, gpu, text)                                           \
    QUANT_KERNEL(sym, kname, variant, gpu, text,                                              \
                 "x (bf16 or fp32) -> e2m1 codes + e8m0 scale per 32-block", OPERAND_MXFP4,   \
                 "none: amax per 32-block, then each element independently", 32, 0.3)

QUANT_FP8(kernel_quant_fp8_token, "quant.fp8_token", FP8_TOKEN_VLLM, KERNEL_GPU_QUANT_FP8_TOKEN,
          "vLLM per-token fp8 (NaN-ignoring amax, NaN -> +448, 1/(448*512) scale floor)");
QUANT_FP8(kernel_quant_fp8_token_traced, "quant.fp8_token.traced", FP8_TOKEN_TRACED, KERNEL_GPU_NONE,
          "the dispatch's traced torch quant (amax propagates NaN: one NaN poisons the row)");
QUANT_FP8(kernel_quant_fp8_token_pure, "quant.fp8_token.pure", FP8_TOKEN_PURE, KERNEL_GPU_NONE,
          "RADIANCE_MXFP4_PUREQUANT (amax clamp 1e-12, no 1/(448*512) floor)");
QUANT_MXFP4(kernel_quant_mxfp4, "quant.mxfp4", MXFP4_AITER_EVEN, KERNEL_GPU_QUANT_MXFP4,
            "aiter dynamic MXFP4 (amax rounded up at 1.75, NaN lands on a finite code)");
QUANT_MXFP4(kernel_quant_mxfp4_ocp, "quant.mxfp4.ocp", MXFP4_OCP, KERNEL_GPU_NONE,
            "OCP MX v1.0 scale rule (floor(log2 amax) - 2, RNE, saturate)");
QUANT_MXFP4(kernel_quant_mxfp4_ceil, "quant.mxfp4.ceil", MXFP4_CEIL, KERNEL_GPU_NONE,
            "newer aiter HIP rule (scale = ceil_pow2(amax / 6))");
