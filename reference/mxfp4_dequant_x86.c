/* AVX2 and AVX-512 MXFP4 dequantization (see mxfp4_dequant.h for why the
 * bits equal mxfp4_dequant_row's).  Each function carries its own target
 * attribute, so the file builds without -mavx* flags and the rest of the
 * program stays baseline x86-64; mxfp4_dequant.c calls a kernel only after
 * __builtin_cpu_supports said yes.
 *
 * Per 32-element block (16 packed bytes): the block's values are built as
 * mxfp4_dequant_row tabulates them, the eight magnitudes times the broadcast
 * scale in one vector multiply and codes 8-15 as their sign flips (which
 * fixes the sign of a NaN scale's NaN, see mxfp4_weight.c).  The bytes are
 * split into nibbles, interleaved so element 2j (low nibble) precedes 2j+1,
 * and widened to 32-bit lane indices that select from those values.
 */
#include "mxfp4_dequant_x86.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include <math.h>
#include <string.h>

/* e8m0_decode's values without its ldexpf: 2^(b-127) for b >= 1 is the
 * normal float with exponent field b; byte 0 is the subnormal 2^-127 (or 0
 * under E8M0_ZERO_IS_ZERO); 0xFF is the same NAN e8m0_decode returns. */
static inline float e8m0_scale(uint8_t b, e8m0_mode_t mode)
{
    if (b == 0xFF)
        return NAN;
    if (b == 0)
        return mode == E8M0_ZERO_IS_ZERO ? 0.0f : 0x1p-127f;
    const uint32_t bits = (uint32_t)b << 23;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

__attribute__((target("avx512f"))) void
mxfp4_dequant_rows_avx512(const uint8_t *packed, const uint8_t *scales, scale_layout_t layout,
                          int64_t N, int64_t K, int64_t n0, int64_t n1, e8m0_mode_t mode,
                          float *out)
{
    /* The magnitudes twice; the upper eight lanes get their sign flipped
     * after the multiply. */
    const __m512 magnitudes = _mm512_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
                                             0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f);
    const __m512i upper_sign = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, INT32_MIN, INT32_MIN,
                                                 INT32_MIN, INT32_MIN, INT32_MIN, INT32_MIN,
                                                 INT32_MIN, INT32_MIN);
    const int64_t blocks = K / 32;
    for (int64_t n = n0; n < n1; n++) {
        const uint8_t *row = packed + n * (K / 2);
        float *o = out + (n - n0) * K;
        for (int64_t b = 0; b < blocks; b++) {
            const float scale = e8m0_scale(mxfp4_scale_at(scales, layout, N, K, n, b), mode);
            const __m512 products = _mm512_mul_ps(magnitudes, _mm512_set1_ps(scale));
            const __m512 table = _mm512_castsi512_ps(
                _mm512_xor_si512(_mm512_castps_si512(products), upper_sign));
            const __m128i bytes = _mm_loadu_si128((const __m128i *)(row + b * 16));
            /* vpermps reads only bits 0-3 of each index, so neither the
             * plain bytes (low nibble) nor the bytes shifted right by 4
             * (high nibble, with the neighbour's bits above it) need a mask. */
            const __m128i high = _mm_srli_epi16(bytes, 4);
            const __m128i first = _mm_unpacklo_epi8(bytes, high);   /* elements 0..15 */
            const __m128i second = _mm_unpackhi_epi8(bytes, high);  /* elements 16..31 */
            _mm512_storeu_ps(o + b * 32,
                             _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(first), table));
            _mm512_storeu_ps(o + b * 32 + 16,
                             _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(second), table));
        }
    }
}

/* AVX2 permutes select from 8 lanes: the magnitude comes from the low three
 * bits of the code, and bit 3 flips the sign, as codes 8-15 of the scalar
 * table are the sign flips of codes 0-7. */
static inline __attribute__((target("avx2"))) void
store8_avx2(float *o, __m128i codes8, __m256 products)
{
    const __m256i index = _mm256_cvtepu8_epi32(codes8);
    const __m256 value = _mm256_permutevar8x32_ps(products, index);
    /* bit 3 of the code moved to bit 31; everything above it shifted out */
    const __m256i sign = _mm256_and_si256(_mm256_slli_epi32(index, 28),
                                          _mm256_set1_epi32(INT32_MIN));
    _mm256_storeu_ps(o, _mm256_xor_ps(value, _mm256_castsi256_ps(sign)));
}

__attribute__((target("avx2"))) void
mxfp4_dequant_rows_avx2(const uint8_t *packed, const uint8_t *scales, scale_layout_t layout,
                        int64_t N, int64_t K, int64_t n0, int64_t n1, e8m0_mode_t mode,
                        float *out)
{
    const __m256 magnitudes = _mm256_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f);
    const int64_t blocks = K / 32;
    for (int64_t n = n0; n < n1; n++) {
        const uint8_t *row = packed + n * (K / 2);
        float *o = out + (n - n0) * K;
        for (int64_t b = 0; b < blocks; b++) {
            const __m256 scale =
                _mm256_set1_ps(e8m0_scale(mxfp4_scale_at(scales, layout, N, K, n, b), mode));
            const __m256 products = _mm256_mul_ps(magnitudes, scale);
            const __m128i bytes = _mm_loadu_si128((const __m128i *)(row + b * 16));
            /* As in the AVX-512 kernel, no masks: the permute reads bits 0-2
             * and the sign comes from bit 3. */
            const __m128i high = _mm_srli_epi16(bytes, 4);
            const __m128i first = _mm_unpacklo_epi8(bytes, high);
            const __m128i second = _mm_unpackhi_epi8(bytes, high);
            float *ob = o + b * 32;
            store8_avx2(ob, first, products);
            store8_avx2(ob + 8, _mm_srli_si128(first, 8), products);
            store8_avx2(ob + 16, second, products);
            store8_avx2(ob + 24, _mm_srli_si128(second, 8), products);
        }
    }
}
#else
/* Nothing to build off x86-64; ISO C wants at least one declaration. */
typedef int mxfp4_dequant_x86_not_built;
#endif
