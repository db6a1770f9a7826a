#include "act_prepare.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void kernel_act_free(kernel_act_t *a)
{
    free(a->codes);
    free(a->token_scale);
    free(a->block_scale);
    free(a->dequant);
    memset(a, 0, sizeof *a);
}

static int act_alloc(kernel_act_t *act, act_kind_t kind, int64_t M, int64_t K, kr_error_t *err)
{
    memset(act, 0, sizeof *act);
    act->kind = kind;
    act->M = M;
    act->K = K;
    size_t mk = (size_t)M * (size_t)K;
    act->codes = malloc(mk);
    act->dequant = malloc(mk * sizeof(float));
    if (kind == ACT_FP8_PER_TOKEN)
        act->token_scale = malloc((size_t)M * sizeof(float));
    else
        act->block_scale = malloc((size_t)M * (size_t)(K / 32));
    if (!act->codes || !act->dequant || (!act->token_scale && !act->block_scale)) {
        kernel_act_free(act);
        return kr_fail(err, "out of memory for activations [%lld, %lld]", (long long)M,
                       (long long)K);
    }
    return 0;
}

int act_prepare_fp8_token(const kernel_desc_t *k, const kernel_inputs_t *in,
                          const kernel_options_t *opt, kernel_act_t *act, kr_error_t *err)
{
    (void)k;
    const int have_recorded = in->x_fp8 && in->x_scale;
    const int use_recorded =
        opt->act_source == ACT_SOURCE_RECORDED ||
        (opt->act_source == ACT_SOURCE_AUTO && have_recorded);
    if (use_recorded && !have_recorded)
        return kr_fail(err, "the case has no recorded x_fp8/x_scale to replay");
    if (!use_recorded && !in->x)
        return kr_fail(err, "the case has no source activations x to quantize");

    fp8_format_t fmt = use_recorded ? in->x_fp8_format : FP8_E4M3FN;
    if (act_alloc(act, ACT_FP8_PER_TOKEN, in->M, in->K, err))
        return -1;
    act->fp8_format = fmt;
    if (use_recorded) {
        memcpy(act->codes, in->x_fp8, (size_t)in->M * (size_t)in->K);
        memcpy(act->token_scale, in->x_scale, (size_t)in->M * sizeof(float));
        snprintf(act->origin, sizeof act->origin, "recorded x_fp8/x_scale");
    } else {
        fp8_token_quant(in->x, in->M, in->K, opt->fp8_variant, fmt, act->codes,
                        act->token_scale);
        snprintf(act->origin, sizeof act->origin, "x quantized per token (%s)",
                 fp8_token_variant_name(opt->fp8_variant));
    }
    fp8_token_dequant(act->codes, act->token_scale, in->M, in->K, fmt, act->dequant);
    return 0;
}

int act_prepare_mxfp4(const kernel_desc_t *k, const kernel_inputs_t *in,
                      const kernel_options_t *opt, kernel_act_t *act, kr_error_t *err)
{
    (void)k;
    if (opt->act_source == ACT_SOURCE_RECORDED)
        return kr_fail(err, "MXFP4 activations are quantized from x; none are recorded");
    if (!in->x)
        return kr_fail(err, "the case has no source activations x to quantize to MXFP4");
    if (act_alloc(act, ACT_MXFP4_PER_BLOCK, in->M, in->K, err))
        return -1;
    mxfp4_quant(in->x, in->M, in->K, opt->mxfp4_variant, act->codes, act->block_scale);
    mxfp4_act_dequant(act->codes, act->block_scale, in->M, in->K, act->dequant);
    snprintf(act->origin, sizeof act->origin, "x quantized to MXFP4 (%s)",
             mxfp4_variant_name(opt->mxfp4_variant));
    return 0;
}

float *act_fp8_values(const kernel_act_t *act)
{
    const size_t mk = (size_t)act->M * (size_t)act->K;
    float *v = malloc(mk * sizeof(float));
    if (!v)
        return NULL;
    float lut[256];
    for (int c = 0; c < 256; c++)
        lut[c] = act->fp8_format == FP8_E4M3FN ? e4m3fn_decode((uint8_t)c)
                                               : e4m3fnuz_decode((uint8_t)c);
    for (size_t i = 0; i < mk; i++)
        v[i] = lut[act->codes[i]];
    return v;
}

int act_prepare_bf16_values(const kernel_inputs_t *in, kernel_act_t *act, kr_error_t *err)
{
    const size_t mk = (size_t)in->M * (size_t)in->K;
    memset(act, 0, sizeof *act);
    act->kind = ACT_FP8_PER_TOKEN;      /* no bf16 kind exists: codes/scales stay NULL */
    act->M = in->M;
    act->K = in->K;
    act->dequant = malloc(mk * sizeof(float));
    if (!act->dequant)
        return kr_fail(err, "out of memory for activations [%lld, %lld]", (long long)in->M,
                       (long long)in->K);
    size_t rounded = 0;
    for (size_t i = 0; i < mk; i++) {
        const float v = bf16_decode(bf16_encode(in->x[i]));
        rounded += f32_bits(v) != f32_bits(in->x[i]) && in->x[i] == in->x[i];
        act->dequant[i] = v;
    }
    if (rounded)
        snprintf(act->origin, sizeof act->origin, "x as bf16 (%zu values rounded from fp32)",
                 rounded);
    else
        snprintf(act->origin, sizeof act->origin, "x as bf16");
    return 0;
}
