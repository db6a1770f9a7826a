/* A second corpus of hand-written W4A8 bugs, and correct variants that sum
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

/* Element k of weight row `row` ([N, K/2] packed). */
static float weight_at(const uint8_t *row, int64_t k)
{
    const uint8_t code = kreplay_e2m1_code(row, k);
#ifdef BUG_h2_e2m1_flush_half
    /* BUG: the decoder treats e2m1's only subnormal (code 1, +-0.5) as a
     * denormal to flush, as an fp32 FTZ habit would */
    if ((code & 7) == 1)
        return 0.0f;
#endif
    return kreplay_e2m1_value(code);
}

static inline float bf16_round(float v)
{
    const uint32_t bits = (uint32_t)kreplay_bf16_rne(v) << 16;
    float r;
    memcpy(&r, &bits, sizeof r);
    return r;
}

/* The products of 32-block b summed in order. */
static inline float block_sum(const float *xrow, const float *wrow, int64_t b)
{
    float s = 0.0f;
    for (int64_t k = 32 * b; k < 32 * b + 32; k++)
        s += xrow[k] * wrow[k];
    return s;
}

/* One output's dot over the blocks, the kernel's way.  xrow: the row's
 * activations (decoded), wrow: the weight row (decoded), brow: its block
 * scales. */
static float dot(const float *xrow, const float *wrow, const float *brow, int64_t K)
{
    const int64_t nb = K / 32;
    (void)nb;
#if defined(BUG_c2_interleave4)
    float acc = 0.0f;       /* 4 interleaved accumulators per block, joined pairwise */
    for (int64_t b = 0; b < nb; b++) {
        float a[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        for (int64_t k = 32 * b; k < 32 * b + 32; k++)
            a[k & 3] += xrow[k] * wrow[k];
        acc += ((a[0] + a[1]) + (a[2] + a[3])) * brow[b];
    }
    return acc;
#elif defined(BUG_c2_fma)
    float acc = 0.0f;       /* every scaled product fused into the accumulator */
    for (int64_t k = 0; k < K; k++)
        acc = fmaf(xrow[k] * wrow[k], brow[k / 32], acc);
    return acc;
#elif defined(BUG_h2_splitk_overlap)
    /* split-K in two halves, the partials added at the end */
    const int64_t half = nb / 2;
    float p0 = 0.0f, p1 = 0.0f;
    for (int64_t b = 0; b < half; b++)
        p0 += block_sum(xrow, wrow, b) * brow[b];
    /* BUG: the second split's first block computed as half - 1 (an
     * inclusive end copied as a start): block half-1 is summed twice */
    for (int64_t b = half - 1; b < nb; b++)
        p1 += block_sum(xrow, wrow, b) * brow[b];
    return p0 + p1;
#elif defined(BUG_h2_scale_shift16)
    /* the scales of a 64-K tile (two blocks) kept in a pair */
    float acc = 0.0f;
    for (int64_t t = 0; t < nb / 2; t++) {
        const float sc[2] = {brow[2 * t], brow[2 * t + 1]};
        for (int64_t b = 2 * t; b < 2 * t + 2; b++) {
            float s[2] = {0.0f, 0.0f};
            for (int64_t k = 32 * b; k < 32 * b + 32; k++) {
                /* BUG: the tile's scale selected by bit 4 of k (a 16-element
                 * block habit) where bit 5 was meant: ((k & 63) >> 5) */
                s[(k & 31) >> 4] += xrow[k] * wrow[k];
            }
            acc += s[0] * sc[0] + s[1] * sc[1];
        }
    }
    return acc;
#else
    float acc = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        acc += block_sum(xrow, wrow, b) * brow[b];
#ifdef BUG_h2_acc_bf16_tile64
        /* BUG: the accumulator spilled through a bf16 register at the end of
         * each 64-K tile */
        if (b & 1)
            acc = bf16_round(acc);
#endif
    }
    return acc;
#endif
}

static uint16_t to_bf16(float v)
{
#ifdef BUG_h2_bf16_truncate
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    return (uint16_t)(bits >> 16);      /* BUG: bf16 by dropping the low half */
#else
    return kreplay_bf16_rne(v);
#endif
}

/* The weight row that output column n reads. */
static int64_t weight_row(int64_t n, int64_t N)
{
#ifdef BUG_h2_ntail_last_col
    /* BUG: the guard of the N tail tile (32 columns) clamps every tail column
     * to N - 1, where only columns >= N needed it */
    if (n >= N / 32 * 32)
        return N - 1;
#endif
    (void)N;
    return n;
}

/* The activation row that output row m of M reads (16-row tiles). */
static int64_t act_row(int64_t m, int64_t M)
{
#ifdef BUG_h2_mtail_prev_row
    /* BUG: the tail tile's last row loaded from r - 1 (the loop written
     * for a tile whose last row is padding) */
    if (M % 16 && m == M - 1)
        return m - 1;
#endif
    (void)M;
    return m;
}

static KREPLAY_LAUNCH(hand_launch)
{
    if (weight_ref || stream || K % 64)
        return kreplay_fail("a CPU per-block kernel: no weight_ref or stream, K a multiple of 64",
                            3);
    const uint8_t *x = x_fp8, *w = weight, *es = weight_scale;
    uint16_t *o = out;
    const int64_t nb = K / 32;
    /* one workspace: the decoded activations [M, K], one weight row, its scales */
    float *xrows = malloc((size_t)(M * K + K + nb) * sizeof(float));
    if (!xrows)
        return kreplay_fail("out of memory", 4);
    float *wrow = xrows + M * K, *brow = wrow + K;
    for (int64_t m = 0; m < M; m++)
        for (int64_t k = 0; k < K; k++)
            xrows[m * K + k] = kreplay_e4m3fn_value(x[act_row(m, M) * K + k]);
    for (int64_t n = 0; n < N; n++) {
        const int64_t wn = weight_row(n, N);
        for (int64_t k = 0; k < K; k++)
            wrow[k] = weight_at(w + wn * (K / 2), k);
        for (int64_t b = 0; b < nb; b++) {
#ifdef BUG_h2_scale_tile_col0
            /* BUG: the scales staged once per 16-column tile, from its first column */
            brow[b] = kreplay_e8m0_value(es[b * N + (wn & ~(int64_t)15)]);
#elif defined(BUG_h2_scale_floor)
            /* BUG: an underflow guard from an fp16 kernel: the exponent floored
             * at 2^-10 */
            brow[b] = kreplay_e8m0_value(es[b * N + wn] < 117 ? 117 : es[b * N + wn]);
#else
            brow[b] = kreplay_e8m0_value(es[b * N + wn]);
#endif
        }
        for (int64_t m = 0; m < M; m++)
            o[m * N + n] = to_bf16(dot(xrows + m * K, wrow, brow, K) * x_scale[m]);
    }
    free(xrows);
    return kreplay_ok();
}

KREPLAY_PLUGIN_ONE_KERNEL("heldout2_" BUG_NAME, kreplay_last_error, .launch = hand_launch,
                          .name = "bug." BUG_NAME, KREPLAY_W4A8_PERBLOCK_OPERANDS,
                          .k_multiple = 64,
                          .summary = "second hand-written corpus: " BUG_NAME,
                          .accumulation = "per 32-block in order, unless the variant sums otherwise");
