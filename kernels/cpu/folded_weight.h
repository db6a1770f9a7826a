/* Shared machinery of the W4A8 folded family (w4a8.folded, .folded.wperm,
 * .atiled, .decode, .r4d, .partitioned): the per-row reference exponent, the
 * pre-shifted e4m3fn weight, the activation layouts, and the one dot-product
 * core every variant sums with.
 *
 * The folded weight.  Per output row n a reference exponent ref[n] (the case's
 * weight_ref when it holds N entries, else max over blocks of E[n][b], the
 * MXFP4 dispatch's make_row_ref).  Every element is pre-shifted into an
 * e4m3fn value
 *     w8[n][k] = e4m3fn_encode(e2m1(code) * 2^(E[n][k/32] - ref[n]), FP8_SATURATE)
 * exact while ref - E <= 8; further down it rounds (RNE) to a subnormal or 0,
 * which is the production behaviour being modelled; E > ref (an inconsistent
 * weight_ref) can saturate at 448.  The epilogue factor of row n is
 * 2^(ref[n] - 127), an exact float (e8m0_decode of ref under the weight's
 * e8m0 mode: byte 0xFF gives NaN, byte 0 gives 0 under E8M0_ZERO_IS_ZERO).
 * Under E8M0_ZERO_IS_ZERO a block with E = 0 holds zeros, as in the per-block
 * model.
 *
 * The core (folded_dot) sums, for each output column of a tile and each of up
 * to FOLDED_MB rows, x[m][k] * w8[k][j] over a k range in ascending order,
 * starting from +0, in IEEE fp32: fp8 x fp8 products are exact in fp32, so
 * only the order of the additions matters (a fused multiply-add gives the
 * bits of a separate multiply and add). */
#ifndef KR_FOLDED_WEIGHT_H
#define KR_FOLDED_WEIGHT_H

#include <stdint.h>

#include "gemm_ref.h"
#include "kr_error.h"
#include "registry.h"
#include "scratch.h"
#include "weight_tile.h"

/* Rows of M summed together by the core (register blocking; no effect on
 * bits): 8 with 32 vector registers (16 sums of 16 lanes, the weight vectors
 * and the broadcast x fit; kr_bench --models 1024 on a 2-core AVX-512 EPYC:
 * w4a8.folded 0.55 s with 4 rows, 0.47-0.49 s with 8); 6 on a 16-register
 * core with FMA (12 fused sums in flight cover its latency; see tile_dot.h),
 * else 4. */
#if defined(__AVX512F__)
#define FOLDED_MB 8
#elif defined(__AVX__) && defined(__FMA__)
#define FOLDED_MB 6
#else
#define FOLDED_MB 4
#endif

/* Where the weight bytes come from. */
typedef enum {
    FOLDED_W_CHECKPOINT = 0,    /* [N, K/2] row-major */
    FOLDED_W_FRAGMENT,          /* permute_w fragment order, read through its index */
} folded_wlayout_t;

/* Counts behind the folded underflow statistic. */
typedef struct {
    int64_t blocks, blocks_under, blocks_over;  /* ref - E > 8; E > ref */
    int64_t nonzero, changed;                   /* nonzero elements; those w8 does not hold exactly */
} folded_stats_t;

/* Per-run state shared by every column tile (read-only once built). */
typedef struct {
    int64_t N, K;
    const uint8_t *bytes;           /* weight bytes in `wlayout` (owned when `owned`) */
    uint8_t *owned;
    folded_wlayout_t wlayout;
    const uint8_t *scales;
    scale_layout_t scale_layout;
    e8m0_mode_t e8m0_mode;
    uint8_t *ref;                   /* [N] reference exponent per row */
    int ref_from_case;              /* 1: the case's weight_ref; 0: row max (make_row_ref) */
    float *epi;                     /* [N] 2^(ref - 127) */
    folded_stats_t *tile_stats;     /* [tiles], each filled by the tile that owns it */
    int64_t tiles;
    /* value[s + 255][code]: decoded w8 of e2m1 code shifted down by s = ref - E;
     * changed[.][code]: 1 if that value is not e2m1(code) * 2^-s exactly.
     * Row FOLDED_ZERO_ROW is all 0 (a block that is 0 by the weight's own
     * format).  A pure function of (s, code): one table for the process,
     * built once. */
    const float (*value)[16];
    const int32_t (*changed)[16];
} folded_plan_t;

#define FOLDED_ZERO_ROW 511

/* Builds the plan: reference exponents, epilogue factors, the shift table,
 * and (FOLDED_W_FRAGMENT) the permuted weight.  Returns 0 or -1 with err. */
int folded_plan_init(folded_plan_t *p, const kernel_inputs_t *in, folded_wlayout_t wl,
                     kr_error_t *err);
/* Frees what the plan holds and leaves it all zero. */
void folded_plan_free(folded_plan_t *p);

/* One column tile's pre-shifted weight, k-major. */
typedef struct {
    int64_t n0, width;
    float *w;                       /* [K][TILE_N] decoded w8; padding columns 0 */
    float epi[TILE_N];              /* 2^(ref - 127) per column; padding 0 */
    scratch_t buffer;               /* holds w */
    scratch_t rows_buffer;          /* the shift table row of each (block, column), while loading */
} folded_tile_t;

/* Fills tile `tile_index` (columns [tile_index*TILE_N, +TILE_N) clipped to N)
 * and, when record_stats, records its statistics in p->tile_stats[tile_index]
 * (one task per tile must).  0 or -1 (memory). */
int folded_tile_load(folded_plan_t *p, int64_t tile_index, int record_stats, folded_tile_t *t);
void folded_tile_free(folded_tile_t *t);

/* A task of folded_run: rows [m0, m1) of the tile t (loaded for it). */
typedef void (*folded_task_fn)(void *job, const folded_tile_t *t, int64_t m0, int64_t m1);

/* Runs fn over every (tile, row range) of an M-row output on up to `threads`
 * threads.  Few tiles are cut by rows too, so both threads get equal work
 * (each range loads its tile again).  Returns 0, or -1 when a tile's buffer
 * could not be allocated. */
int folded_run(folded_plan_t *p, int64_t M, int threads, folded_task_fn fn, void *job);

/* The activations as the kernel reads them: fp8 codes row-major [M][K], or
 * A-tiled [ceil(M/16)][K/16][32 lanes][8 bytes] (lane l of tile (mt, ks):
 * row 16*mt + (l & 15), k from 16*ks + 8*(l >> 4), 8 consecutive bytes). */
typedef struct {
    const uint8_t *codes;
    int tiled;
    int64_t M, K;
    const float *scale;             /* [M] per-token scale */
    float lut[256];                 /* fp8 value of each code (e4m3fn or e4m3fnuz) */
} folded_act_t;

void folded_act_init(folded_act_t *a, const uint8_t *codes, int tiled, int64_t M, int64_t K,
                     const float *scale, fp8_format_t fmt);

/* Packs row-major codes [M][K] into the A-tiled layout (rows past M are 0).
 * Returns a malloc'd buffer of ceil(M/16)*16*K bytes, or NULL. */
uint8_t *folded_pack_atiled(const uint8_t *codes, int64_t M, int64_t K);

/* sums[i][j] += x[m0+i][k] * w8[k][j] for k in [k0, k1) ascending, fp32,
 * i < mb (1 <= mb <= FOLDED_MB), from +0 (fresh) or from the sums as
 * stored (a sum continued over the next k range: storing and reloading an
 * fp32 changes no bit).  k0 and k1 multiples of 8. */
void folded_dot(const folded_tile_t *t, const folded_act_t *a, int64_t m0, int mb, int64_t k0,
                int64_t k1, int fresh, float sums[][TILE_N]);

/* out[m][n0 + j] = bf16(acc[j] * (scale[m] * epi[j])) for j in [j0, j1). */
void folded_store(const folded_tile_t *t, const float *acc, float xscale, uint16_t *out_row,
                  int64_t j0, int64_t j1);

/* Sums the tiles' statistics and appends the underflow sentence to buf, e.g.
 * "folded underflow: 812/55680 blocks (1.46%) >8 binades below row ref;
 * 0.93% of nonzero weights lost bits". */
void folded_stats_note(const folded_plan_t *p, char *buf, int cap);

/* The MXFP4 dispatch's _r4d_cfg(M, K): (WV, SK, MB, NPW) of r4d's decode GEMM. */
void folded_r4d_cfg(int64_t M, int64_t K, int *wv, int *sk, int *mb, int *npw);

#endif
