#include "quant_mxfp4.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "formats.h"
#include "name_table.h"

static const char *const mxfp4_variant_names[MXFP4_VARIANT_COUNT] = {
    [MXFP4_AITER_EVEN] = "aiter-even",
    [MXFP4_OCP] = "ocp",
    [MXFP4_CEIL] = "ceil",
};

NAME_TABLE_LOOKUPS(mxfp4_variant, mxfp4_variant_t, mxfp4_variant_names)

#define MX_SCALE_EXP_MIN (-127)
#define MX_SCALE_EXP_MAX 127
#define E8M0_NAN 0xFF

static int clamp_scale_exponent(int e)
{
    return e < MX_SCALE_EXP_MIN ? MX_SCALE_EXP_MIN : (e > MX_SCALE_EXP_MAX ? MX_SCALE_EXP_MAX : e);
}

/* ---- aiter-even: aiter/ops/triton/_triton_kernels/quant/quant.py ---- */

/* libm's fmaxf(a, b) for a, b >= +0 or NaN, spelled out: a number beats a
 * quiet NaN, a signaling NaN beats a number (and comes back quieted), and of
 * two NaNs the first operand wins, quieted.  Calling fmaxf itself leaves the
 * operand order to the compiler, which treats fmaxf as commutative; for two
 * NaNs that order decides the result. */
static float libm_fmaxf(float a, float b)
{
    const uint32_t ua = f32_bits(a), ub = f32_bits(b);
    const bool a_nan = (ua & 0x7FFFFFFFu) > F32_INF_BITS, b_nan = (ub & 0x7FFFFFFFu) > F32_INF_BITS;
    const uint32_t quiet_bit = 0x00400000u;
    if (a_nan && (b_nan || !(ua & quiet_bit)))
        return f32_from_bits(ua | quiet_bit);
    if (b_nan)
        return (ub & quiet_bit) ? a : f32_from_bits(ub | quiet_bit);
    if (a_nan)
        return b;
    return a > b ? a : b;
}

/* Triton's tl.max(tl.abs(x)) reduces with maxnum and has no identity
 * element: NaNs are skipped unless the whole block is NaN, in which case
 * the result is a NaN.  Without a NaN that is the plain maximum.  With one,
 * the fold is libm's fmaxf with the new element as first operand (the
 * order GCC's builds of the original fmaxf loop ended up with): an all-NaN
 * block keeps its last element's NaN, quieted, and a signaling NaN in a
 * block restarts the fold from the next number. */
static float triton_block_amax(const float *x)
{
    const uint32_t m = f32_abs_max_bits(x, MX_BLOCK);
    if (m <= F32_INF_BITS)
        return f32_from_bits(m);
    float amax = fabsf(x[0]);
    for (int i = 1; i < MX_BLOCK; i++)
        amax = libm_fmaxf(fabsf(x[i]), amax);
    return amax;
}

/* 2^n for n in [-127, 127], exactly, from its bits (2^-127 is the subnormal
 * 0x00400000): what ldexpf(1.0f, n) returns, without the libm call. */
static float pow2_exact(int n)
{
    return f32_from_bits(n >= -126 ? (uint32_t)(n + 127) << 23 : 0x00400000u);
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
 * NaN lands where the kernel puts it: the kernel's comparisons are false for
 * NaN, so NaN takes the "normal" path and its exponent bits give a finite
 * code.  The comparisons are made on the magnitude's bits (the integer order
 * is the numeric order, and a NaN is kept out of both by hand), so a loop of
 * this vectorizes. */
static inline uint8_t aiter_e2m1_from_scaled(float qx)
{
    uint32_t bits = f32_bits(qx);
    uint32_t sign = bits & 0x80000000u;
    uint32_t mag = bits ^ sign;
    const bool is_nan = mag > F32_INF_BITS;
    const bool saturate = mag >= 0x40C00000u && !is_nan;          /* f >= 6.0f */
    const bool denormal = mag < 0x3F800000u;                      /* f < 1.0f */
    const bool normal = !(saturate || denormal);

    /* The kernel adds 2^22, whose fp32 ulp is 0.5, so the adder rounds f to
     * a multiple of 0.5 (RNE) and the low bits of the sum count the halves:
     * 0, 0.5, 1.0 -> codes 0, 1, 2.  Below 1 that is: code 1 above 0.25 (the
     * tie 0.25 goes to the even 0) and code 2 from 0.75 on (the tie 0.75 goes
     * to the even 1.0) -- two integer comparisons, the same codes. */
    const uint32_t denormal_code = (uint32_t)(mag > 0x3E800000u) + (uint32_t)(mag >= 0x3F400000u);

    /* Rebias the exponent from fp32 to e2m1, add half an e2m1 ulp minus one
     * and the kept mantissa bit: ties go to the even code. uint32 wraps. */
    uint32_t mantissa_odd = (mag >> 22) & 1u;
    uint32_t v = mag + ((uint32_t)(1 - 127) << 23) + (1u << 21) - 1u + mantissa_odd;
    const uint32_t normal_code = v >> 22;

    const uint32_t code = saturate ? 0x7 : (normal ? normal_code : denormal_code);
    return (uint8_t)(code | (sign >> 28));
}

uint8_t mxfp4_aiter_e2m1_code(float scaled)
{
    return aiter_e2m1_from_scaled(scaled);
}

static void quant_block_aiter_even(const float *x, uint8_t codes[MX_BLOCK], uint8_t *scale_byte)
{
    int e = aiter_scale_exponent(triton_block_amax(x));
    *scale_byte = (uint8_t)(e + 127);
    /* exp2(-e) of an integer in [-127, 127] is exact (2^-127 is subnormal). */
    const float quant_scale = pow2_exact(-e);
    for (int i = 0; i < MX_BLOCK; i++)
        codes[i] = aiter_e2m1_from_scaled(x[i] * quant_scale);
}

/* ---- ocp and ceil ---- */

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
    const float inverse_scale = pow2_exact(-e);
    for (int i = 0; i < MX_BLOCK; i++)
        codes[i] = e2m1_encode_rne(x[i] * inverse_scale);
}

void mxfp4_quant_block(const float *x, mxfp4_variant_t v, uint8_t codes[MX_BLOCK],
                       uint8_t *scale_byte)
{
    if (v == MXFP4_OCP || v == MXFP4_CEIL) {
        /* MXFP4 has no NaN or Inf element; the only way to say "this block
         * is not a number" is the e8m0 NaN scale (OCP MX v1.0: a NaN scale
         * makes every element NaN).  microxcaling gets there too: torch.max
         * propagates NaN into the shared exponent and an Inf amax overflows
         * it to NaN.  A block is finite exactly when its largest magnitude's
         * bits are below an Inf's, and then that magnitude is the fmaxf fold
         * from 0. */
        const uint32_t amax_bits = f32_abs_max_bits(x, MX_BLOCK);
        if (amax_bits >= F32_INF_BITS) {
            memset(codes, 0, MX_BLOCK);
            *scale_byte = E8M0_NAN;
            return;
        }
        const float amax = f32_from_bits(amax_bits);
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
            const float s = e8m0_decode(scales[m * blocks + b], E8M0_SPEC);
            const uint8_t *c = codes + m * K + b * MX_BLOCK;
            float *o = out + m * K + b * MX_BLOCK;
            for (int i = 0; i < MX_BLOCK; i++)
                o[i] = e2m1_decode(c[i]) * s;
        }
    }
}
