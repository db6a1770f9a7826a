/* The straightforward formulas the format decoders, encoders and quantizers
 * were first written with, kept verbatim as oracles for their faster forms
 * (decode tables, bit-built powers of two, branch-free encoders, integer
 * amax).  The fast forms must give the same bits for every input; the tests
 * that include this header check that exhaustively where the input space
 * allows (every code, every byte, every fp32) and on structured sweeps
 * otherwise.  Only tests include it. */
#ifndef KR_FAST_PATH_ORACLES_H
#define KR_FAST_PATH_ORACLES_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "formats.h"
#include "quant_fp8.h"
#include "quant_mxfp4.h"

/* libm's fmaxf through a volatile pointer: the compiler treats fmaxf as
 * commutative and may swap its operands, which for two NaNs changes the
 * result; a call through the pointer keeps the order written. */
static float (*volatile oracle_libm_fmaxf)(float, float) = fmaxf;

/* ---- formats ---- */

static inline float oracle_e4m3_magnitude(uint8_t mag, int bias)
{
    int exponent = mag >> 3;
    int mantissa = mag & 7;
    if (exponent == 0)
        return ldexpf((float)mantissa, 1 - bias - 3);
    return ldexpf((float)(8 + mantissa), exponent - bias - 3);
}

static inline float oracle_e4m3fn_decode(uint8_t code)
{
    uint8_t mag = code & 0x7F;
    if (mag == 0x7F)
        return (code & 0x80) ? -NAN : NAN;
    float v = oracle_e4m3_magnitude(mag, 7);
    return (code & 0x80) ? -v : v;
}

static inline float oracle_e4m3fnuz_decode(uint8_t code)
{
    if (code == 0x80)
        return NAN;
    float v = oracle_e4m3_magnitude(code & 0x7F, 8);
    return (code & 0x80) ? -v : v;
}

static inline float oracle_e2m1_decode(uint8_t code)
{
    static const float magnitudes[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    float v = magnitudes[code & 7];
    return (code & 8) ? -v : v;
}

static inline uint8_t oracle_e2m1_encode_rne(float x)
{
    static const float midpoints[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
    uint8_t sign = signbit(x) ? 8 : 0;
    float a = fabsf(x);
    if (isnan(a))
        return sign;
    uint8_t code = 0;
    for (int i = 0; i < 7; i++) {
        int lower_is_odd = i & 1;
        if (lower_is_odd ? a >= midpoints[i] : a > midpoints[i])
            code = (uint8_t)(i + 1);
    }
    return code | sign;
}

static inline float oracle_e8m0_decode(uint8_t b, e8m0_mode_t mode)
{
    if (b == 0xFF)
        return NAN;
    if (b == 0 && mode == E8M0_ZERO_IS_ZERO)
        return 0.0f;
    return ldexpf(1.0f, (int)b - 127);
}

static inline uint16_t oracle_bf16_encode(float x)
{
    uint32_t u = f32_bits(x);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u)
        return (uint16_t)(0x7FC0u | ((u >> 16) & 0x8000u));
    return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

/* ---- aiter-even MXFP4 ---- */

static inline uint8_t oracle_aiter_e2m1_from_scaled(float qx)
{
    uint32_t bits = f32_bits(qx);
    uint32_t sign = bits & 0x80000000u;
    uint32_t mag = bits ^ sign;
    float f = f32_from_bits(mag);
    bool saturate = f >= 6.0f;
    bool denormal = !saturate && f < 1.0f;
    bool normal = !(saturate || denormal);
    const uint32_t denorm_bits = 149u << 23;
    uint8_t denormal_code = (uint8_t)(f32_bits(f + f32_from_bits(denorm_bits)) - denorm_bits);
    uint32_t mantissa_odd = (mag >> 22) & 1u;
    uint32_t v = mag + ((uint32_t)(1 - 127) << 23) + (1u << 21) - 1u + mantissa_odd;
    uint8_t normal_code = (uint8_t)(v >> 22);
    uint8_t code = saturate ? 0x7 : (normal ? normal_code : denormal_code);
    return code | (uint8_t)(sign >> 28);
}

static inline int oracle_clamp_scale_exponent(int e)
{
    return e < -127 ? -127 : (e > 127 ? 127 : e);
}

static inline void oracle_mxfp4_quant_block(const float *x, mxfp4_variant_t v, uint8_t codes[32],
                                            uint8_t *scale_byte)
{
    if (v == MXFP4_OCP || v == MXFP4_CEIL) {
        for (int i = 0; i < 32; i++)
            if (!isfinite(x[i])) {
                memset(codes, 0, 32);
                *scale_byte = 0xFF;
                return;
            }
        float amax = 0.0f;
        for (int i = 0; i < 32; i++)
            amax = fmaxf(amax, fabsf(x[i]));
        int e;
        if (amax == 0.0f) {
            e = -127;
        } else {
            int ex;
            float m = frexpf(amax, &ex);
            e = v == MXFP4_OCP ? ex - 1 - 2 : (m <= 0.75f ? ex - 3 : ex - 2);
            e = oracle_clamp_scale_exponent(e);
        }
        *scale_byte = (uint8_t)(e + 127);
        float inverse_scale = ldexpf(1.0f, -e);
        for (int i = 0; i < 32; i++)
            codes[i] = oracle_e2m1_encode_rne(x[i] * inverse_scale);
        return;
    }
    /* The original fold, in the operand order GCC 12 -O3 compiled it with. */
    float amax = fabsf(x[0]);
    for (int i = 1; i < 32; i++)
        amax = oracle_libm_fmaxf(fabsf(x[i]), amax);
    uint32_t a = (f32_bits(amax) + 0x200000u) & 0xFF800000u;
    uint32_t exponent_field = (a >> 23) & 0xFF;
    int e = exponent_field == 0      ? -127
            : exponent_field == 0xFF ? 127
                                     : oracle_clamp_scale_exponent((int)exponent_field - 129);
    *scale_byte = (uint8_t)(e + 127);
    float quant_scale = ldexpf(1.0f, -e);
    for (int i = 0; i < 32; i++)
        codes[i] = oracle_aiter_e2m1_from_scaled(x[i] * quant_scale);
}

static inline void oracle_mxfp4_act_dequant(const uint8_t *codes, const uint8_t *scales,
                                            int64_t M, int64_t K, float *out)
{
    int64_t blocks = K / 32;
    for (int64_t m = 0; m < M; m++)
        for (int64_t b = 0; b < blocks; b++) {
            float s = oracle_e8m0_decode(scales[m * blocks + b], E8M0_SPEC);
            for (int i = 0; i < 32; i++) {
                int64_t k = b * 32 + i;
                out[m * K + k] = oracle_e2m1_decode(codes[m * K + k]) * s;
            }
        }
}

/* ---- fp8 per token ---- */

static inline uint8_t oracle_fp8_encode(fp8_format_t fmt, float r, fp8_overflow_t ovf)
{
    return fmt == FP8_E4M3FNUZ ? e4m3fnuz_encode(r, ovf) : e4m3fn_encode(r, ovf);
}

static inline void oracle_fp8_token_quant_row(const float *x, int64_t K, fp8_token_variant_t v,
                                              fp8_format_t fmt, uint8_t *q, float *scale)
{
    const float q_max = fmt == FP8_E4M3FNUZ ? 224.0f : 448.0f;
    const float q_max_reciprocal = (float)(1.0 / (double)q_max);
    const float min_scale = 1.0f / (q_max * 512.0f);
    if (v == FP8_TOKEN_VLLM || v == FP8_TOKEN_RECIPROCAL) {
        float amax = 0.0f;
        for (int64_t k = 0; k < K; k++)
            amax = oracle_libm_fmaxf(amax, fabsf(x[k]));
        float s = fmaxf(amax / q_max, min_scale);
        float inv_s = 1.0f / s;
        for (int64_t k = 0; k < K; k++) {
            float scaled = v == FP8_TOKEN_RECIPROCAL ? x[k] * inv_s : x[k] / s;
            float r = fmaxf(-q_max, fminf(scaled, q_max));
            q[k] = oracle_fp8_encode(fmt, r, FP8_SATURATE);
        }
        *scale = s;
        return;
    }
    float amax = 0.0f;
    for (int64_t k = 0; k < K; k++) {
        float a = fabsf(x[k]);
        if (isnan(a)) {
            amax = a;
            break;
        }
        if (a > amax)
            amax = a;
    }
    float s;
    if (v == FP8_TOKEN_PURE)
        s = (isnan(amax) ? amax : (amax < 1e-12f ? 1e-12f : amax)) * q_max_reciprocal;
    else {
        float t = amax * q_max_reciprocal;
        s = isnan(t) ? t : (t < min_scale ? min_scale : t);
    }
    for (int64_t k = 0; k < K; k++) {
        float r = x[k] / s;
        if (!isnan(r))
            r = r < -q_max ? -q_max : (r > q_max ? q_max : r);
        q[k] = oracle_fp8_encode(fmt, r, FP8_OVERFLOW_NAN);
    }
    *scale = s;
}

static inline void oracle_fp8_token_dequant(const uint8_t *q, const float *scale, int64_t M,
                                            int64_t K, fp8_format_t fmt, float *out)
{
    for (int64_t m = 0; m < M; m++)
        for (int64_t k = 0; k < K; k++) {
            uint8_t c = q[m * K + k];
            float d = fmt == FP8_E4M3FNUZ ? oracle_e4m3fnuz_decode(c) : oracle_e4m3fn_decode(c);
            out[m * K + k] = d * scale[m];
        }
}

#endif
