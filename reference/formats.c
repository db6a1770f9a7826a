#include "formats.h"

#include <math.h>
#include <string.h>

uint32_t f32_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

float f32_from_bits(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* Value of an fp8 magnitude (7 bits) with 4 exponent and 3 mantissa bits.
 * Exponent field 0 is subnormal: m * 2^(1 - bias - 3). */
static float e4m3_magnitude(uint8_t mag, int bias)
{
    int exponent = mag >> 3;
    int mantissa = mag & 7;
    if (exponent == 0)
        return ldexpf((float)mantissa, 1 - bias - 3);
    return ldexpf((float)(8 + mantissa), exponent - bias - 3);
}

float e4m3fn_decode(uint8_t code)
{
    uint8_t mag = code & 0x7F;
    if (mag == 0x7F)
        return (code & 0x80) ? -NAN : NAN;
    float v = e4m3_magnitude(mag, 7);
    return (code & 0x80) ? -v : v;
}

float e4m3fnuz_decode(uint8_t code)
{
    if (code == 0x80)
        return NAN;
    float v = e4m3_magnitude(code & 0x7F, 8);
    return (code & 0x80) ? -v : v;
}

/* Round-to-nearest-even of a non-negative, non-NaN fp32 magnitude (bits
 * `mag`) onto an e4m3 grid with the given bias, the way c10's
 * fp8e4m3fn_from_fp32_value / fp8e4m3fnuz_from_fp32_value do it.  The result
 * may carry past the largest code (0x7F + 1 = 0x80 for a value that rounds
 * above it); callers decide what overflow means.  `mag` must be below 2^9
 * (any larger value is an overflow for both formats and handled earlier), so
 * the 7-bit-plus-carry result fits in 8 bits. */
static uint8_t e4m3_round_magnitude(uint32_t mag, int bias)
{
    const uint32_t min_normal_bits = (uint32_t)(127 - bias + 1) << 23;
    if (mag < min_normal_bits) {
        /* D = 2^(21 - bias) has an fp32 ulp equal to the subnormal step
         * 2^(-bias - 2), so the fp32 adder does the RNE in mag + D and the
         * low bits of the sum are the code. */
        const uint32_t denorm_bits = (uint32_t)(127 + 21 - bias) << 23;
        float sum = f32_from_bits(mag) + f32_from_bits(denorm_bits);
        return (uint8_t)(f32_bits(sum) - denorm_bits);
    }
    uint32_t mantissa_odd = (mag >> 20) & 1;
    /* Rebias the exponent, then add half an fp8 ulp minus one plus the
     * odd bit: a tie rounds up exactly when the kept mantissa is odd. */
    uint32_t v = mag + ((uint32_t)(bias - 127) << 23) + 0x7FFFFu + mantissa_odd;
    return (uint8_t)(v >> 20);
}

uint8_t e4m3fn_encode(float x, fp8_overflow_t ovf)
{
    uint32_t bits = f32_bits(x);
    uint8_t sign = (uint8_t)(bits >> 24) & 0x80;
    uint32_t mag = bits & 0x7FFFFFFFu;
    if (mag > 0x7F800000u)
        return 0x7F | sign;
    if (ovf == FP8_SATURATE) {
        if (f32_from_bits(mag) > E4M3FN_MAX)
            return 0x7E | sign;
    } else if (mag >= 0x43F00000u) {
        /* 480 and above (Inf included) cannot round to a finite code. */
        return 0x7F | sign;
    }
    /* Below 480 a carry past 0x7E lands exactly on 0x7F, the NaN code: that
     * is torch's overflow-to-NaN for (464, 480). */
    return e4m3_round_magnitude(mag, 7) | sign;
}

uint8_t e4m3fnuz_encode(float x, fp8_overflow_t ovf)
{
    uint32_t bits = f32_bits(x);
    uint8_t sign = (uint8_t)(bits >> 24) & 0x80;
    uint32_t mag = bits & 0x7FFFFFFFu;
    if (mag > 0x7F800000u)
        return 0x80;
    if (ovf == FP8_SATURATE) {
        if (f32_from_bits(mag) > E4M3FNUZ_MAX)
            return 0x7F | sign;
    } else if (mag >= 0x43800000u) {
        /* 256 and above (Inf included). */
        return 0x80;
    }
    uint8_t code = e4m3_round_magnitude(mag, 8);
    if (code == 0x80)  /* rounded past 240 (from 248 up, ties go to 256) */
        return 0x80;
    if (code == 0)     /* fnuz has no -0: 0x80 is the NaN */
        return 0;
    return code | sign;
}

static const float e2m1_magnitudes[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

float e2m1_decode(uint8_t code)
{
    float v = e2m1_magnitudes[code & 7];
    return (code & 8) ? -v : v;
}

uint8_t e2m1_encode_rne(float x)
{
    /* Midpoints between adjacent magnitudes.  At a midpoint the even code
     * wins: when the lower code is odd the tie goes up (>=), else down (>). */
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

float e8m0_decode(uint8_t b, e8m0_mode_t mode)
{
    if (b == 0xFF)
        return NAN;
    if (b == 0 && mode == E8M0_ZERO_IS_ZERO)
        return 0.0f;
    return ldexpf(1.0f, (int)b - 127);
}

float bf16_decode(uint16_t h)
{
    return f32_from_bits((uint32_t)h << 16);
}

uint16_t bf16_encode(float x)
{
    uint32_t u = f32_bits(x);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u)
        return (uint16_t)(0x7FC0u | ((u >> 16) & 0x8000u));
    return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}
