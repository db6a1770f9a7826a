/* Column tiles of an MXFP4 weight laid out for the CPU models.
 *
 * The models vectorize across output columns: for a tile of TILE_N columns
 * they keep the unscaled e2m1 values k-major ([k][TILE_N], one chunk of K
 * at a time) and the block scales ([k/32][TILE_N]) so the innermost loop
 * runs over contiguous columns, each column accumulating in its own lane in
 * a fixed k order. */
#ifndef KR_WEIGHT_TILE_H
#define KR_WEIGHT_TILE_H

#include <stdint.h>

#include "gemm_ref.h"

#define TILE_N 32

/* Fills the k-major chunk of columns [n0, n0 + width) (width <= TILE_N,
 * n0 + width <= N) for k in [k0, k1), both multiples of 32:
 * value[k - k0][j] = e2m1 value of element (n0 + j, k), and, when
 * block_scale is not NULL, block_scale[b - k0/32][j] = scale_of[E(n0 + j, b)]
 * for the blocks of the range.  Padding columns are 0, except that value's
 * columns 16..31 are left unwritten when the width is 16 or less (a
 * half-width tile, whose sums never read them). */
void weight_tile_fill(const mxfp4_weight_t *w, const float scale_of[256], int64_t n0,
                      int64_t width, int64_t k0, int64_t k1, float *value, float *block_scale);

/* An MXFP4 weight as the source of tile_gemm's chunks: the weight and the
 * block factor of each scale byte by its e8m0 mode, built once per run. */
typedef struct {
    const mxfp4_weight_t *w;
    float scale_of[256];
} weight_tile_source_t;

void weight_tile_source_init(weight_tile_source_t *s, const mxfp4_weight_t *w);

/* tile_gemm's fill callback (tile_fill_fn) for g->fill_ctx a
 * weight_tile_source_t: weight_tile_fill of its weight. */
struct tile_gemm;
void weight_tile_fill_source(const struct tile_gemm *g, int64_t n0, int64_t width, int64_t k0,
                             int64_t k1, float *value, float *block_scale);

/* Runs g, whose shape, activations (x, x_block), epilogue and out are set,
 * in per-32-block order (TILE_SUM_BLOCKS) over the MXFP4 weight w: the GEMM
 * of w4a8.perblock and w4a4.aiter. */
void weight_tile_gemm_blocks(const struct tile_gemm *g, const mxfp4_weight_t *w, int threads);

#endif
