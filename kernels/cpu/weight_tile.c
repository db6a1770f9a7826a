#include "weight_tile.h"

#include <string.h>

#include "formats.h"
#include "mxfp4_weight.h"
#include "tile_gemm.h"

/* The fill transposes in registers with GCC/Clang vector builtins where the
 * compiler has them (GCC >= 12, Clang), else it takes the scalar loop; both
 * store the same values. */
#if defined(__has_builtin)
#if __has_builtin(__builtin_shufflevector) && __has_builtin(__builtin_convertvector)
#define WT_VECTOR_FILL 1
#endif
#endif

#ifdef WT_VECTOR_FILL
#if defined(__AVX512F__)
#include <immintrin.h>
#endif
typedef uint8_t wt_u8x16 __attribute__((vector_size(16)));
typedef uint16_t wt_u16x8 __attribute__((vector_size(16)));
typedef uint32_t wt_u32x4 __attribute__((vector_size(16)));
typedef uint64_t wt_u64x2 __attribute__((vector_size(16)));
typedef int32_t wt_i32x16 __attribute__((vector_size(64)));

/* After transpose_16x16, v[i] is column bitrev4[i] of the input rows. */
static const uint8_t bitrev4[16] = {0, 8, 4, 12, 2, 10, 6, 14, 1, 9, 5, 13, 3, 11, 7, 15};

/* Transposes a 16x16 byte matrix (v[r] = row r) by four interleave rounds. */
static inline void transpose_16x16(wt_u8x16 v[16])
{
    wt_u8x16 x[16];
    for (int i = 0; i < 8; i++) {
        const wt_u8x16 a = v[2 * i], b = v[2 * i + 1];
        x[i] = __builtin_shufflevector(a, b, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
        x[i + 8] = __builtin_shufflevector(a, b, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14,
                                           30, 15, 31);
    }
    for (int i = 0; i < 8; i++) {
        const wt_u16x8 a = (wt_u16x8)x[2 * i], b = (wt_u16x8)x[2 * i + 1];
        v[i] = (wt_u8x16)__builtin_shufflevector(a, b, 0, 8, 1, 9, 2, 10, 3, 11);
        v[i + 8] = (wt_u8x16)__builtin_shufflevector(a, b, 4, 12, 5, 13, 6, 14, 7, 15);
    }
    for (int i = 0; i < 8; i++) {
        const wt_u32x4 a = (wt_u32x4)v[2 * i], b = (wt_u32x4)v[2 * i + 1];
        x[i] = (wt_u8x16)__builtin_shufflevector(a, b, 0, 4, 1, 5);
        x[i + 8] = (wt_u8x16)__builtin_shufflevector(a, b, 2, 6, 3, 7);
    }
    for (int i = 0; i < 8; i++) {
        const wt_u64x2 a = (wt_u64x2)x[2 * i], b = (wt_u64x2)x[2 * i + 1];
        v[i] = (wt_u8x16)__builtin_shufflevector(a, b, 0, 2);
        v[i + 8] = (wt_u8x16)__builtin_shufflevector(a, b, 1, 3);
    }
}

/* fp32 bits of e2m1 codes 0..15, lane by lane: sign from bit 3; magnitude
 * 0 -> 0, 1 -> 0.5 (0x3F000000), 2..7 -> exponent and mantissa (m + 252) << 22
 * (1, 1.5, 2, 3, 4, 6).  e2m1_bits_ok() checks it against e2m1_decode. */
static inline void e2m1_bits(const wt_i32x16 *code, wt_i32x16 *bits)
{
    const wt_i32x16 mag = *code & 7;
    *bits = (((mag + 252) << 22) & (mag > 1)) | (0x3F000000 & (mag == 1)) | ((*code & 8) << 28);
}

static int e2m1_bits_ok(void)
{
    wt_i32x16 code;
    for (int c = 0; c < 16; c++)
        code[c] = c;
    wt_i32x16 bits;
    e2m1_bits(&code, &bits);
    for (int c = 0; c < 16; c++)
        if ((uint32_t)bits[c] != f32_bits(e2m1_decode((uint8_t)c)))
            return 0;
    return 1;
}

/* 16 bytes widened to 16 int32 lanes.  GCC 12 turns __builtin_convertvector
 * of this into byte-by-byte inserts, so AVX-512 gets the one instruction. */
static inline wt_i32x16 widen_u8x16(wt_u8x16 bytes)
{
#if defined(__AVX512F__)
    __m128i b;
    memcpy(&b, &bytes, sizeof b);
    return (wt_i32x16)_mm512_cvtepu8_epi32(b);
#else
    return __builtin_convertvector(bytes, wt_i32x16);
#endif
}

/* The fp32 bits of 16 codes.  With AVX-512 one permute looks each code up
 * in a register holding e2m1_decode of all 16 (the same bits e2m1_bits
 * builds); elsewhere e2m1_bits builds them. */
static inline wt_i32x16 e2m1_lookup(wt_i32x16 code)
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
    return (wt_i32x16)_mm512_permutexvar_epi32((__m512i)code, table);
#else
    wt_i32x16 bits;
    e2m1_bits(&code, &bits);
    return bits;
#endif
}
#endif

void weight_tile_source_init(weight_tile_source_t *s, const mxfp4_weight_t *w)
{
    s->w = w;
    for (int e = 0; e < 256; e++)
        s->scale_of[e] = e8m0_decode((uint8_t)e, w->e8m0_mode);
}

void weight_tile_fill_source(const tile_gemm_t *g, int64_t n0, int64_t width, int64_t k0,
                             int64_t k1, float *value, float *block_scale)
{
    const weight_tile_source_t *s = g->fill_ctx;
    weight_tile_fill(s->w, s->scale_of, n0, width, k0, k1, value, block_scale);
}

void weight_tile_fill(const mxfp4_weight_t *w, const float scale_of[256], int64_t n0,
                      int64_t width, int64_t k0, int64_t k1, float *value, float *block_scale)
{
    const int64_t K = w->K;
    const int64_t c0 = k0 / 2, c1 = k1 / 2;     /* bytes of each row */
    /* Columns written: a half-width tile's other half is never read. */
    const int64_t filled = width <= TILE_N / 2 ? TILE_N / 2 : TILE_N;
    int64_t c_done = c0;                        /* bytes filled by the vector path */
#ifdef WT_VECTOR_FILL
    /* 16 bytes (one 32-block of k) of 16 rows at a time: transpose the bytes
     * in registers, then each k's 16 values are one contiguous store.  Rows
     * past the width read as code 0 (+0.0). */
    static const uint8_t zero_row[16];
    if (e2m1_bits_ok()) {
        c_done = c0 + (c1 - c0) / 16 * 16;
        for (int64_t h = 0; h < filled / 16; h++) {
            const uint8_t *row[16];
            const int whole = 16 * h + 16 <= width;   /* no row past the width */
            for (int r = 0; r < 16; r++) {
                const int64_t j = 16 * h + r;
                row[r] = j < width ? w->packed + (n0 + j) * (K / 2) : NULL;
            }
            for (int64_t c = c0; c < c_done; c += 16) {
                wt_u8x16 v[16];
                if (whole) {
                    for (int r = 0; r < 16; r++)
                        memcpy(&v[r], row[r] + c, 16);
                    if (c + 256 < K / 2)
                        for (int r = 0; r < 16; r++)
                            __builtin_prefetch(row[r] + c + 256);
                } else {
                    for (int r = 0; r < 16; r++)
                        memcpy(&v[r], row[r] ? row[r] + c : zero_row, 16);
                }
                transpose_16x16(v);
                for (int i = 0; i < 16; i++) {
                    const int64_t k2 = c + bitrev4[i] - c0;   /* v[i]: byte c + bitrev4[i] of each row */
                    const wt_i32x16 code = widen_u8x16(v[i]);
                    const wt_i32x16 lo = e2m1_lookup(code & 15), hi = e2m1_lookup(code >> 4);
                    memcpy(value + (2 * k2) * TILE_N + 16 * h, &lo, sizeof lo);
                    memcpy(value + (2 * k2 + 1) * TILE_N + 16 * h, &hi, sizeof hi);
                }
            }
        }
    }
#endif
    for (int64_t c = c_done; c < c1; c++) {
        float *d0 = value + (2 * (c - c0)) * TILE_N, *d1 = d0 + TILE_N;
        for (int64_t j = 0; j < filled; j++) {
            const uint8_t b = j < width ? w->packed[(n0 + j) * (K / 2) + c] : 0;
            d0[j] = e2m1_decode(b & 0x0F);
            d1[j] = e2m1_decode(b >> 4);
        }
    }
    if (!block_scale)
        return;
    /* Column by column, with the scale layout's stride hoisted out (the
     * bytes mxfp4_scale_at reads). */
    const int64_t b0 = k0 / 32, b1 = k1 / 32;
    const int nk = w->layout == SCALE_LAYOUT_NK;
    const int64_t stride = nk ? 1 : w->N;
    for (int64_t j = 0; j < TILE_N; j++) {
        if (j >= width) {
            for (int64_t b = b0; b < b1; b++)
                block_scale[(b - b0) * TILE_N + j] = 0.0f;
            continue;
        }
        const uint8_t *col = nk ? w->scales + (n0 + j) * (K / 32) : w->scales + n0 + j;
        for (int64_t b = b0; b < b1; b++)
            block_scale[(b - b0) * TILE_N + j] = scale_of[col[b * stride]];
    }
}
