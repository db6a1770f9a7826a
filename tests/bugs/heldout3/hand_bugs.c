/* A third corpus of hand-written W4A8 bugs, and correct variants that sum
 * in yet another legal fp32 order: each one plugin, built with
 * -DBUG_<id>=1 -DBUG_NAME="<id>".  Each mistake is one a kernel author
 * makes, marked "BUG:".  The specification, per output (m, n), IEEE fp32:
 *     acc = 0; for each 32-block b: s = sum_k fp8(x[m][k]) * e2m1(w[n][k]);
 *     acc += s * 2^(E[b][n] - 127);   out[m][n] = bf16_rne(acc * x_scale[m])
 * with w [N, K/2] (element 2j in the low nibble) and E in [K/32, N]. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "plugin_util.h"

#ifndef BUG_NAME
#error "build with -DBUG_NAME=\"id\" -DBUG_id=1"
#endif

/* The most 32-blocks a row may have: the tree sum keeps one partial per block. */
#define MAX_BLOCKS 1024

/* Element k of weight row `row` ([N, K/2] packed). */
static float weight_at(const uint8_t *row, int64_t k)
{
    const uint8_t code = kreplay_e2m1_code(row, k);
#ifdef BUG_h3_e2m1_six_as_four
    /* BUG: the kernel's own e2m1 table, its last magnitude typed as 4 */
    static const float mag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 4.0f};
    return (code & 8) ? -mag[code & 7] : mag[code & 7];
#else
    return kreplay_e2m1_value(code);
#endif
}

/* The products of 32-block b, the kernel's order. */
static inline float block_sum(const float *xrow, const float *wrow, int64_t b)
{
#if defined(BUG_c3_block_reverse_k)
    float s = 0.0f;     /* from the block's last element down to its first */
    for (int64_t k = 32 * b + 31; k >= 32 * b; k--)
        s += xrow[k] * wrow[k];
    return s;
#elif defined(BUG_h3_unroll4_lane_typo)
    float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};     /* unrolled by 4, one lane each */
    for (int64_t k = 32 * b; k < 32 * b + 32; k += 4) {
        s[0] += xrow[k] * wrow[k];
        s[1] += xrow[k + 1] * wrow[k + 1];
        s[2] += xrow[k + 2] * wrow[k + 2];
        s[3] += xrow[k + 2] * wrow[k + 2];     /* BUG: the line above copied, k + 3 meant */
    }
    return (s[0] + s[1]) + (s[2] + s[3]);
#else
    float s = 0.0f;
    for (int64_t k = 32 * b; k < 32 * b + 32; k++)
        s += xrow[k] * wrow[k];
    return s;
#endif
}

#ifdef BUG_c3_tree_blocks
/* Adds p[lo..hi) as a balanced binary tree. */
static float tree_sum(const float *p, int64_t lo, int64_t hi)
{
    if (hi - lo == 1)
        return p[lo];
    const int64_t mid = lo + (hi - lo) / 2;
    return tree_sum(p, lo, mid) + tree_sum(p, mid, hi);
}
#endif

/* One output's dot over the blocks, the kernel's way.  xrow: the row's
 * activations (decoded), wrow: the weight row (decoded), brow: its block
 * scales. */
static float dot(const float *xrow, const float *wrow, const float *brow, int64_t K)
{
    const int64_t nb = K / 32;
#if defined(BUG_c3_tree_blocks)
    float part[MAX_BLOCKS];     /* each block's scaled partial, then a tree */
    for (int64_t b = 0; b < nb; b++)
        part[b] = block_sum(xrow, wrow, b) * brow[b];
    return tree_sum(part, 0, nb);
#elif defined(BUG_c3_even_odd_acc)
    float even = 0.0f, odd = 0.0f;      /* two accumulators, joined at the end */
    for (int64_t b = 0; b < nb; b += 2) {
        even += block_sum(xrow, wrow, b) * brow[b];
        if (b + 1 < nb)
            odd += block_sum(xrow, wrow, b + 1) * brow[b + 1];
    }
    return even + odd;
#elif defined(BUG_h3_kblock_rotate_scale)
    /* software-pipelined: block 0 is loaded in the prologue, the loop runs
     * over blocks 1.., block 0 is added in the epilogue */
    float acc = 0.0f, sc = brow[0];
    const float first = block_sum(xrow, wrow, 0);
    for (int64_t b = 1; b < nb; b++) {
        sc = brow[b];
        acc += block_sum(xrow, wrow, b) * sc;
    }
    /* BUG: the epilogue multiplies by `sc`, which the loop left holding the
     * last block's scale, not block 0's */
    return acc + first * sc;
#elif defined(BUG_h3_acc_reset_ktile)
    /* an outer loop over 1024-K tiles (32 blocks), an inner one over their blocks */
    float acc = 0.0f;
    for (int64_t t = 0; t < nb; t += 32) {
        acc = 0.0f;     /* BUG: the accumulator's initialisation moved into the tile loop */
        for (int64_t b = t; b < t + 32 && b < nb; b++)
            acc += block_sum(xrow, wrow, b) * brow[b];
    }
    return acc;
#else
    float acc = 0.0f;
    for (int64_t b = 0; b < nb; b++)
        acc += block_sum(xrow, wrow, b) * brow[b];
    return acc;
#endif
}

/* Weight row wn's codes for element k: its own row, unless the variant
 * reads elsewhere. */
static const uint8_t *weight_row_ptr(const uint8_t *w, int64_t wn, int64_t k, int64_t N, int64_t K)
{
#ifdef BUG_h3_lastblk_next_row
    /* BUG: the pointer is advanced to the next row before the tail (last
     * 32-block) load instead of after it; the last row's advance is guarded */
    if (k >= K - 32 && wn + 1 < N)
        return w + (wn + 1) * (K / 2);
#endif
    (void)k;
    (void)N;
    return w + wn * (K / 2);
}

/* The column of the scale tensor that weight row wn reads. */
static int64_t scale_col(int64_t wn, int64_t N)
{
#ifdef BUG_h3_gateup_scale_base
    /* BUG: the fused gate/up kernel runs the up half (columns N/2..) as a
     * second pass whose weight and output pointers are advanced by N/2 rows,
     * but whose scale pointer is not */
    if (wn >= N / 2)
        return wn - N / 2;
#endif
    (void)N;
    return wn;
}

/* The per-token scale output row m is multiplied by. */
static float row_scale(const float *x_scale, int64_t m, int64_t M)
{
#ifdef BUG_h3_xscale_half_batch
    /* BUG: the batch is run as two halves; the second half's x and out
     * pointers are advanced by M/2 rows, the x_scale pointer is not */
    if (m >= M / 2)
        return x_scale[m - M / 2];
#endif
    (void)M;
    return x_scale[m];
}

/* Decodes the activations [M, K] into xrows. */
static void decode_activations(float *xrows, const uint8_t *x, int64_t M, int64_t K)
{
    for (int64_t m = 0; m < M; m++) {
#ifdef BUG_h3_mtail_masked_zero
        /* BUG: the 16-row tile's load mask is m < M / 16 * 16 (the full
         * tiles' rows) where m < M was meant: the tail tile loads zeros */
        const int live = m < M / 16 * 16;
#else
        const int live = 1;
#endif
        for (int64_t k = 0; k < K; k++)
            xrows[m * K + k] = live ? kreplay_e4m3fn_value(x[m * K + k]) : 0.0f;
    }
}

/* Decodes weight row n into wrow [K] and its block scales into brow [K/32]. */
static void stage_weight_row(float *wrow, float *brow, const uint8_t *w, const uint8_t *es,
                             int64_t n, int64_t N, int64_t K)
{
    for (int64_t k = 0; k < K; k++)
        wrow[k] = weight_at(weight_row_ptr(w, n, k, N, K), k);
    for (int64_t b = 0; b < K / 32; b++)
        brow[b] = kreplay_e8m0_value(es[b * N + scale_col(n, N)]);
}

static KREPLAY_LAUNCH(hand_launch)
{
    if (weight_ref || stream || K % 64 || K / 32 > MAX_BLOCKS)
        return kreplay_fail("a CPU per-block kernel: no weight_ref or stream, K a multiple of 64 "
                            "and at most 32 * 1024",
                            3);
    /* the staged weight row and its scales first, then the decoded activations [M, K] */
    float *wrow = malloc((size_t)(K + K / 32 + M * K) * sizeof(float));
    if (!wrow)
        return kreplay_fail("out of memory", 4);
    float *brow = wrow + K, *xrows = brow + K / 32;
    uint16_t *o = out;
    decode_activations(xrows, x_fp8, M, K);
    for (int64_t n = 0; n < N; n++) {
        stage_weight_row(wrow, brow, weight, weight_scale, n, N, K);
        for (int64_t m = 0; m < M; m++)
            o[m * N + n] =
                kreplay_bf16_rne(dot(xrows + m * K, wrow, brow, K) * row_scale(x_scale, m, M));
    }
    free(wrow);
    return kreplay_ok();
}

KREPLAY_PLUGIN_ONE_KERNEL("heldout3_" BUG_NAME, kreplay_last_error, .launch = hand_launch,
                          .name = "bug." BUG_NAME, KREPLAY_W4A8_PERBLOCK_OPERANDS,
                          .k_multiple = 64,
                          .summary = "third hand-written corpus: " BUG_NAME,
                          .accumulation = "per 32-block in order, unless the variant sums otherwise");
