/* Reading 16 rows x 16 bytes of a packed weight as 16 columns: the in-register
 * transpose behind the k-major weight fills (weight_tile.c, folded_weight.c;
 * bf16_gemm.c runs its last three rounds as an 8x8 transpose of uint16).
 * The models vectorize across output columns, so each k needs its code from
 * 16 different weight rows; a 16x16 byte transpose gets 16 k's worth at a
 * time.
 *
 * Written with GCC/Clang vector builtins (GCC >= 12, Clang); where they are
 * missing BYTE_TILE_VECTOR is not defined and the fills take their scalar
 * loops, which store the same values. */
#ifndef KR_BYTE_TILE_H
#define KR_BYTE_TILE_H

#include <stdint.h>
#include <string.h>

#include "formats.h"

#if defined(__has_builtin)
#if __has_builtin(__builtin_shufflevector) && __has_builtin(__builtin_convertvector)
#define BYTE_TILE_VECTOR 1
#endif
#endif

#ifdef BYTE_TILE_VECTOR
#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

typedef uint8_t bt_u8x16 __attribute__((vector_size(16)));
typedef uint16_t bt_u16x8 __attribute__((vector_size(16)));
typedef uint32_t bt_u32x4 __attribute__((vector_size(16)));
typedef uint64_t bt_u64x2 __attribute__((vector_size(16)));
typedef int32_t bt_i32x16 __attribute__((vector_size(64)));

/* One interleave round of a transpose of 16-byte rows: for each pair
 * (in[2i], in[2i+1]), i < pairs, the low halves of the two, interleaved
 * `width` bytes at a time (1, 2, 4 or 8), go to out[i] and the high halves
 * to out[i + pairs].  The callers pass constants, so the switch folds. */
static inline void byte_tile_zip(const bt_u8x16 *in, bt_u8x16 *out, int pairs, int width)
{
    for (int i = 0; i < pairs; i++) {
        const bt_u8x16 a = in[2 * i], b = in[2 * i + 1];
        bt_u8x16 lo, hi;
        switch (width) {
        case 1:
            lo = __builtin_shufflevector(a, b, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
            hi = __builtin_shufflevector(a, b, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30,
                                         15, 31);
            break;
        case 2:
            lo = (bt_u8x16)__builtin_shufflevector((bt_u16x8)a, (bt_u16x8)b, 0, 8, 1, 9, 2, 10, 3, 11);
            hi = (bt_u8x16)__builtin_shufflevector((bt_u16x8)a, (bt_u16x8)b, 4, 12, 5, 13, 6, 14, 7,
                                                   15);
            break;
        case 4:
            lo = (bt_u8x16)__builtin_shufflevector((bt_u32x4)a, (bt_u32x4)b, 0, 4, 1, 5);
            hi = (bt_u8x16)__builtin_shufflevector((bt_u32x4)a, (bt_u32x4)b, 2, 6, 3, 7);
            break;
        default:
            lo = (bt_u8x16)__builtin_shufflevector((bt_u64x2)a, (bt_u64x2)b, 0, 2);
            hi = (bt_u8x16)__builtin_shufflevector((bt_u64x2)a, (bt_u64x2)b, 1, 3);
            break;
        }
        out[i] = lo;
        out[i + pairs] = hi;
    }
}

/* Transposes a 16x16 byte matrix (v[r] = row r) by four interleave rounds;
 * afterwards v[i] is column bitrev4(i) of the input. */
static inline void byte_tile_transpose(bt_u8x16 v[16])
{
    bt_u8x16 x[16];
    byte_tile_zip(v, x, 8, 1);
    byte_tile_zip(x, v, 8, 2);
    byte_tile_zip(v, x, 8, 4);
    byte_tile_zip(x, v, 8, 8);
}

/* 16 bytes widened to 16 int32 lanes.  GCC 12 turns __builtin_convertvector
 * of this into byte-by-byte inserts, so AVX-512 gets the one instruction.
 * (The 64-byte vectors here pass by pointer: a target without AVX-512 has
 * no ABI for passing them by value.) */
static inline void byte_tile_widen(const bt_u8x16 *bytes, bt_i32x16 *out)
{
#if defined(__AVX512F__)
    __m128i b;
    memcpy(&b, bytes, sizeof b);
    *out = (bt_i32x16)_mm512_cvtepu8_epi32(b);
#elif defined(__AVX2__)
    /* AVX2 has no 16-lane form: the two 8-byte halves, one instruction each. */
    __m128i b;
    memcpy(&b, bytes, sizeof b);
    const __m256i lo = _mm256_cvtepu8_epi32(b), hi = _mm256_cvtepu8_epi32(_mm_srli_si128(b, 8));
    memcpy(out, &lo, sizeof lo);
    memcpy((char *)out + sizeof lo, &hi, sizeof hi);
#else
    *out = __builtin_convertvector(*bytes, bt_i32x16);
#endif
}

/* fp32 bits of e2m1 codes 0..15, lane by lane: sign from bit 3; magnitude
 * 0 -> 0, 1 -> 0.5 (0x3F000000), 2..7 -> exponent and mantissa (m + 252) << 22
 * (1, 1.5, 2, 3, 4, 6).  byte_tile_e2m1_ok() checks it against e2m1_decode. */
static inline void byte_tile_e2m1_bits(const bt_i32x16 *code, bt_i32x16 *bits)
{
    const bt_i32x16 mag = *code & 7;
    *bits = (((mag + 252) << 22) & (mag > 1)) | (0x3F000000 & (mag == 1)) | ((*code & 8) << 28);
}

#if defined(__AVX2__) && !defined(__AVX512F__)
/* The fp32 bits of 8 codes, one in the low 4 bits of each 32-bit lane (the
 * bits above are ignored): the magnitude from an 8-entry table (the permute
 * reads only an index's low 3 bits), the sign from bit 3.  GCC 12 compiles the
 * generic 16-lane forms on AVX2 into spills through the stack and general
 * registers, which cost more than the decode itself; the AVX2 paths below
 * and in the fills work on 8-lane registers straight from and to memory. */
static inline __m256i byte_tile_e2m1_avx2(__m256i code)
{
    const __m256i table = _mm256_setr_epi32(
        (int)f32_bits(e2m1_decode(0)), (int)f32_bits(e2m1_decode(1)),
        (int)f32_bits(e2m1_decode(2)), (int)f32_bits(e2m1_decode(3)),
        (int)f32_bits(e2m1_decode(4)), (int)f32_bits(e2m1_decode(5)),
        (int)f32_bits(e2m1_decode(6)), (int)f32_bits(e2m1_decode(7)));
    return _mm256_or_si256(_mm256_permutevar8x32_epi32(table, code),
                           _mm256_slli_epi32(_mm256_and_si256(code, _mm256_set1_epi32(8)), 28));
}
#endif

/* The fp32 bits of 16 codes.  With AVX-512 one permute looks each code up
 * in a register holding e2m1_decode of all 16 (the same bits
 * byte_tile_e2m1_bits builds), with AVX2 two permutes of the 8 magnitudes;
 * elsewhere byte_tile_e2m1_bits builds them.  byte_tile_e2m1_ok() checks
 * both forms against e2m1_decode. */
static inline void byte_tile_e2m1(const bt_i32x16 *code, bt_i32x16 *bits)
{
#if defined(__AVX512F__)
    const __m512i table = _mm512_set_epi32(
        (int)f32_bits(e2m1_decode(15)), (int)f32_bits(e2m1_decode(14)),
        (int)f32_bits(e2m1_decode(13)), (int)f32_bits(e2m1_decode(12)),
        (int)f32_bits(e2m1_decode(11)), (int)f32_bits(e2m1_decode(10)),
        (int)f32_bits(e2m1_decode(9)), (int)f32_bits(e2m1_decode(8)),
        (int)f32_bits(e2m1_decode(7)), (int)f32_bits(e2m1_decode(6)),
        (int)f32_bits(e2m1_decode(5)), (int)f32_bits(e2m1_decode(4)),
        (int)f32_bits(e2m1_decode(3)), (int)f32_bits(e2m1_decode(2)),
        (int)f32_bits(e2m1_decode(1)), (int)f32_bits(e2m1_decode(0)));
    *bits = (bt_i32x16)_mm512_permutexvar_epi32((__m512i)*code, table);
#elif defined(__AVX2__)
    for (int h = 0; h < 2; h++) {
        __m256i c;
        memcpy(&c, (const char *)code + h * sizeof c, sizeof c);
        const __m256i v = byte_tile_e2m1_avx2(c);
        memcpy((char *)bits + h * sizeof v, &v, sizeof v);
    }
#else
    byte_tile_e2m1_bits(code, bits);
#endif
}

/* The fp32 values of the two codes in each of 16 bytes (widened to int32
 * lanes): the low nibbles' to lo[0..15], the high nibbles' to hi[0..15]. */
static inline void byte_tile_e2m1_nibbles(const bt_i32x16 *bytes, float *lo, float *hi)
{
#if defined(__AVX2__) && !defined(__AVX512F__)
    for (int h = 0; h < 2; h++) {
        const __m256i b = _mm256_loadu_si256((const __m256i *)((const char *)bytes + 32 * h));
        /* The low nibble needs no mask: only bits 0..3 are read. */
        _mm256_storeu_si256((__m256i *)(lo + 8 * h), byte_tile_e2m1_avx2(b));
        _mm256_storeu_si256((__m256i *)(hi + 8 * h), byte_tile_e2m1_avx2(_mm256_srli_epi32(b, 4)));
    }
#else
    const bt_i32x16 code_lo = *bytes & 15, code_hi = *bytes >> 4;
    bt_i32x16 v_lo, v_hi;
    byte_tile_e2m1(&code_lo, &v_lo);
    byte_tile_e2m1(&code_hi, &v_hi);
    memcpy(lo, &v_lo, sizeof v_lo);
    memcpy(hi, &v_hi, sizeof v_hi);
#endif
}

static inline int byte_tile_e2m1_ok(void)
{
    bt_i32x16 code;
    for (int c = 0; c < 16; c++)
        code[c] = c;
    bt_i32x16 bits, looked_up;
    byte_tile_e2m1_bits(&code, &bits);
    byte_tile_e2m1(&code, &looked_up);
    for (int c = 0; c < 16; c++)
        if ((uint32_t)bits[c] != f32_bits(e2m1_decode((uint8_t)c)) ||
            (uint32_t)looked_up[c] != f32_bits(e2m1_decode((uint8_t)c)))
            return 0;
    /* byte_tile_e2m1_nibbles on bytes holding every pair of codes. */
    for (int pass = 0; pass < 16; pass++) {
        bt_i32x16 bytes;
        float lo[16], hi[16];
        for (int c = 0; c < 16; c++)
            bytes[c] = c | ((c + pass) & 15) << 4;
        byte_tile_e2m1_nibbles(&bytes, lo, hi);
        for (int c = 0; c < 16; c++)
            if (f32_bits(lo[c]) != f32_bits(e2m1_decode((uint8_t)c)) ||
                f32_bits(hi[c]) != f32_bits(e2m1_decode((uint8_t)((c + pass) & 15))))
                return 0;
    }
    return 1;
}

/* col[i][r] = byte c + i of row r, for 16 rows (a NULL row reads as zeros);
 * prefetch: how many bytes ahead to prefetch each row (0: none). */
static inline void byte_tile_columns(const uint8_t *const row[16], int64_t c, int64_t prefetch,
                                     bt_i32x16 col[16])
{
    static const uint8_t zero_row[16];
    static const uint8_t bitrev4[16] = {0, 8, 4, 12, 2, 10, 6, 14, 1, 9, 5, 13, 3, 11, 7, 15};
    bt_u8x16 v[16];
    for (int r = 0; r < 16; r++) {
        if (row[r] && prefetch)
            __builtin_prefetch(row[r] + c + prefetch);
        memcpy(&v[r], row[r] ? row[r] + c : zero_row, 16);
    }
    byte_tile_transpose(v);
    for (int i = 0; i < 16; i++)
        byte_tile_widen(&v[i], &col[bitrev4[i]]);
}
#endif

#endif
