#include "gpu_standin.h"

#include <stdlib.h>
#include <string.h>

#include "formats.h"
#include "kr_gpu.h"

/* The inputs the CPU model reads, rebuilt from the twin's operands. */
static kernel_inputs_t standin_inputs(const kr_gpu_operands_t *o)
{
    return (kernel_inputs_t){
        .M = o->M, .N = o->N, .K = o->K,
        .x = o->xf,
        .weight = {.packed = o->w.packed, .scales = o->w.scales,
                   .layout = o->w.scale_layout ? SCALE_LAYOUT_KN : SCALE_LAYOUT_NK,
                   .e8m0_mode = o->w.e8m0_zero_is_zero ? E8M0_ZERO_IS_ZERO : E8M0_SPEC,
                   .N = o->w.N, .K = o->w.K},
        .weight_ref = o->case_ref, .weight_ref_len = o->case_ref ? o->N : 0,
        .weight_bf16 = o->w_bf16,
        .dispatch_M = o->dispatch_M,
    };
}

static int standin_quantize(const kernel_desc_t *k, const kernel_options_t *kopt,
                            const kr_gpu_operands_t *o)
{
    const kernel_inputs_t in = standin_inputs(o);
    kernel_act_t act;
    kr_error_t err = {{0}};
    if (k->prepare_act(k, &in, kopt, &act, &err))
        return KR_GPU_ERR_ARG;
    memcpy(o->out, act.codes, (size_t)o->M * (size_t)o->K);
    if (act.kind == ACT_FP8_PER_TOKEN)
        memcpy(o->scale_out, act.token_scale, (size_t)o->M * sizeof(float));
    else
        memcpy(o->scale_out, act.block_scale, (size_t)o->M * (size_t)(o->K / k->act.block));
    kernel_act_free(&act);
    return KR_GPU_OK;
}

/* What the fault kernels of kr_gpu.h do to an output, done to the model's. */
static void standin_fault(const char *fault, const kr_gpu_operands_t *o, int launch)
{
    uint16_t *out = o->out;
    const int64_t MN = o->M * o->N;
    if (!strcmp(fault, "oob")) {
        out[MN] = 0x3F80;   /* 1.0, one element past the end: on the canary */
    } else if (!strcmp(fault, "unwritten")) {
        const int64_t n0 = o->N > 32 ? o->N - 32 : 0;
        for (int64_t m = 0; m < o->M; m++)
            for (int64_t n = n0; n < o->N; n++)
                out[m * o->N + n] = 0x7FC1;
    } else if (!strcmp(fault, "race") && launch > 1 && MN > 0) {
        out[(launch * 7919) % MN] ^= 1;   /* another arrival order: one sum rounds apart */
    }
}

int gpu_standin_launch(const kernel_desc_t *k, const kernel_options_t *kopt,
                       const kr_gpu_operands_t *o, int matrix, const char *fault, int launch)
{
    if (matrix)
        return KR_GPU_ERR_UNSUPPORTED;
    if (k->op == KERNEL_OP_QUANT)
        return standin_quantize(k, kopt, o);
    const kernel_inputs_t in = standin_inputs(o);
    const kernel_act_t act = {
        .kind = k->act.elem == ELEM_E2M1 ? ACT_MXFP4_PER_BLOCK : ACT_FP8_PER_TOKEN,
        .M = o->M, .K = o->K,
        .codes = (uint8_t *)o->x, .token_scale = (float *)o->xs,
        .block_scale = (uint8_t *)o->a_scales, .fp8_format = o->x_fmt ? FP8_E4M3FNUZ : FP8_E4M3FN,
        .dequant = (float *)o->x_dequant,
    };
    kernel_run_info_t info = {{0}};
    kr_error_t err = {{0}};
    if (k->run_cpu(k, &in, &act, kopt, o->out, &info, &err))
        return KR_GPU_ERR_ARG;
    if (fault)
        standin_fault(fault, o, launch);
    return KR_GPU_OK;
}
