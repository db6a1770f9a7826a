/* Column tiles of an MXFP4 weight laid out for the CPU models.
 *
 * The models vectorize across output columns: for a tile of TILE_N columns
 * they keep the unscaled e2m1 values k-major ([K][TILE_N]) and the block
 * scales ([K/32][TILE_N]) so the innermost loop runs over contiguous columns,
 * each column accumulating in its own lane in a fixed k order. */
#ifndef KR_WEIGHT_TILE_H
#define KR_WEIGHT_TILE_H

#include <stdint.h>

#include "gemm_ref.h"

#define TILE_N 32

typedef struct {
    int64_t n0, width;      /* columns [n0, n0 + width), width <= TILE_N */
    float *value;           /* [K][TILE_N] e2m1 value of each element; padding columns 0 */
    float *block_scale;     /* [K/32][TILE_N] 2^(E-127) by the weight's e8m0 mode; padding 0 */
    uint8_t *block_exp;     /* [K/32][TILE_N] raw e8m0 bytes; padding 0 */
} weight_tile_t;

/* Allocates and fills the tile of columns [n0, n0 + TILE_N) (clipped to N).
 * Returns 0, or -1 on allocation failure. */
int weight_tile_load(const mxfp4_weight_t *w, int64_t n0, weight_tile_t *t);
void weight_tile_free(weight_tile_t *t);

#endif
