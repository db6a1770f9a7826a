/* Rounding of a running sum to bf16 or fp16, as the accumulation models
 * (acc_fit.c) apply it: to one value, or to 8 side by side.  The models'
 * per-element chains are serial (each add and rounding waits on the last),
 * so the chains of 8 sampled outputs run in the lanes of one vector; each
 * lane does the one-value form's integer and float operations, so the
 * values are the same bits (test_format_exhaustive checks every fp32 value). */
#ifndef KR_ACC_ROUND_H
#define KR_ACC_ROUND_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "formats.h"

#define ACC_LANES 8
typedef float acc_f32x8 __attribute__((vector_size(4 * ACC_LANES)));
typedef uint32_t acc_u32x8 __attribute__((vector_size(4 * ACC_LANES)));

static inline float acc_bf16_round(float x)
{
    return bf16_decode(bf16_encode(x));
}

/* x rounded to the nearest fp16 value (ties to even), overflow to +-Inf.
 * On the bits: the per-element models round some 10^7 partial sums a case,
 * and frexpf/ldexpf/rintf made this the test's hot spot. */
static inline float acc_fp16_round(float x)
{
    if (!isfinite(x) || x == 0.0f)
        return x;
    const float a = fabsf(x);
    if (a >= 65520.0f)
        return x > 0 ? INFINITY : -INFINITY;
    if (a < 0x1p-14f)   /* fp16 subnormals: multiples of 2^-24 (the scalings are exact) */
        return rintf(x * 0x1p24f) * 0x1p-24f;
    /* Normal: keep 10 of fp32's 23 fraction bits, nearest even; a carry out
     * of the fraction moves the exponent up, as the value does. */
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    const uint32_t lsb = (u >> 13) & 1u;
    u = (u + 0x0FFFu + lsb) & ~0x1FFFu;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* The 8-lane forms take and give their vectors through pointers: a vector
 * passed by value changes the ABI where the build targets no AVX. */
#define ACC_SELECT(mask, a, b) (((a) & (mask)) | ((b) & ~(mask)))

/* bf16_encode then bf16_decode, lane by lane. */
static inline void acc_bf16_round_x8(acc_f32x8 *x)
{
    acc_u32x8 u;
    memcpy(&u, x, sizeof u);
    const acc_u32x8 rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
    const acc_u32x8 quiet_nan = 0x7FC00000u | (u & 0x80000000u);
    const acc_u32x8 nan = (acc_u32x8)((u & 0x7FFFFFFFu) > 0x7F800000u);
    const acc_u32x8 r = ACC_SELECT(nan, quiet_nan, rounded);
    memcpy(x, &r, sizeof r);
}

/* acc_fp16_round, lane by lane: every branch computed, the lane's taken. */
static inline void acc_fp16_round_x8(acc_f32x8 *x)
{
    acc_u32x8 u;
    memcpy(&u, x, sizeof u);
    const acc_u32x8 sign = u & 0x80000000u, mag = u & 0x7FFFFFFFu;
    const acc_u32x8 keep = (acc_u32x8)(mag >= 0x7F800000u) | (acc_u32x8)(mag == 0u);
    const acc_u32x8 over = (acc_u32x8)(mag >= 0x477FF000u);          /* 65520 */
    const acc_u32x8 small = (acc_u32x8)(mag < 0x38800000u);          /* 2^-14 */
    /* rintf(|x| * 2^24): below 2^10 adding and taking away 1.5 * 2^23
     * rounds to the nearest integer, ties to even; the sign goes back on
     * (rintf keeps it, zeros too), then the exact scaling down. */
    acc_f32x8 y, a;
    memcpy(&a, &mag, sizeof a);
    y = (a * 0x1p24f + 0x1.8p23f) - 0x1.8p23f;
    acc_u32x8 yb;
    memcpy(&yb, &y, sizeof yb);
    yb |= sign;
    memcpy(&y, &yb, sizeof y);
    y = y * 0x1p-24f;
    memcpy(&yb, &y, sizeof yb);
    const acc_u32x8 normal = (u + 0x0FFFu + ((u >> 13) & 1u)) & ~0x1FFFu;
    const acc_u32x8 r = ACC_SELECT(keep, u, ACC_SELECT(over, sign | 0x7F800000u,
                                                        ACC_SELECT(small, yb, normal)));
    memcpy(x, &r, sizeof r);
}

#endif
