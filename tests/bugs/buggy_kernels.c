/* A corpus of realistic W4A8 kernel bugs, written as external plugins
 * against kernels/plugin.h and kernels/plugin_util.h alone (no kreplay
 * code).  Built once per bug with
 * -DBUG_<name>=1 -DBUG_NAME="<name>" into plugins/libkr_bug_<name>.so
 * (tests/bugs/CMakeLists.txt); BUG_correct is the correct kernel, the same
 * per-block path as kernels/plugins/examples/example_w4a8.c.  Every bug is
 * one small deviation at the place a real kernel gets it wrong, marked
 * "BUG:"; tests/test_bug_corpus.c replays each and keeps the score.
 *
 * The specification, per output (m, n), IEEE fp32, no FMA:
 *     acc = +0
 *     for each 32-block b in increasing k:
 *         s = +0; for k in the block: s += fp8(x[m][k]) * e2m1(w[n][k])
 *         acc += s * 2^(E[n][b] - 127)
 *     out[m][n] = bf16_rne(acc * x_scale[m])
 * with w [N, K/2] checkpoint order (element 2j in the low nibble) and E in
 * [K/32, N]. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "plugin_util.h"

#ifndef BUG_NAME
#error "build with -DBUG_NAME=\"name\" -DBUG_name=1"
#endif

#ifdef BUG_fp8_e5m2
static float e5m2_value(uint8_t c)
{
    const int sign = c >> 7, e = (c >> 2) & 31, m = c & 3;
    float v = e == 31 ? (m ? NAN : INFINITY)
                      : e == 0 ? ldexpf((float)m, -16) : ldexpf((float)(4 + m), e - 17);
    return sign ? -v : v;
}
#endif

static float e2m1_value(uint8_t c)
{
#ifdef BUG_e2m1_unsigned
    static const float mag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    return mag[c & 7];      /* BUG: the sign bit is never looked at */
#else
    return kreplay_e2m1_value(c);
#endif
}

static float e8m0_value(uint8_t e)
{
#ifdef BUG_e8m0_bias128
    return e == 0xFF ? NAN : ldexpf(1.0f, (int)e - 128);   /* BUG: bias 128 */
#else
    return kreplay_e8m0_value(e);
#endif
}

static uint16_t bf16_round(float v)
{
#ifdef BUG_bf16_truncate
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    if (isnan(v))
        return (uint16_t)((u >> 16 & 0x8000u) | 0x7FC0u);
    return (uint16_t)(u >> 16);     /* BUG: truncation, not round-to-nearest-even */
#else
    return kreplay_bf16_rne(v);
#endif
}

#if defined(BUG_acc_bf16) || defined(BUG_splitk_bf16)
static float bf16_value(uint16_t h)
{
    const uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
#endif

#ifdef BUG_acc_fp16
/* v rounded to the nearest half (ties to even): what a __half holds. */
static float half_value(float v)
{
    if (!isfinite(v) || v == 0.0f)
        return v;
    if (fabsf(v) >= 65520.0f)
        return v > 0 ? INFINITY : -INFINITY;
    int e;
    frexpf(fabsf(v), &e);
    const int lsb = (e - 1 < -14 ? -14 : e - 1) - 10;
    return ldexpf(rintf(ldexpf(v, -lsb)), lsb);
}
#endif

/* The scale byte the kernel reads for row n, block b ([K/32, N] layout). */
static uint8_t scale_byte(const uint8_t *es, int64_t N, int64_t K, int64_t n, int64_t b)
{
    const int64_t nb = K / 32;
    (void)nb;
    (void)N;
#if defined(BUG_scale_next_block)
    b = b + 1 < nb ? b + 1 : b;     /* BUG: the K-block index of the scale is one ahead */
#elif defined(BUG_scale_next_row)
    n = n + 1 < N ? n + 1 : n;      /* BUG: the scale of the next weight row */
#endif
#ifdef BUG_scale_layout_nk
    return es[n * nb + b];          /* BUG: reads the [K/32, N] bytes as [N, K/32] */
#else
    return es[b * N + n];
#endif
}

/* Weight rows are decoded and summed PANEL at a time: lane j of every
 * loop below is output column n0 + j, summed in the specification's order
 * (the lanes only put several outputs in one vector register; no sum is
 * reordered, so the bits are those of one output at a time). */
#define PANEL 16
/* Four lanes of one vector register (the GCC / Clang vector extension):
 * each lane's sum is its own, so the bits are the scalar loop's. */
typedef float lanes4_t __attribute__((vector_size(16)));

static void free_buffers(float *wpanel, float *bpanel, float *xrows, float *acc)
{
    free(wpanel);
    free(bpanel);
    free(xrows);
    free(acc);
}

/* One activation row against a panel of weight rows, over the 32-blocks
 * [b_begin, b_end): acc[j] for weight row n0 + j.  wpanel is [K][PANEL],
 * bpanel [K/32][PANEL]. */
static void dot_blocks(const float *xrow, const float *wpanel, const float *bpanel, int64_t b_begin,
                       int64_t b_end, float acc[PANEL])
{
    for (int j = 0; j < PANEL; j++)
        acc[j] = 0.0f;
#ifdef BUG_drop_last_kblock
    b_end = b_end - 1;              /* BUG: the K loop stops one block early */
#endif
    for (int64_t b = b_begin; b < b_end; b++) {
        lanes4_t s4[PANEL / 4] = {{0.0f}};
        for (int64_t k = 32 * b; k < 32 * b + 32; k++) {
            const lanes4_t xv = {xrow[k], xrow[k], xrow[k], xrow[k]};
            const float *w = wpanel + k * PANEL;
            for (int j = 0; j < PANEL / 4; j++) {
                lanes4_t wv;
                memcpy(&wv, w + 4 * j, sizeof wv);
                s4[j] += xv * wv;
            }
        }
        float s[PANEL];
        memcpy(s, s4, sizeof s);
        const float *scale = bpanel + b * PANEL;
        for (int j = 0; j < PANEL; j++) {
#ifdef BUG_scale_twice
            acc[j] += s[j] * scale[j] * scale[j];   /* BUG: the block scale folded in twice */
#else
            acc[j] += s[j] * scale[j];
#endif
#ifdef BUG_first_kblock_twice
            if (b == 0)
                acc[j] += s[j] * scale[j];          /* BUG: the prologue block is accumulated again */
#endif
#ifdef BUG_acc_bf16
            acc[j] = bf16_value(bf16_round(acc[j]));  /* BUG: the running sum kept in bf16 */
#endif
#ifdef BUG_acc_fp16
            acc[j] = half_value(acc[j]);              /* BUG: the running sum kept in a __half */
#endif
        }
    }
}

/* Weight rows [n0, n0 + PANEL) decoded into wpanel [K][PANEL] and their
 * block scales into bpanel [K/32][PANEL]; rows past N are zero. */
static void decode_panel(const uint8_t *w, const uint8_t *es, int64_t N, int64_t K, int64_t n0,
                         float *wpanel, float *bpanel)
{
    for (int j = 0; j < PANEL; j++) {
        const int64_t n = n0 + j;
        for (int64_t k = 0; k < K; k++) {
            float v = 0.0f;
            if (n < N) {
                const uint8_t byte = w[n * (K / 2) + k / 2];
#ifdef BUG_nibble_swap
                const uint8_t code = (k & 1) ? (uint8_t)(byte & 15) : (uint8_t)(byte >> 4); /* BUG */
#else
                const uint8_t code = (k & 1) ? (uint8_t)(byte >> 4) : (uint8_t)(byte & 15);
#endif
                v = e2m1_value(code);
            }
            wpanel[k * PANEL + j] = v;
        }
        for (int64_t b = 0; b < K / 32; b++)
            bpanel[b * PANEL + j] = n < N ? e8m0_value(scale_byte(es, N, K, n, b)) : 0.0f;
    }
}

static int bug_launch(const void *x_fp8, const void *weight, const void *weight_scale,
                      const void *weight_ref, const float *x_scale, void *out, int64_t M,
                      int64_t N, int64_t K, void *stream)
{
    const uint8_t *x = x_fp8, *w = weight, *es = weight_scale;
    uint16_t *o = out;
    if (stream || weight_ref)
        return kreplay_fail("a CPU plugin on the per-block path: stream and weight_ref must be NULL", 1);
    if (M < 1 || N < 1 || K < 32 || K % 32)
        return kreplay_fail("bad shape: need M, N >= 1 and K a multiple of 32", 3);
#ifdef BUG_crash_n_tail
    if (N % 64) {
        volatile int *p = NULL;     /* BUG: the N-tail path dereferences an unset tile pointer */
        *p = 1;
    }
#endif
    float xlut[256];
    for (int c = 0; c < 256; c++) {
#ifdef BUG_fp8_e5m2
        xlut[c] = e5m2_value((uint8_t)c);   /* BUG: the fp8 operand decoded as e5m2 */
#else
        xlut[c] = kreplay_e4m3fn_value((uint8_t)c);
#endif
    }
    const int64_t nb = K / 32;
    float *wpanel = malloc((size_t)K * PANEL * sizeof(float));
    float *bpanel = malloc((size_t)nb * PANEL * sizeof(float));
    float *xrows = malloc((size_t)(M * K) * sizeof(float));
    float *acc = malloc((size_t)(M * N) * sizeof(float));
    if (!wpanel || !bpanel || !xrows || !acc) {
        free_buffers(wpanel, bpanel, xrows, acc);
        return kreplay_fail("out of memory", 4);
    }
    for (int64_t i = 0; i < M * K; i++)
        xrows[i] = xlut[x[i]];
    for (int64_t n0 = 0; n0 < N; n0 += PANEL) {
        decode_panel(w, es, N, K, n0, wpanel, bpanel);
        const int lanes = N - n0 < PANEL ? (int)(N - n0) : PANEL;
        for (int64_t m = 0; m < M; m++) {
            float sums[PANEL];
#ifdef BUG_splitk_bf16
            /* BUG: split-K in two; each split's epilogue applies x_scale and
             * stores its partial to a workspace of the output type (bf16),
             * and the reduction adds the two stored partials. */
            float second[PANEL];
            dot_blocks(xrows + m * K, wpanel, bpanel, 0, nb / 2, sums);
            dot_blocks(xrows + m * K, wpanel, bpanel, nb / 2, nb, second);
            for (int j = 0; j < lanes; j++)
                acc[m * N + n0 + j] = bf16_value(bf16_round(sums[j] * x_scale[m])) +
                                      bf16_value(bf16_round(second[j] * x_scale[m]));
#else
            dot_blocks(xrows + m * K, wpanel, bpanel, 0, nb, sums);
            for (int j = 0; j < lanes; j++)
                acc[m * N + n0 + j] = sums[j];
#endif
        }
    }
#ifdef BUG_race_lost_update
    /* BUG: split-K in two halves whose second partial sum is added without an
     * atomic; which elements lose it depends on timing (here: on the clock). */
    {
        unsigned seed = (unsigned)time(NULL) ^ (unsigned)getpid() ^ (unsigned)clock();
        for (int64_t i = 0; i < M * N; i++) {
            seed = seed * 1103515245u + 12345u;
            if ((seed >> 16) % 97 == 0)
                acc[i] *= 0.5f;     /* the lost update: one of two equal halves */
        }
    }
#endif
    for (int64_t m = 0; m < M; m++) {
#ifdef BUG_m_tail_unwritten
        if (m >= M / 16 * 16)
            break;                  /* BUG: the partial M tile is never stored */
#endif
        for (int64_t n = 0; n < N; n++) {
#ifdef BUG_n_tail_zero
            if (n >= N / 32 * 32) {
                o[m * N + n] = 0;   /* BUG: the N tail of a 32-wide tiling masked to zero */
                continue;
            }
#endif
#ifdef BUG_col_stride_unwritten
            if (n % 4 == 3)
                continue;           /* BUG: a 4-wide store loop that stores only 3 */
#endif
            int64_t mm = m, nn = n;
#ifdef BUG_tile_transposed
            if (m / 16 * 16 + 16 <= M && n / 16 * 16 + 16 <= N) {
                mm = m / 16 * 16 + n % 16;  /* BUG: the 16x16 tile stored with swapped strides */
                nn = n / 16 * 16 + m % 16;
            }
#endif
#ifdef BUG_tile_edge_row_copy
            if (m % 16 == 15)
                mm = m - 1;         /* BUG: the tile's last row stored from the row before */
#endif
            float v = acc[mm * N + nn];
#if defined(BUG_splitk_bf16)
            (void)mm;               /* the split epilogues applied x_scale already */
#elif defined(BUG_xscale_divided)
            v = v / x_scale[m];     /* BUG: dequantized by dividing */
#elif defined(BUG_xscale_by_column)
            v = v * x_scale[n % M]; /* BUG: the per-token scale indexed by the column */
#else
            v = v * x_scale[mm];
#endif
#ifdef BUG_nan_masked_zero
            if (v != v)
                v = 0.0f;           /* BUG: NaN outputs "cleaned" to zero, hiding the poison */
#endif
#ifdef BUG_negate_odd_rows
            if (m & 1)
                v = -v;             /* BUG: the odd lane of a row pair takes the wrong sign */
#endif
            o[m * N + n] = bf16_round(v);
        }
    }
#ifdef BUG_oob_m_tail
    if (M % 16)
        o[M * N] = o[M * N - 1];    /* BUG: the partial M tile's store is not masked */
#endif
    free_buffers(wpanel, bpanel, xrows, acc);
    return kreplay_ok();
}

KREPLAY_PLUGIN_ONE_KERNEL("bug_" BUG_NAME, kreplay_last_error,
                          .name = "bug." BUG_NAME,
                          .summary = "bug corpus: " BUG_NAME,
                          .accumulation = "per 32-block: s += x*w over k ascending; acc += s * 2^(E-127) "
                                          "over blocks ascending; out = bf16(acc * x_scale[m])",
                          KREPLAY_W4A8_PERBLOCK_OPERANDS,
                          .k_multiple = 32,
                          .launch = bug_launch);
