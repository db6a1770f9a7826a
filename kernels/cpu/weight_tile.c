#include "weight_tile.h"

#include <string.h>

#include "byte_tile.h"
#include "formats.h"
#include "mxfp4_weight.h"
#include "tile_gemm.h"

void weight_tile_source_init(weight_tile_source_t *s, const mxfp4_weight_t *w)
{
    s->w = w;
    for (int e = 0; e < 256; e++)
        s->scale_of[e] = e8m0_decode((uint8_t)e, w->e8m0_mode);
}

void weight_tile_gemm_blocks(const tile_gemm_t *g, const mxfp4_weight_t *w, int threads)
{
    weight_tile_source_t source;
    weight_tile_source_init(&source, w);
    tile_gemm_t run = *g;
    run.order = TILE_SUM_BLOCKS;
    run.fill = weight_tile_fill_source;
    run.fill_ctx = &source;
    tile_gemm_run(&run, threads);
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
#ifdef BYTE_TILE_VECTOR
    /* 16 bytes (one 32-block of k) of 16 rows at a time: transpose the bytes
     * in registers, then each k's 16 values are one contiguous store.  Rows
     * past the width read as code 0 (+0.0). */
    /* Checked once: the check decodes every code pair. */
    static int vector_ok = -1;      /* -1: not yet checked (a race only repeats the check) */
    int ok = __atomic_load_n(&vector_ok, __ATOMIC_RELAXED);
    if (ok < 0) {
        ok = byte_tile_e2m1_ok();
        __atomic_store_n(&vector_ok, ok, __ATOMIC_RELAXED);
    }
    if (ok) {
        c_done = c0 + (c1 - c0) / 16 * 16;
        for (int64_t h = 0; h < filled / 16; h++) {
            const uint8_t *row[16];
            for (int r = 0; r < 16; r++) {
                const int64_t j = 16 * h + r;
                row[r] = j < width ? w->packed + (n0 + j) * (K / 2) : NULL;
            }
            for (int64_t c = c0; c < c_done; c += 16) {
                bt_i32x16 col[16];
                byte_tile_columns(row, c, c + 256 < K / 2 ? 256 : 0, col);
                for (int i = 0; i < 16; i++) {
                    const int64_t k2 = c + i - c0;      /* col[i]: byte c + i of each row */
                    byte_tile_e2m1_nibbles(&col[i], value + (2 * k2) * TILE_N + 16 * h,
                                           value + (2 * k2 + 1) * TILE_N + 16 * h);
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
