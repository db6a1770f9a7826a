/* MXFP4 dynamic activation quantizers (per 32-element block along K), the W4A4
 * path.  Codes are e2m1 nibbles stored one per byte (low 4 bits). See
 * docs/NUMERICS.md, "MXFP4 dynamic". */
#ifndef KR_QUANT_MXFP4_H
#define KR_QUANT_MXFP4_H

#include <stdint.h>

#define MX_BLOCK 32

typedef enum {
    MXFP4_AITER_EVEN = 0, /* aiter _mxfp4_quant_op: amax rounded up via (+0x200000)&0xFF800000,
                             e = clamp(floor(log2 a) - 2, -127, 127), aiter's bit-exact e2m1 conversion
                             (NaN lands on a finite code) */
    MXFP4_OCP,            /* OCP MX v1.0: e = floor(log2 amax) - 2, RNE, saturate to 6 */
    MXFP4_CEIL,           /* newer aiter HIP: scale = ceil_pow2(amax / 6), RNE, saturate to 6 */
    MXFP4_VARIANT_COUNT
} mxfp4_variant_t;

const char *mxfp4_variant_name(mxfp4_variant_t v);
int mxfp4_variant_from_name(const char *name, mxfp4_variant_t *out); /* "aiter-even", "ocp", "ceil" */

/* One block of 32 values -> 32 codes (one per byte) and the block's e8m0 scale byte. */
void mxfp4_quant_block(const float *x, mxfp4_variant_t v, uint8_t codes[MX_BLOCK],
                       uint8_t *scale_byte);

/* aiter's fp32 -> e2m1 conversion of one value already multiplied by the
 * block's 2^-e (the element step of MXFP4_AITER_EVEN), NaN included. */
uint8_t mxfp4_aiter_e2m1_code(float scaled);

/* [M, K] -> codes [M, K] (one per byte) and scales [M, K/32]. K % 32 == 0. */
void mxfp4_quant(const float *x, int64_t M, int64_t K, mxfp4_variant_t v,
                 uint8_t *codes, uint8_t *scales);

/* fp32 value of each element: e2m1(code) * 2^(scale - 127) (spec e8m0). */
void mxfp4_act_dequant(const uint8_t *codes, const uint8_t *scales, int64_t M, int64_t K,
                       float *out);

#endif
