/* The column-tiled GEMM driver shared by w4a8.perblock, w4a4.aiter,
 * bf16.skinny, bf16.sequential and ref_linear: out[m][n] =
 * bf16(acc[m][n] (* row_scale[m])) with acc summed in one of tile_dot.h's
 * two orders.
 *
 * Work is cut into tasks of (up to four consecutive column tiles, row
 * range); a task walks K in chunks of TILE_GEMM_KC, filling each tile's chunk
 * of the weight into a k-major buffer (the model's fill callback) and running
 * up to 512 rows of its range over them, a row group over every tile before
 * the next group (so x is read from memory once per task, not once per
 * tile), before the next chunk, so the weight is decoded once per
 * 512 rows of a task and stays in the L1/L2 cache while it is used (at 128
 * rows the decode was a quarter of a prefill replay's model time).  The accumulators of
 * the range's rows live between chunks in another stack buffer.  Small
 * shapes get enough tasks to keep every thread busy: narrow outputs use
 * half-width tiles, and few tiles are cut by rows as well.  None of this
 * changes an output bit: every (m, n) is summed by one task in the order
 * stated in tile_dot.h. */
#ifndef KR_TILE_GEMM_H
#define KR_TILE_GEMM_H

#include <stdint.h>

#include "weight_tile.h"    /* TILE_N */

/* k per chunk (a multiple of 32 and of 16). */
#define TILE_GEMM_KC 256

typedef enum {
    TILE_SUM_BLOCKS,        /* per 32-block sums scaled by the weight's block factor */
    TILE_SUM_SPLITS,        /* split-K partial sums reduced in split order */
} tile_sum_t;

struct tile_gemm;

/* Writes the weight of columns [n0, n0 + width) (width <= TILE_N, columns
 * past it zero, or left unwritten when width <= TILE_N / 2) for k in
 * [k0, k1) into value[k - k0][j], and for TILE_SUM_BLOCKS the block factors
 * of blocks [k0/32, k1/32) into block_scale[b - k0/32][j] (zero past the
 * width). */
typedef void (*tile_fill_fn)(const struct tile_gemm *g, int64_t n0, int64_t width, int64_t k0,
                             int64_t k1, float *value, float *block_scale);

typedef struct tile_gemm {
    int64_t M, N, K;
    const float *x;             /* [M][K] operand values */
    tile_sum_t order;
    const float *x_block;       /* TILE_SUM_BLOCKS: NULL or [M][K/32] per-row block factors */
    int64_t splits;             /* TILE_SUM_SPLITS: SK >= 1, K % SK == 0 */
    tile_fill_fn fill;
    const void *fill_ctx;       /* for the fill callback */
    const float *row_scale;     /* NULL, or [M]: out = bf16(acc * row_scale[m]) */
    uint16_t *out;              /* [M][N] */
} tile_gemm_t;

/* Runs the whole GEMM on up to `threads` threads (0 = the default). */
void tile_gemm_run(const tile_gemm_t *g, int threads);

#endif
