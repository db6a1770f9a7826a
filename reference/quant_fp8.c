#include "quant_fp8.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "formats.h"

static const char *const fp8_token_variant_names[FP8_TOKEN_VARIANT_COUNT] = {
    [FP8_TOKEN_VLLM] = "vllm",
    [FP8_TOKEN_TRACED] = "traced",
    [FP8_TOKEN_PURE] = "pure",
    [FP8_TOKEN_RECIPROCAL] = "reciprocal",
};

const char *fp8_token_variant_name(fp8_token_variant_t v)
{
    if ((unsigned)v < FP8_TOKEN_VARIANT_COUNT)
        return fp8_token_variant_names[v];
    return "unknown";
}

int fp8_token_variant_from_name(const char *name, fp8_token_variant_t *out)
{
    for (int v = 0; v < FP8_TOKEN_VARIANT_COUNT; v++) {
        if (name && strcmp(name, fp8_token_variant_names[v]) == 0) {
            *out = (fp8_token_variant_t)v;
            return 0;
        }
    }
    return -1;
}

/* The constants every variant derives from Q.  They are the fp32 values the
 * GPU code ends up with: vLLM computes 1.0f / (Q * 512.0f) in fp32, the
 * dispatch computes 1.0 / (448.0 * 512.0) in Python double and torch
 * narrows it to fp32; both are the correctly rounded 1/(Q*512), so one
 * constant serves both.  Likewise for 1/Q. */
typedef struct {
    float q_max;
    float q_max_reciprocal;
    float min_scale;
    fp8_format_t fmt;
} fp8_target_t;

static fp8_target_t fp8_target(fp8_format_t fmt)
{
    fp8_target_t t;
    t.fmt = fmt;
    /* 224, not 240, on fnuz: vLLM's quant_type_max for gfx942. */
    t.q_max = fmt == FP8_E4M3FNUZ ? 224.0f : 448.0f;
    t.q_max_reciprocal = (float)(1.0 / (double)t.q_max);
    t.min_scale = 1.0f / (t.q_max * 512.0f);
    return t;
}

static uint8_t fp8_encode(const fp8_target_t *t, float r, fp8_overflow_t ovf)
{
    return t->fmt == FP8_E4M3FNUZ ? e4m3fnuz_encode(r, ovf) : e4m3fn_encode(r, ovf);
}

/* vLLM's per-thread fold: fmaxf from 0 never becomes NaN. */
static float amax_ignoring_nan(const float *x, int64_t K)
{
    float amax = 0.0f;
    for (int64_t k = 0; k < K; k++)
        amax = fmaxf(amax, fabsf(x[k]));
    return amax;
}

/* torch.amax: any NaN makes the result NaN. */
static float amax_propagating_nan(const float *x, int64_t K)
{
    float amax = 0.0f;
    for (int64_t k = 0; k < K; k++) {
        float a = fabsf(x[k]);
        if (isnan(a))
            return a;
        if (a > amax)
            amax = a;
    }
    return amax;
}

/* torch.clamp_min / clamp: NaN passes through. */
static float torch_clamp_min(float v, float lo)
{
    return isnan(v) ? v : (v < lo ? lo : v);
}

static float torch_clamp(float v, float lo, float hi)
{
    if (isnan(v))
        return v;
    return v < lo ? lo : (v > hi ? hi : v);
}

/* vLLM dynamic_per_token_scaled_fp8_quant_kernel_strided + scaled_fp8_conversion
 * (csrc/quantization/w8a8/fp8/common.cu{,h}): true division by the scale,
 * then fmaxf/fminf, which send NaN to +Q. */
static void quant_row_vllm(const fp8_target_t *t, const float *x, int64_t K, bool reciprocal,
                           uint8_t *q, float *scale)
{
    float s = fmaxf(amax_ignoring_nan(x, K) / t->q_max, t->min_scale);
    float inv_s = 1.0f / s;
    for (int64_t k = 0; k < K; k++) {
        float scaled = reciprocal ? x[k] * inv_s : x[k] / s;
        float r = fmaxf(-t->q_max, fminf(scaled, t->q_max));
        q[k] = fp8_encode(t, r, FP8_SATURATE);
    }
    *scale = s;
}

/* torch ops on the GPU.  `tensor * python_float` and `tensor / python_float`
 * both become a multiply by an fp32 constant there (ATen's
 * div_true_kernel_cuda multiplies by the reciprocal of a CPU scalar), so
 * traced and pure share amax * fp32(1/Q); they differ in the order of the
 * clamp and in its bound. */
static void quant_row_torch(const fp8_target_t *t, const float *x, int64_t K, bool pure,
                            uint8_t *q, float *scale)
{
    float amax = amax_propagating_nan(x, K);
    float s;
    if (pure)
        s = torch_clamp_min(amax, 1e-12f) * t->q_max_reciprocal;
    else
        s = torch_clamp_min(amax * t->q_max_reciprocal, t->min_scale);
    for (int64_t k = 0; k < K; k++) {
        float r = torch_clamp(x[k] / s, -t->q_max, t->q_max);
        q[k] = fp8_encode(t, r, FP8_OVERFLOW_NAN);
    }
    *scale = s;
}

void fp8_token_quant_row(const float *x, int64_t K, fp8_token_variant_t v, fp8_format_t fmt,
                         uint8_t *q, float *scale)
{
    fp8_target_t t = fp8_target(fmt);
    switch (v) {
    case FP8_TOKEN_TRACED:
        quant_row_torch(&t, x, K, false, q, scale);
        break;
    case FP8_TOKEN_PURE:
        quant_row_torch(&t, x, K, true, q, scale);
        break;
    case FP8_TOKEN_RECIPROCAL:
        quant_row_vllm(&t, x, K, true, q, scale);
        break;
    case FP8_TOKEN_VLLM:
    default:
        quant_row_vllm(&t, x, K, false, q, scale);
        break;
    }
}

void fp8_token_quant(const float *x, int64_t M, int64_t K, fp8_token_variant_t v,
                     fp8_format_t fmt, uint8_t *q, float *scale)
{
    for (int64_t m = 0; m < M; m++)
        fp8_token_quant_row(x + m * K, K, v, fmt, q + m * K, scale + m);
}

void fp8_token_dequant(const uint8_t *q, const float *scale, int64_t M, int64_t K,
                       fp8_format_t fmt, float *out)
{
    float decoded[256];
    for (int c = 0; c < 256; c++)
        decoded[c] = fmt == FP8_E4M3FNUZ ? e4m3fnuz_decode((uint8_t)c) : e4m3fn_decode((uint8_t)c);
    for (int64_t m = 0; m < M; m++) {
        float s = scale[m];
        for (int64_t k = 0; k < K; k++)
            out[m * K + k] = decoded[q[m * K + k]] * s;
    }
}
