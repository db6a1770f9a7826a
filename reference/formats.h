/* Exact decode and round-to-nearest-even encode of the number formats the
 * production kernels use: fp8 e4m3fn (OCP), fp8 e4m3fnuz (gfx942), e2m1 (MX
 * fp4), e8m0 (MX scale) and bf16.  Semantics follow ../shared/NUMERICS.md;
 * every function here is pure and thread-safe. */
#ifndef KR_FORMATS_H
#define KR_FORMATS_H

#include <stdint.h>

/* ---- fp8 e4m3fn: s.eeee.mmm, bias 7, max 448, NaN = s.1111.111, no Inf ---- */
#define E4M3FN_MAX 448.0f
float   e4m3fn_decode(uint8_t code);

/* How a value beyond the largest finite code is encoded. */
typedef enum {
    FP8_SATURATE = 0,   /* clamp to +-max (cvt.rn.satfinite, v_cvt_pk_fp8_f32 after clamp); NaN -> NaN */
    FP8_OVERFLOW_NAN,   /* torch's .to(float8_e4m3fn): a value that rounds past max becomes NaN */
} fp8_overflow_t;

/* Round-to-nearest-even, subnormals kept.  NaN input gives the NaN code with
 * the input's sign (0x7F / 0xFF).  +-Inf: saturates or becomes NaN by `ovf`. */
uint8_t e4m3fn_encode(float x, fp8_overflow_t ovf);

/* ---- fp8 e4m3fnuz: bias 8, max 240, NaN = 0x80 only, no -0 ---- */
#define E4M3FNUZ_MAX 240.0f
float   e4m3fnuz_decode(uint8_t code);
/* RNE; -0 and negative values that round to zero encode as 0x00; NaN -> 0x80. */
uint8_t e4m3fnuz_encode(float x, fp8_overflow_t ovf);

/* ---- e2m1 (MX fp4): s.ee.m, bias 1; magnitudes 0 .5 1 1.5 2 3 4 6; no Inf/NaN ---- */
float   e2m1_decode(uint8_t code);          /* low 4 bits used */
/* Plain RNE onto the e2m1 grid, saturating to +-6.  NaN has no code: it
 * encodes as +-0 with its sign (callers that model a specific quantizer's
 * NaN behaviour, such as aiter's, implement it themselves). */
uint8_t e2m1_encode_rne(float x);

/* ---- e8m0 (MX scale): 2^(b-127), b = 0..254; 0xFF = NaN; no zero ---- */
typedef enum {
    E8M0_SPEC = 0,      /* byte 0 -> 2^-127 (OCP MX v1.0) */
    E8M0_ZERO_IS_ZERO,  /* byte 0 -> 0.0 (Triton's software fallback) */
} e8m0_mode_t;
float   e8m0_decode(uint8_t b, e8m0_mode_t mode);

/* ---- bf16: top 16 bits of fp32 ---- */
float    bf16_decode(uint16_t h);
/* (u + 0x7FFF + ((u >> 16) & 1)) >> 16, overflow to Inf; NaN -> quiet NaN
 * 0x7FC0 with the input's sign (torch's encoding). */
uint16_t bf16_encode(float x);

/* Bit helpers used by quantizers and tests. */
uint32_t f32_bits(float x);
float    f32_from_bits(uint32_t u);

#endif
