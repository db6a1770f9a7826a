#include "weight_tile.h"

#include <stdlib.h>
#include <string.h>

#include "formats.h"
#include "mxfp4_weight.h"

/* The fill transposes in registers with GCC/Clang vector builtins where the
 * compiler has them (GCC >= 12, Clang), else it takes the scalar loop; both
 * store the same values. */
#if defined(__has_builtin)
#if __has_builtin(__builtin_shufflevector) && __has_builtin(__builtin_convertvector)
#define WT_VECTOR_FILL 1
#endif
#endif

#ifdef WT_VECTOR_FILL
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
#endif

int weight_tile_load(const mxfp4_weight_t *w, int64_t n0, weight_tile_t *t)
{
    const int64_t K = w->K, nblocks = K / 32;
    memset(t, 0, sizeof *t);
    t->n0 = n0;
    t->width = (w->N - n0) < TILE_N ? (w->N - n0) : TILE_N;
    /* Every entry is written below (padding columns 0), so no calloc. */
    t->value = aligned_alloc(64, (size_t)K * TILE_N * sizeof(float));
    t->block_scale = aligned_alloc(64, (size_t)nblocks * TILE_N * sizeof(float));
    t->block_exp = malloc((size_t)nblocks * TILE_N);
    if (!t->value || !t->block_scale || !t->block_exp) {
        weight_tile_free(t);
        return -1;
    }
    const int64_t width = t->width;
    int64_t c_done = 0;         /* bytes of each row filled by the vector path */
#ifdef WT_VECTOR_FILL
    /* 16 bytes (one 32-block of k) of 16 rows at a time: transpose the bytes
     * in registers, then each k's 16 values are one contiguous store.  Rows
     * past the width read as code 0 (+0.0). */
    static const uint8_t zero_row[16];
    if (e2m1_bits_ok()) {
        c_done = (K / 2) / 16 * 16;
        for (int64_t h = 0; h < TILE_N / 16; h++) {
            const uint8_t *row[16];
            for (int r = 0; r < 16; r++) {
                const int64_t j = 16 * h + r;
                row[r] = j < width ? w->packed + (n0 + j) * (K / 2) : NULL;
            }
            for (int64_t c = 0; c < c_done; c += 16) {
                wt_u8x16 v[16];
                for (int r = 0; r < 16; r++) {
                    if (row[r] && c + 256 < K / 2)
                        __builtin_prefetch(row[r] + c + 256);
                    memcpy(&v[r], row[r] ? row[r] + c : zero_row, 16);
                }
                transpose_16x16(v);
                for (int i = 0; i < 16; i++) {
                    const int64_t k2 = c + bitrev4[i];   /* v[i]: byte k2 of each row */
                    const wt_i32x16 code = __builtin_convertvector(v[i], wt_i32x16);
                    const wt_i32x16 clo = code & 15, chi = code >> 4;
                    wt_i32x16 lo, hi;
                    e2m1_bits(&clo, &lo);
                    e2m1_bits(&chi, &hi);
                    memcpy(t->value + (2 * k2) * TILE_N + 16 * h, &lo, sizeof lo);
                    memcpy(t->value + (2 * k2 + 1) * TILE_N + 16 * h, &hi, sizeof hi);
                }
            }
        }
    }
#endif
    if (c_done < K / 2) {
        float e2m1_value[16];
        for (int c = 0; c < 16; c++)
            e2m1_value[c] = e2m1_decode((uint8_t)c);
        for (int64_t k2 = c_done; k2 < K / 2; k2++) {
            float *d0 = t->value + (2 * k2) * TILE_N, *d1 = d0 + TILE_N;
            for (int64_t j = 0; j < TILE_N; j++) {
                const uint8_t b = j < width ? w->packed[(n0 + j) * (K / 2) + k2] : 0;
                d0[j] = e2m1_value[b & 0x0F];
                d1[j] = e2m1_value[b >> 4];
            }
        }
    }
    /* e8m0_decode is a pure function of the byte: one table per tile. */
    float scale_of[256];
    for (int e = 0; e < 256; e++)
        scale_of[e] = e8m0_decode((uint8_t)e, w->e8m0_mode);
    for (int64_t b = 0; b < nblocks; b++) {
        uint8_t *be = t->block_exp + b * TILE_N;
        float *bs = t->block_scale + b * TILE_N;
        for (int64_t j = 0; j < TILE_N; j++) {
            const uint8_t e = j < width ? mxfp4_scale_at(w->scales, w->layout, w->N, K, n0 + j, b) : 0;
            be[j] = e;
            bs[j] = j < width ? scale_of[e] : 0.0f;
        }
    }
    return 0;
}

void weight_tile_free(weight_tile_t *t)
{
    free(t->value);
    free(t->block_scale);
    free(t->block_exp);
    memset(t, 0, sizeof *t);
}
