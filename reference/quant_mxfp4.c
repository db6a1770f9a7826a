#include "quant_mxfp4.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "formats.h"

static const char *const mxfp4_variant_names[MXFP4_VARIANT_COUNT] = {
    [MXFP4_AITER_EVEN] = "aiter-even",
    [MXFP4_OCP] = "ocp",
    [MXFP4_CEIL] = "ceil",
};

const char *mxfp4_variant_name(mxfp4_variant_t v)
{
    if ((unsigned)v < MXFP4_VARIANT_COUNT)
        return mxfp4_variant_names[v];
    return "unknown";
}

int mxfp4_variant_from_name(const char *name, mxfp4_variant_t *out)
{
    for (int v = 0; v < MXFP4_VARIANT_COUNT; v++) {
        if (name && strcmp(name, mxfp4_variant_names[v]) == 0) {
            *out = (mxfp4_variant_t)v;
            return 0;
        }
    }
    return -1;
}

#define MX_SCALE_EXP_MIN (-127)
#define MX_SCALE_EXP_MAX 127
#define E8M0_NAN 0xFF

static int clamp_scale_exponent(int e)
{
    return e < MX_SCALE_EXP_MIN ? MX_SCALE_EXP_MIN : (e > MX_SCALE_EXP_MAX ? MX_SCALE_EXP_MAX : e);
}

/* ---- aiter-even: aiter/ops/triton/_triton_kernels/quant/quant.py ---- */

/* Triton's tl.max(tl.abs(x)) reduces with maxnum and has no identity
 * element: NaNs are skipped unless the whole block is NaN, in which case
 * the result is a NaN. */
static float triton_block_amax(const float *x)
{
    float amax = fabsf(x[0]);
    for (int i = 1; i < MX_BLOCK; i++)
        amax = fmaxf(amax, fabsf(x[i]));
    return amax;
}

/* _mxfp4_scale_op: e = clamp(floor(log2(a)) - 2, -127, 127) where a is amax
 * with its significand rounded up to the next power of two from 1.75 on.
 * a is +-0, a power of two or +Inf, so log2 is read off the exponent field.
 * (-0 arises from an all-NaN block whose NaN payload carries into the sign.) */
static int aiter_scale_exponent(float amax)
{
    uint32_t a = (f32_bits(amax) + 0x200000u) & 0xFF800000u;
    uint32_t exponent_field = (a >> 23) & 0xFF;
    if (exponent_field == 0)          /* +-0: log2 = -inf */
        return MX_SCALE_EXP_MIN;
    if (exponent_field == 0xFF)       /* +Inf (amax has no sign) */
        return MX_SCALE_EXP_MAX;
    return clamp_scale_exponent((int)exponent_field - 127 - 2);
}

/* aiter's bit-level fp32 -> e2m1 conversion of an already scaled value.
 * Written as the kernel writes it (three candidates, then selects) so that
 * NaN lands where the kernel puts it: the comparisons are false, so NaN
 * takes the "normal" path and its exponent bits give a finite code. */
static uint8_t aiter_e2m1_from_scaled(float qx)
{
    uint32_t bits = f32_bits(qx);
    uint32_t sign = bits & 0x80000000u;
    uint32_t mag = bits ^ sign;
    float f = f32_from_bits(mag);
    bool saturate = f >= 6.0f;
    bool denormal = !saturate && f < 1.0f;
    bool normal = !(saturate || denormal);

    /* f + 2^22 rounds f to a multiple of 0.5 (the fp32 ulp at 2^22); the
     * low bits of the sum count the halves: 0, 0.5, 1.0 -> codes 0, 1, 2. */
    const uint32_t denorm_bits = 149u << 23;
    uint8_t denormal_code = (uint8_t)(f32_bits(f + f32_from_bits(denorm_bits)) - denorm_bits);

    /* Rebias the exponent from fp32 to e2m1, add half an e2m1 ulp minus one
     * and the kept mantissa bit: ties go to the even code. uint32 wraps. */
    uint32_t mantissa_odd = (mag >> 22) & 1u;
    uint32_t v = mag + ((uint32_t)(1 - 127) << 23) + (1u << 21) - 1u + mantissa_odd;
    uint8_t normal_code = (uint8_t)(v >> 22);

    uint8_t code = saturate ? 0x7 : (normal ? normal_code : denormal_code);
    return code | (uint8_t)(sign >> 28);
}

static void quant_block_aiter_even(const float *x, uint8_t codes[MX_BLOCK], uint8_t *scale_byte)
{
    int e = aiter_scale_exponent(triton_block_amax(x));
    *scale_byte = (uint8_t)(e + 127);
    /* exp2(-e) of an integer in [-127, 127] is exact (2^-127 is subnormal). */
    float quant_scale = ldexpf(1.0f, -e);
    for (int i = 0; i < MX_BLOCK; i++)
        codes[i] = aiter_e2m1_from_scaled(x[i] * quant_scale);
}

/* ---- ocp and ceil ---- */

/* MXFP4 has no NaN or Inf element; the only way to say "this block is not a
 * number" is the e8m0 NaN scale (OCP MX v1.0: a NaN scale makes every
 * element NaN).  microxcaling gets there too: torch.max propagates NaN into
 * the shared exponent and an Inf amax overflows it to NaN. */
static bool block_is_finite(const float *x)
{
    for (int i = 0; i < MX_BLOCK; i++)
        if (!isfinite(x[i]))
            return false;
    return true;
}

static float finite_block_amax(const float *x)
{
    float amax = 0.0f;
    for (int i = 0; i < MX_BLOCK; i++)
        amax = fmaxf(amax, fabsf(x[i]));
    return amax;
}

/* floor(log2 amax) - 2: 2 is e2m1's largest exponent (6 = 1.5 * 2^2).
 * frexpf is exact, subnormal amax included, unlike floor(log2f()) which can
 * round up to the next integer just below a power of two. */
static int ocp_scale_exponent(float amax)
{
    if (amax == 0.0f)
        return MX_SCALE_EXP_MIN;
    int ex;
    (void)frexpf(amax, &ex);  /* amax = m * 2^ex, m in [0.5, 1) */
    return clamp_scale_exponent(ex - 1 - 2);
}

/* Smallest e with 6 * 2^e >= amax, exactly: with amax = m * 2^ex and
 * 6 * 2^e = 0.75 * 2^(e + 3), that is e = ex - 3 when m <= 0.75, else ex - 2. */
static int ceil_scale_exponent(float amax)
{
    if (amax == 0.0f)
        return MX_SCALE_EXP_MIN;
    int ex;
    float m = frexpf(amax, &ex);
    return clamp_scale_exponent(m <= 0.75f ? ex - 3 : ex - 2);
}

static void quant_block_rne(const float *x, int e, uint8_t codes[MX_BLOCK], uint8_t *scale_byte)
{
    *scale_byte = (uint8_t)(e + 127);
    float inverse_scale = ldexpf(1.0f, -e);
    for (int i = 0; i < MX_BLOCK; i++)
        codes[i] = e2m1_encode_rne(x[i] * inverse_scale);
}

void mxfp4_quant_block(const float *x, mxfp4_variant_t v, uint8_t codes[MX_BLOCK],
                       uint8_t *scale_byte)
{
    if (v == MXFP4_OCP || v == MXFP4_CEIL) {
        if (!block_is_finite(x)) {
            memset(codes, 0, MX_BLOCK);
            *scale_byte = E8M0_NAN;
            return;
        }
        float amax = finite_block_amax(x);
        int e = v == MXFP4_OCP ? ocp_scale_exponent(amax) : ceil_scale_exponent(amax);
        quant_block_rne(x, e, codes, scale_byte);
        return;
    }
    quant_block_aiter_even(x, codes, scale_byte);
}

void mxfp4_quant(const float *x, int64_t M, int64_t K, mxfp4_variant_t v, uint8_t *codes,
                 uint8_t *scales)
{
    int64_t blocks = K / MX_BLOCK;
    for (int64_t m = 0; m < M; m++)
        for (int64_t b = 0; b < blocks; b++)
            mxfp4_quant_block(x + m * K + b * MX_BLOCK, v, codes + m * K + b * MX_BLOCK,
                              scales + m * blocks + b);
}

void mxfp4_act_dequant(const uint8_t *codes, const uint8_t *scales, int64_t M, int64_t K,
                       float *out)
{
    int64_t blocks = K / MX_BLOCK;
    for (int64_t m = 0; m < M; m++) {
        for (int64_t b = 0; b < blocks; b++) {
            float s = e8m0_decode(scales[m * blocks + b], E8M0_SPEC);
            for (int i = 0; i < MX_BLOCK; i++) {
                int64_t k = b * MX_BLOCK + i;
                out[m * K + k] = e2m1_decode(codes[m * K + k]) * s;
            }
        }
    }
}
