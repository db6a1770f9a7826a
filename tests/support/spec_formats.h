/* The small formats decoded straight from their specifications (OCP MX
 * v1.0, the e4m3fn and bfloat16 bit layouts), written apart from
 * reference/formats.c so that the tests check that code against an
 * independent reading of the same spec.  Values are exact in double. */
#ifndef KR_SPEC_FORMATS_H
#define KR_SPEC_FORMATS_H

#include <stdint.h>

#include "formats.h"

/* e2m1 (MXFP4 element): bit 3 the sign, magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6. */
double spec_e2m1(uint8_t code);

/* The e2m1 code nearest Y: ties to the even code, |Y| >= 6 saturating to
 * +-6, the sign kept (-0 and NaN give code 0 with Y's sign bit). */
uint8_t spec_e2m1_nearest(double y);

/* e4m3fn: bias 7, subnormal step 2^-9, 0x7F/0xFF NaN (returned unsigned). */
double spec_e4m3fn(uint8_t code);

/* e8m0 scale: 2^(b - 127); 0xFF NaN; byte 0 is 0.0 under E8M0_ZERO_IS_ZERO. */
double spec_e8m0(uint8_t b, e8m0_mode_t mode);

/* bfloat16 bits as the float they widen to (exact). */
float spec_bf16(uint16_t h);

/* float -> bf16 round-to-nearest-even (docs/NUMERICS.md's formula), finite inputs. */
uint16_t spec_bf16_rne(float x);

/* Distance in bf16 steps between two finite encodings (+0 and -0 are 0 apart). */
int64_t spec_bf16_ulps(uint16_t a, uint16_t b);

#endif
