/* Exact decode and round-to-nearest-even encode of the number formats the
 * production kernels use: fp8 e4m3fn (OCP), fp8 e4m3fnuz (gfx942), e2m1 (MX
 * fp4), e8m0 (MX scale) and bf16.  Semantics follow docs/NUMERICS.md;
 * every function here is pure and thread-safe. */
#ifndef KR_FORMATS_H
#define KR_FORMATS_H

#include <stdint.h>
#include <string.h>

/* Bit helpers used by quantizers and tests. */
static inline uint32_t f32_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static inline float f32_from_bits(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

#define F32_INF_BITS 0x7F800000u

/* The largest |x[i]| of n floats as fp32 bits, for the quantizers' amax.
 * For non-negative floats the integer order of the bits is the numeric
 * order, so an integer max (which vectorizes) finds it; above F32_INF_BITS
 * the values hold a NaN, at it an Inf. */
static inline uint32_t f32_abs_max_bits(const float *x, int64_t n)
{
    uint32_t m = 0;
    for (int64_t i = 0; i < n; i++) {
        const uint32_t a = f32_bits(x[i]) & 0x7FFFFFFFu;
        m = a > m ? a : m;
    }
    return m;
}

/* The fp32 bits of every code's value, for the decoders below (inline, so
 * hot loops anywhere in the project decode with one load).  Each table is
 * the spec formula evaluated once; tests/test_format_tables.c checks every
 * entry against that formula. */
extern const uint32_t e4m3fn_decode_bits[256];
extern const uint32_t e4m3fnuz_decode_bits[256];
extern const uint32_t e8m0_decode_bits[256];    /* E8M0_SPEC */

/* ---- fp8 e4m3fn: s.eeee.mmm, bias 7, max 448, NaN = s.1111.111, no Inf ---- */
#define E4M3FN_MAX 448.0f
static inline float e4m3fn_decode(uint8_t code)
{
    return f32_from_bits(e4m3fn_decode_bits[code]);
}

/* The magnitude of an e4m3 code with the given bias, from its bits, as
 * (integer significand) * 2^p: exponent field e >= 1 is (8 + m) * 2^(e - bias
 * - 3), e = 0 (subnormal) is m * 2^(1 - bias - 3).  The int-to-float
 * conversion and the multiply by a power of two are exact, and every code
 * takes the same operations, so loops of it vectorize. */
static inline float e4m3_magnitude_bits_of(uint32_t mag, int bias)
{
    /* Arithmetic, not ?:, picks the subnormal's terms: GCC would otherwise
     * split the loop into paths around the float ops and not vectorize it. */
    const uint32_t e = mag >> 3, m = mag & 7u, normal = e != 0;
    const int32_t significand = (int32_t)(8u * normal + m);
    const int32_t p = (int32_t)(e + !normal) - bias - 3;
    return (float)significand * f32_from_bits((uint32_t)(p + 127) << 23);
}

/* e4m3fn_decode computed from the code's bits instead of read from the
 * table, so a loop of it vectorizes (a table load per element does not);
 * s.1111.111 is the NaN 0x7FC00000 with the code's sign.  Equal to the table
 * for every code (tested). */
static inline float e4m3fn_decode_bits_of(uint8_t code)
{
    const uint32_t mag = code & 0x7Fu, sign = (uint32_t)(code & 0x80u) << 24;
    const uint32_t bits = f32_bits(e4m3_magnitude_bits_of(mag, 7));
    const uint32_t nan = 0u - (uint32_t)(mag == 0x7Fu);     /* all ones for the NaN code */
    return f32_from_bits(((bits & ~nan) | (0x7FC00000u & nan)) | sign);
}

/* How a value beyond the largest finite code is encoded. */
typedef enum {
    FP8_SATURATE = 0,   /* clamp to +-max (cvt.rn.satfinite, v_cvt_pk_fp8_f32 after clamp); NaN -> NaN */
    FP8_OVERFLOW_NAN,   /* torch's .to(float8_e4m3fn): a value that rounds past max becomes NaN */
} fp8_overflow_t;

/* Round-to-nearest-even, subnormals kept.  NaN input gives the NaN code with
 * the input's sign (0x7F / 0xFF).  +-Inf: saturates or becomes NaN by `ovf`. */
uint8_t e4m3fn_encode(float x, fp8_overflow_t ovf);

/* Round-to-nearest-even of x onto an e4m3 grid with the given bias, as a
 * code with x's sign bit, for x not NaN and |x| at most the format's largest
 * value: e4m3fn_encode / e4m3fnuz_encode restricted to the values a
 * quantizer has already clamped, where neither overflow rule can apply.
 *
 * Written without a branch so loops of it vectorize.  With e the binade of
 * |x| (never below the smallest normal's, 1 - bias), the grid step there is
 * 2^(e-3), and M = 2^(e+20) has exactly that fp32 ulp: the fp32 add |x| + M
 * rounds |x| to the grid (RNE, ties to an even step count, which is the even
 * mantissa), and bits(|x| + M) - bits(M) is the step count m, at most 16.
 * The code is then 8 * (e - (1 - bias)) + m, a carry into the next binade
 * included, and subnormals (e = 1 - bias, m <= 8) are the same formula.
 * tests/test_format_tables.c compares it with the encoders on every such
 * float. */
static inline uint8_t e4m3_encode_in_range(float x, int bias)
{
    const uint32_t bits = f32_bits(x), mag = bits & 0x7FFFFFFFu;
    const uint32_t min_normal_field = (uint32_t)(128 - bias);
    const uint32_t field = mag >> 23 > min_normal_field ? mag >> 23 : min_normal_field;
    const uint32_t m_bits = (field + 20) << 23;
    const uint32_t steps = f32_bits(f32_from_bits(mag) + f32_from_bits(m_bits)) - m_bits;
    const uint32_t code = ((field - min_normal_field) << 3) + steps;
    return (uint8_t)(code | ((bits >> 24) & 0x80u));
}

/* e4m3fn_encode(x, either mode) for x not NaN and |x| <= 448. */
static inline uint8_t e4m3fn_encode_in_range(float x)
{
    return e4m3_encode_in_range(x, 7);
}

/* ---- fp8 e4m3fnuz: bias 8, max 240, NaN = 0x80 only, no -0 ---- */
#define E4M3FNUZ_MAX 240.0f
static inline float e4m3fnuz_decode(uint8_t code)
{
    return f32_from_bits(e4m3fnuz_decode_bits[code]);
}
/* e4m3fnuz_decode from the code's bits (see e4m3fn_decode_bits_of): bias 8;
 * 0x80 is the NaN 0x7FC00000.  Equal to the table for every code (tested). */
static inline float e4m3fnuz_decode_bits_of(uint8_t code)
{
    const uint32_t mag = code & 0x7Fu, sign = (uint32_t)(code & 0x80u) << 24;
    const uint32_t bits = f32_bits(e4m3_magnitude_bits_of(mag, 8)) | sign;
    const uint32_t nan = 0u - (uint32_t)(code == 0x80u);    /* all ones for the NaN code */
    return f32_from_bits((bits & ~nan) | (0x7FC00000u & nan));
}

/* RNE; -0 and negative values that round to zero encode as 0x00; NaN -> 0x80. */
uint8_t e4m3fnuz_encode(float x, fp8_overflow_t ovf);

/* e4m3fnuz_encode(x, either mode) for x not NaN and |x| <= 240: a zero
 * code keeps no sign (0x80 is the NaN). */
static inline uint8_t e4m3fnuz_encode_in_range(float x)
{
    const uint8_t code = e4m3_encode_in_range(x, 8);
    return (uint8_t)((code & 0x7F) == 0 ? 0 : code);
}

/* ---- e2m1 (MX fp4): s.ee.m, bias 1; magnitudes 0 .5 1 1.5 2 3 4 6; no Inf/NaN ---- */
/* The value of a code (low 4 bits used), built from its bits without a
 * table so loops of it vectorize: magnitude 1 is 0.5 (0x3F000000), 2..7 are
 * the fp32 exponent and mantissa (m + 252) << 22 (1, 1.5, 2, 3, 4, 6); the
 * sign is bit 3. */
static inline float e2m1_decode(uint8_t code)
{
    const uint32_t mag = code & 7u;
    const uint32_t bits = mag > 1 ? (mag + 252u) << 22 : (mag == 1 ? 0x3F000000u : 0u);
    return f32_from_bits(bits | (uint32_t)(code & 8u) << 28);
}

/* Plain RNE onto the e2m1 grid, saturating to +-6.  NaN has no code: it
 * encodes as +-0 with its sign (callers that model a specific quantizer's
 * NaN behaviour, such as aiter's, implement it themselves).
 * The code is the number of midpoints between adjacent magnitudes that |x|
 * lies above; at a midpoint the even code wins, so the tie goes up (>=) when
 * the lower code is odd and down (>) when it is even.  Every comparison is
 * false for NaN, which therefore gets code 0. */
static inline uint8_t e2m1_encode_rne(float x)
{
    const uint32_t bits = f32_bits(x);
    const float a = f32_from_bits(bits & 0x7FFFFFFFu);
    const uint32_t code = (uint32_t)(a > 0.25f) + (uint32_t)(a >= 0.75f) + (uint32_t)(a > 1.25f) +
                          (uint32_t)(a >= 1.75f) + (uint32_t)(a > 2.5f) + (uint32_t)(a >= 3.5f) +
                          (uint32_t)(a > 5.0f);
    return (uint8_t)(code | ((bits >> 28) & 8u));
}

/* ---- e8m0 (MX scale): 2^(b-127), b = 0..254; 0xFF = NaN; no zero ---- */
typedef enum {
    E8M0_SPEC = 0,      /* byte 0 -> 2^-127 (OCP MX v1.0) */
    E8M0_ZERO_IS_ZERO,  /* byte 0 -> 0.0 (Triton's software fallback) */
} e8m0_mode_t;
static inline float e8m0_decode(uint8_t b, e8m0_mode_t mode)
{
    return b == 0 && mode == E8M0_ZERO_IS_ZERO ? 0.0f : f32_from_bits(e8m0_decode_bits[b]);
}

/* ---- bf16: top 16 bits of fp32 ---- */
static inline float bf16_decode(uint16_t h)
{
    return f32_from_bits((uint32_t)h << 16);
}

/* (u + 0x7FFF + ((u >> 16) & 1)) >> 16, overflow to Inf; NaN -> quiet NaN
 * 0x7FC0 with the input's sign (torch's encoding).  Written without a branch
 * so loops of it vectorize. */
static inline uint16_t bf16_encode(float x)
{
    const uint32_t u = f32_bits(x);
    const uint16_t rounded = (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
    const uint16_t quiet_nan = (uint16_t)(0x7FC0u | ((u >> 16) & 0x8000u));
    return (u & 0x7FFFFFFFu) > 0x7F800000u ? quiet_nan : rounded;
}

#endif
