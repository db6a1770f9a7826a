/* Hand-written W4A8 bugs of the held-out corpus, and correct variants that
 * sum in another order: each one plugin, built with -DBUG_<id>=1
 * -DBUG_NAME="<id>" (CMakeLists.txt).  Written as a kernel author makes
 * these mistakes, not from the diagnosis grammar; each is marked "BUG:".
 * The specification is buggy_kernels.c's: per output (m, n), IEEE fp32,
 *     acc = 0; for each 32-block b: s = sum_k fp8(x[m][k]) * e2m1(w[n][k]);
 *     acc += s * 2^(E[n][b] - 127);   out[m][n] = bf16_rne(acc * x_scale[m])
 * with w [N, K/2] (element 2j in the low nibble) and E in [K/32, N]. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "plugin_util.h"

#ifndef BUG_NAME
#error "build with -DBUG_NAME=\"id\" -DBUG_id=1"
#endif

#ifdef BUG_h_signed_nibble
/* BUG: a 16-entry table reached with a signed index: the 16 floats before
 * it (zeros here) are what a negative index reads. */
static const float e2m1_signed_tab[32] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                          0, .5f, 1, 1.5f, 2, 3, 4, 6,
                                          -0.0f, -.5f, -1, -1.5f, -2, -3, -4, -6};
#endif

/* Element k of weight row `row` ([N, K/2] packed). */
static float weight_at(const uint8_t *row, int64_t k)
{
#ifdef BUG_h_signed_nibble
    const int8_t byte = (int8_t)row[k / 2];
    /* BUG: the high nibble taken from a signed byte: an arithmetic shift, so
     * bytes >= 0x80 give -8..-1 and index before the table. */
    const int code = (k & 1) ? (byte >> 4) : (byte & 15);
    return e2m1_signed_tab[16 + code];
#else
    return kreplay_e2m1_value(kreplay_e2m1_code(row, k));
#endif
}

#ifdef BUG_h_fp16_partial8
static float half_round(float v)
{
    return (float)(_Float16)v;
}
#endif

/* One output's dot over the blocks, the kernel's way.  xrow: the row's
 * activations (decoded), wrow: the weight row (decoded), brow: its block
 * scales. */
static float dot(const float *xrow, const float *wrow, const float *brow, int64_t K, int64_t N,
                 int64_t n)
{
    const int64_t nb = K / 32;
    (void)N;
    (void)n;
    (void)nb;
#if defined(BUG_c_fp64)
    double acc = 0.0;       /* a double accumulator, rounded once */
    for (int64_t k = 0; k < K; k++)
        acc += (double)xrow[k] * wrow[k] * brow[k / 32];
    return (float)acc;
#elif defined(BUG_c_kahan)
    float acc = 0.0f, comp = 0.0f;      /* compensated sum over every product */
    for (int64_t k = 0; k < K; k++) {
        const float y = xrow[k] * wrow[k] * brow[k / 32] - comp;
        const float t = acc + y;
        comp = (t - acc) - y;
        acc = t;
    }
    return acc;
#elif defined(BUG_c_pairwise)
    float part[4096];       /* pairwise over the block partials */
    int64_t cnt = nb;
    for (int64_t b = 0; b < nb; b++) {
        float s = 0.0f;
        for (int64_t k = 32 * b; k < 32 * b + 32; k++)
            s += xrow[k] * wrow[k];
        part[b] = s * brow[b];
    }
    while (cnt > 1) {
        for (int64_t i = 0; i < cnt / 2; i++)
            part[i] = part[2 * i] + part[2 * i + 1];
        if (cnt & 1)
            part[cnt / 2] = part[cnt - 1];
        cnt = (cnt + 1) / 2;
    }
    return part[0];
#elif defined(BUG_c_splitk_rev)
    float total = 0.0f;     /* split-K in 4, the partials reduced last to first */
    const int64_t per = nb / 4 ? nb / 4 : nb;
    for (int64_t s0 = (nb / per - 1) * per; s0 >= 0; s0 -= per) {
        float p = 0.0f;
        for (int64_t b = s0; b < s0 + per; b++) {
            float s = 0.0f;
            for (int64_t k = 32 * b; k < 32 * b + 32; k++)
                s += xrow[k] * wrow[k];
            p += s * brow[b];
        }
        total += p;
    }
    return total;
#else
    float acc = 0.0f;
    int64_t b_end = nb;
#ifdef BUG_h_k_bound_n
    /* BUG: the K loop bounded by the wrong dimension (N where K was meant) */
    b_end = (N < K ? N : K) / 32;
#endif
    for (int64_t b = 0; b < b_end; b++) {
        float s = 0.0f;
#if defined(BUG_h_k_step2)
        for (int64_t k = 32 * b; k < 32 * b + 32; k += 2)   /* BUG: the step of an unrolled loop */
            s += xrow[k] * wrow[k];
#elif defined(BUG_h_fp16_partial8)
        for (int64_t k8 = 32 * b; k8 < 32 * b + 32; k8 += 8) {
            /* BUG: each 8-element partial kept in a half register */
            float h = 0.0f;
            for (int64_t k = k8; k < k8 + 8; k++)
                h = half_round(h + xrow[k] * wrow[k]);
            s += h;
        }
#elif defined(BUG_h_swizzle)
        for (int64_t k = 32 * b; k < 32 * b + 32; k++) {
            /* BUG: the weight tile read with the shared-memory swizzle, but it
             * was stored without it */
            const int64_t kk = 32 * b + ((k & 31) ^ ((n & 3) << 3));
            s += xrow[k] * wrow[kk];
        }
#else
        for (int64_t k = 32 * b; k < 32 * b + 32; k++)
            s += xrow[k] * wrow[k];
#endif
#ifdef BUG_h_lost_update_cols
        /* BUG: split-K in two; the second half's partial is stored by the other
         * warp of the 32-column tile, and for its 16 columns it overwrites
         * nothing but is never added (no barrier before the reduction) */
        if (b >= nb / 2 && (n & 31) >= 16)
            continue;
#endif
        acc += s * brow[b];
    }
    return acc;
#endif
}

static int hand_launch(const void *x_fp8, const void *weight, const void *weight_scale,
                       const void *weight_ref, const float *x_scale, void *out, int64_t M,
                       int64_t N, int64_t K, void *stream)
{
    if (weight_ref || stream || K % 32 || K / 32 > 4096)
        return kreplay_fail("a CPU per-block kernel: no weight_ref or stream, K a multiple of 32 "
                            "up to 131072", 3);
    const uint8_t *x = x_fp8, *w = weight, *es = weight_scale;
    uint16_t *o = out;
    const int64_t nb = K / 32;
    float *xrows = malloc((size_t)(M * K) * sizeof(float)), *wrow = malloc((size_t)K * sizeof(float)),
          *brow = malloc((size_t)nb * sizeof(float));
    if (!xrows || !wrow || !brow) {
        free(xrows), free(wrow), free(brow);
        return kreplay_fail("out of memory", 4);
    }
    for (int64_t m = 0; m < M; m++) {
#ifdef BUG_h_x_pitch
        /* BUG: the activation row pitch taken from the packed weight (K/2 bytes) */
        const uint8_t *xr = x + m * (K / 2);
#else
        const uint8_t *xr = x + m * K;
#endif
        for (int64_t k = 0; k < K; k++)
            xrows[m * K + k] = kreplay_e4m3fn_value(xr[k]);
    }
    for (int64_t n = 0; n < N; n++) {
#ifdef BUG_h_tile_base
        /* BUG: the weight row taken tile-relative (the tile's base forgotten) */
        const int64_t wn = n % 16;
#else
        const int64_t wn = n;
#endif
        for (int64_t k = 0; k < K; k++)
            wrow[k] = weight_at(w + wn * (K / 2), k);
        for (int64_t b = 0; b < nb; b++)
            brow[b] = kreplay_e8m0_value(es[b * N + wn]);
#ifdef BUG_h_acc_not_reset
        static float carry[4096];   /* BUG: the accumulator of row m lives across columns */
        if (n == 0)
            memset(carry, 0, sizeof carry);
#endif
        for (int64_t m = 0; m < M; m++) {
            float acc = dot(xrows + m * K, wrow, brow, K, N, n);
#ifdef BUG_h_acc_not_reset
            if (m < 4096) {
                carry[m] += acc;
                acc = carry[m];
            }
#endif
#ifdef BUG_h_xscale_tile_first
            const float xs = x_scale[m / 16 * 16];     /* BUG: the tile's first row's scale */
#else
            const float xs = x_scale[m];
#endif
            o[m * N + n] = kreplay_bf16_rne(acc * xs);
        }
    }
    free(xrows), free(wrow), free(brow);
    return kreplay_ok();
}

KREPLAY_PLUGIN_ONE_KERNEL("heldout_" BUG_NAME, kreplay_last_error,
                          .name = "bug." BUG_NAME,
                          .summary = "held-out corpus (hand-written): " BUG_NAME,
                          .accumulation = "per 32-block, or as the variant says",
                          KREPLAY_W4A8_PERBLOCK_OPERANDS,
                          .k_multiple = 32,
                          .launch = hand_launch);
