#include "quant_fp8.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "formats.h"
#include "name_table.h"

static const char *const fp8_token_variant_names[FP8_TOKEN_VARIANT_COUNT] = {
    [FP8_TOKEN_VLLM] = "vllm",
    [FP8_TOKEN_TRACED] = "traced",
    [FP8_TOKEN_PURE] = "pure",
    [FP8_TOKEN_RECIPROCAL] = "reciprocal",
};

NAME_TABLE_LOOKUPS(fp8_token_variant, fp8_token_variant_t, fp8_token_variant_names)

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

/* vLLM's per-thread fold: fmaxf from 0 never becomes NaN.  Without a NaN in
 * the row the fold is the plain maximum; with one, libm's fmaxf itself is
 * folded, since it treats a signaling NaN unlike a quiet one. */
static float amax_ignoring_nan(const float *x, int64_t K)
{
    const uint32_t m = f32_abs_max_bits(x, K);
    if (m <= F32_INF_BITS)
        return f32_from_bits(m);
    float amax = 0.0f;
    for (int64_t k = 0; k < K; k++)
        amax = fmaxf(amax, fabsf(x[k]));
    return amax;
}

/* torch.amax: any NaN makes the result NaN (the first one's magnitude). */
static float amax_propagating_nan(const float *x, int64_t K)
{
    const uint32_t m = f32_abs_max_bits(x, K);
    if (m <= F32_INF_BITS)
        return f32_from_bits(m);
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

/* torch.clamp_min: NaN passes through. */
static float torch_clamp_min(float v, float lo)
{
    return isnan(v) ? v : (v < lo ? lo : v);
}

/* fmaxf(-Q, fminf(v, Q)) for a v that is not a signaling NaN (a quotient or
 * a product never is): a quiet NaN gives +Q, as fminf(NaN, Q) = Q; anything
 * beyond +-Q (Inf included) gives +-Q; the rest, +-0 included, is v.  Done
 * on the bits -- for the magnitudes the integer order is the numeric order --
 * so a loop of it vectorizes without trapping float compares. */
static inline float clamp_to_q(float v, uint32_t q_bits)
{
    const uint32_t u = f32_bits(v), mag = u & 0x7FFFFFFFu;
    const uint32_t beyond = (u & 0x80000000u) && mag <= F32_INF_BITS ? q_bits | 0x80000000u
                                                                      : q_bits;
    return f32_from_bits(mag > q_bits ? beyond : u);
}

/* The element step of vllm and reciprocal, one loop per format and division
 * so each vectorizes.  The clamped value is never NaN and within +-Q, which
 * is at most the format's maximum, so the in-range encoders give
 * e*_encode(r, FP8_SATURATE) exactly. */
#define VLLM_ELEMENT_LOOP(SCALED, ENCODE)                                                     \
    for (int64_t k = 0; k < K; k++)                                                           \
        q[k] = ENCODE(clamp_to_q((SCALED), q_bits));

/* vLLM dynamic_per_token_scaled_fp8_quant_kernel_strided + scaled_fp8_conversion
 * (csrc/quantization/w8a8/fp8/common.cu{,h}): true division by the scale,
 * then fmaxf/fminf, which send NaN to +Q. */
static void quant_row_vllm(const fp8_target_t *t, const float *x, int64_t K, bool reciprocal,
                           uint8_t *q, float *scale)
{
    const float s = fmaxf(amax_ignoring_nan(x, K) / t->q_max, t->min_scale);
    const uint32_t q_bits = f32_bits(t->q_max);
    const float inv_s = 1.0f / s;
    if (t->fmt == FP8_E4M3FNUZ) {
        if (reciprocal)
            VLLM_ELEMENT_LOOP(x[k] * inv_s, e4m3fnuz_encode_in_range)
        else
            VLLM_ELEMENT_LOOP(x[k] / s, e4m3fnuz_encode_in_range)
    } else {
        if (reciprocal)
            VLLM_ELEMENT_LOOP(x[k] * inv_s, e4m3fn_encode_in_range)
        else
            VLLM_ELEMENT_LOOP(x[k] / s, e4m3fn_encode_in_range)
    }
    *scale = s;
}

/* torch ops on the GPU.  `tensor * python_float` and `tensor / python_float`
 * both become a multiply by an fp32 constant there (ATen's
 * div_true_kernel_cuda multiplies by the reciprocal of a CPU scalar), so
 * traced and pure share amax * fp32(1/Q); they differ in the order of the
 * clamp and in its bound.  torch.clamp keeps NaN, and the cast
 * (FP8_OVERFLOW_NAN) turns it into the format's NaN code; every other
 * clamped value is within +-Q, where the in-range encoders are exact. */
static void quant_row_torch(const fp8_target_t *t, const float *x, int64_t K, bool pure,
                            uint8_t *q, float *scale)
{
    float amax = amax_propagating_nan(x, K);
    float s;
    if (pure)
        s = torch_clamp_min(amax, 1e-12f) * t->q_max_reciprocal;
    else
        s = torch_clamp_min(amax * t->q_max_reciprocal, t->min_scale);
    const float q_max = t->q_max;
    const int fnuz = t->fmt == FP8_E4M3FNUZ;
    for (int64_t k = 0; k < K; k++) {
        const float v = x[k] / s;
        if (isnan(v)) {
            q[k] = fp8_encode(t, v, FP8_OVERFLOW_NAN);
            continue;
        }
        const float r = v < -q_max ? -q_max : (v > q_max ? q_max : v);
        q[k] = fnuz ? e4m3fnuz_encode_in_range(r) : e4m3fn_encode_in_range(r);
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
    /* The decode is computed from the bits, not looked up, so each loop
     * vectorizes; the values are the tables' (formats.h). */
    for (int64_t m = 0; m < M; m++) {
        const float s = scale[m];
        const uint8_t *qm = q + m * K;
        float *om = out + m * K;
        if (fmt == FP8_E4M3FNUZ)
            for (int64_t k = 0; k < K; k++)
                om[k] = e4m3fnuz_decode_bits_of(qm[k]) * s;
        else
            for (int64_t k = 0; k < K; k++)
                om[k] = e4m3fn_decode_bits_of(qm[k]) * s;
    }
}
