/* MXFP4 written out from docs/NUMERICS.md in double, apart from
 * reference/: the oracles the format and GEMM tests check the harness's
 * encoders and dequantizers against. */
#ifndef KR_MX_ORACLE_H
#define KR_MX_ORACLE_H
#include <stdint.h>

#include "formats.h"

/* e2m1 magnitudes by code & 7; bit 3 of a code is the sign. */
extern const double test_e2m1_grid[8];

/* The e2m1 code nearest to y (round to nearest, ties to the even code),
 * saturating at +-6; NaN gives the signed zero code. */
uint8_t test_e2m1_nearest_code(double y);

/* The exact value of e2m1 `code` under the e8m0 `scale_byte`: 0xFF is NaN,
 * 0 is 0.0 under E8M0_ZERO_IS_ZERO, any other byte e is 2^(e - 127). */
double test_mx_value(uint8_t code, uint8_t scale_byte, e8m0_mode_t mode);

#endif
