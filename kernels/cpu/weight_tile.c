#include "weight_tile.h"

#include <stdlib.h>
#include <string.h>

#include "formats.h"
#include "mxfp4_weight.h"

int weight_tile_load(const mxfp4_weight_t *w, int64_t n0, weight_tile_t *t)
{
    const int64_t K = w->K, nblocks = K / 32;
    memset(t, 0, sizeof *t);
    t->n0 = n0;
    t->width = (w->N - n0) < TILE_N ? (w->N - n0) : TILE_N;
    t->value = calloc((size_t)K * TILE_N, sizeof(float));
    t->block_scale = calloc((size_t)nblocks * TILE_N, sizeof(float));
    t->block_exp = calloc((size_t)nblocks * TILE_N, 1);
    if (!t->value || !t->block_scale || !t->block_exp) {
        weight_tile_free(t);
        return -1;
    }
    float e2m1_value[16];
    for (int c = 0; c < 16; c++)
        e2m1_value[c] = e2m1_decode((uint8_t)c);
    for (int64_t j = 0; j < t->width; j++) {
        const int64_t n = n0 + j;
        const uint8_t *row = w->packed + n * (K / 2);
        for (int64_t k2 = 0; k2 < K / 2; k2++) {
            t->value[(2 * k2) * TILE_N + j] = e2m1_value[row[k2] & 0x0F];
            t->value[(2 * k2 + 1) * TILE_N + j] = e2m1_value[row[k2] >> 4];
        }
        for (int64_t b = 0; b < nblocks; b++) {
            uint8_t e = mxfp4_scale_at(w->scales, w->layout, w->N, K, n, b);
            t->block_exp[b * TILE_N + j] = e;
            t->block_scale[b * TILE_N + j] = e8m0_decode(e, w->e8m0_mode);
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
