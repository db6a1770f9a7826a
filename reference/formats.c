#include "formats.h"

/* Decode tables: entry c is the fp32 bits of code c's value by the spec
 * formula -- (-1)^s * 2^(e - bias) * (1 + m/8), subnormals m/8 * 2^(1 - bias);
 * e8m0 2^(b - 127) -- with NaN codes as the quiet NaN 0x7FC00000
 * carrying the code's sign (e4m3fn 0x7F/0xFF; e4m3fnuz 0x80 and e8m0 0xFF
 * positive).  tests/test_format_tables.c recomputes every entry from that
 * formula.
 *
 * They are spelled as the progressions they are: the normal codes of one
 * sign climb by one fp32 step of the top 3 mantissa bits (eight steps carry
 * into the next exponent, as the code's own exponent field does), and e8m0
 * byte b >= 1 is b << 23.  SEQn(a, d) is the n terms a, a + d, ... */
#define SEQ1(a, d) (a)
#define SEQ2(a, d) SEQ1(a, d), SEQ1((a) + (d), d)
#define SEQ4(a, d) SEQ2(a, d), SEQ2((a) + 2 * (d), d)
#define SEQ8(a, d) SEQ4(a, d), SEQ4((a) + 4 * (d), d)
#define SEQ16(a, d) SEQ8(a, d), SEQ8((a) + 8 * (d), d)
#define SEQ32(a, d) SEQ16(a, d), SEQ16((a) + 16 * (d), d)
#define SEQ64(a, d) SEQ32(a, d), SEQ32((a) + 32 * (d), d)
#define SEQ127(a, d)                                                                          \
    SEQ64(a, d), SEQ32((a) + 64 * (d), d), SEQ16((a) + 96 * (d), d), SEQ8((a) + 112 * (d), d), \
        SEQ4((a) + 120 * (d), d), SEQ2((a) + 124 * (d), d), SEQ1((a) + 126 * (d), d)

/* One sign of an e4m3 format, n1 being the bits of its smallest normal
 * 2^(1 - bias) with the sign: `zero` (code 0x00 or 0x80), the subnormals
 * m * n1 / 8 for m = 1..7, the normal codes 0x08..0x7E of the progression
 * from n1, and `top` (code 0x7F or 0xFF: the last normal or a NaN). */
#define E4M3_MANTISSA_STEP 0x00100000u
#define E4M3_RUN(len, n1, i) SEQ##len((n1) + (i) * E4M3_MANTISSA_STEP, E4M3_MANTISSA_STEP)
#define E4M3_HALF(zero, n1, top)                                                              \
    (zero), (n1) - 0x1800000u, (n1) - 0x1000000u, (n1) - 0xC00000u, (n1) - 0x800000u,         \
        (n1) - 0x600000u, (n1) - 0x400000u, (n1) - 0x200000u, E4M3_RUN(64, n1, 0),            \
        E4M3_RUN(32, n1, 64), E4M3_RUN(16, n1, 96), E4M3_RUN(4, n1, 112), E4M3_RUN(2, n1, 116), \
        E4M3_RUN(1, n1, 118), (top)

const uint32_t e4m3fn_decode_bits[256] = {
    E4M3_HALF(0x00000000u, 0x3C800000u, 0x7FC00000u),
    E4M3_HALF(0x80000000u, 0xBC800000u, 0xFFC00000u),
};

/* fnuz: 0x80 is the NaN (no -0), 0x7F/0xFF the largest normals (+-240). */
const uint32_t e4m3fnuz_decode_bits[256] = {
    E4M3_HALF(0x00000000u, 0x3C000000u, 0x43700000u),
    E4M3_HALF(0x7FC00000u, 0xBC000000u, 0xC3700000u),
};

/* Byte 0 is the subnormal 2^-127. */
const uint32_t e8m0_decode_bits[256] = {
    0x00400000u,
    SEQ127(0x00800000u, 0x00800000u),
    SEQ127(0x40000000u, 0x00800000u),
    0x7FC00000u,
};

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
