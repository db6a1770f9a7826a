/* Register-blocked, in-order dot products over a k-major fp32 weight tile,
 * shared by w4a8.perblock, w4a4.aiter, bf16.skinny, bf16.sequential and
 * ref_linear.
 *
 * The tile is w[K][TILE_N] (weight_tile_t.value, or any [K][TILE_N] fp32
 * array, padding columns 0); the activations are fp32 rows x[m][k] with row
 * stride ldx.  A call computes up to TILE_DOT_MB rows at once: each row's
 * accumulators are TILE_N lanes (one output column each), so the loops
 * vectorize across columns and the rows give the independent add chains that
 * hide the adder latency.  Blocking rows and columns never changes bits: for
 * every (m, n) the helpers do exactly the operations, in exactly the order,
 * stated here -- the same as the plain scalar loop each model's header
 * describes.  (Accumulators sit in memory between splits and between blocks;
 * storing and reloading an fp32 is exact.)
 *
 *   tile_dot_splits:  K cut into sk equal contiguous ranges of S = K / sk;
 *                     part = +0; for k in range ascending: part += x[k] * w[k][j];
 *                     acc = part_0; acc += part_1; ... acc += part_{sk-1}
 *                     (sk = 1 is the plain sequential dot: acc = +0 + x*w + ...).
 *   tile_dot_blocks:  acc = +0; for each 32-block b ascending:
 *                         s = +0; for k in block ascending: s += x[k] * w[k][j];
 *                         acc += s * bs[b][j]                  (xs == NULL)
 *                         acc += s * (xs[i][b] * bs[b][j])     (xs != NULL)
 *
 * Written with GCC/Clang vector extensions (the project builds with GCC or
 * Clang); -ffp-contract=off keeps every mul and add separate.  One thing no
 * C source pins down: when BOTH operands of an add are NaN, which one the
 * hardware returns depends on the operand order the compiler picked for the
 * commutative add (the scalar loops these replace were no different), and
 * bf16_encode keeps a NaN's sign -- so only the sign of a NaN output can
 * depend on the build. */
#ifndef KR_TILE_DOT_H
#define KR_TILE_DOT_H

#include <stdint.h>
#include <string.h>

#include "weight_tile.h"    /* TILE_N */

/* Lanes per vector and rows per call, by the vector registers there are:
 * each row keeps TILE_N / TD_VW accumulators live (plus as many weight
 * vectors per k).  The vector is never wider than the target's, so no
 * function passes a vector its ABI lacks. */
#if defined(__AVX512F__)
#define TD_VW 16
#define TD_MB_DEFAULT 8
#elif defined(__AVX__)
#define TD_VW 8
#define TD_MB_DEFAULT 2
#else
#define TD_VW 4
#define TD_MB_DEFAULT 1
#endif
#ifndef TILE_DOT_MB
#define TILE_DOT_MB TD_MB_DEFAULT
#endif
#define TD_NV (TILE_N / TD_VW)          /* vectors per tile row */
#if TILE_N % TD_VW != 0
#error "TILE_N must be a multiple of the vector width"
#endif

typedef float td_vec __attribute__((vector_size(TD_VW * sizeof(float))));

static inline td_vec td_load(const float *p)
{
    td_vec v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void td_store(float *p, td_vec v)
{
    memcpy(p, &v, sizeof v);
}

/* out[i][j] for rows x + i * ldx, i < MB: the split-K sum above. */
#define TILE_DOT_SPLITS_MB(MB)                                                                \
    static inline void tile_dot_splits_##MB(const float *w, const float *x, int64_t ldx,      \
                                            int64_t K, int64_t sk,                            \
                                            float out[][TILE_N])                              \
    {                                                                                         \
        const int64_t span = K / sk;                                                          \
        for (int64_t s = 0; s < sk; s++) {                                                    \
            td_vec part[MB][TD_NV];                                                           \
            for (int i = 0; i < MB; i++)                                                      \
                for (int v = 0; v < TD_NV; v++)                                               \
                    part[i][v] = (td_vec){0};                                                 \
            for (int64_t k = s * span; k < (s + 1) * span; k++) {                             \
                td_vec wv[TD_NV];                                                             \
                for (int v = 0; v < TD_NV; v++)                                               \
                    wv[v] = td_load(w + k * TILE_N + v * TD_VW);                              \
                for (int i = 0; i < MB; i++) {                                                \
                    const float xv = x[i * ldx + k];                                          \
                    for (int v = 0; v < TD_NV; v++)                                           \
                        part[i][v] += xv * wv[v];                                             \
                }                                                                             \
            }                                                                                 \
            for (int i = 0; i < MB; i++)                                                      \
                for (int v = 0; v < TD_NV; v++) {                                             \
                    float *o = out[i] + v * TD_VW;                                            \
                    td_store(o, s == 0 ? part[i][v] : td_load(o) + part[i][v]);               \
                }                                                                             \
        }                                                                                     \
    }

/* out[i][j] for rows x + i * ldx, i < MB: the per-32-block sum above; xs is
 * NULL or the per-row block factors, xs[i * ldxs + b]. */
#define TILE_DOT_BLOCKS_MB(MB)                                                                \
    static inline void tile_dot_blocks_##MB(const float *w, const float *x, int64_t ldx,      \
                                            int64_t K, const float *bs, const float *xs,      \
                                            int64_t ldxs, float out[][TILE_N])                \
    {                                                                                         \
        for (int i = 0; i < MB; i++)                                                          \
            for (int j = 0; j < TILE_N; j++)                                                  \
                out[i][j] = 0.0f;                                                             \
        for (int64_t b = 0; b < K / 32; b++) {                                                \
            td_vec s[MB][TD_NV];                                                              \
            for (int i = 0; i < MB; i++)                                                      \
                for (int v = 0; v < TD_NV; v++)                                               \
                    s[i][v] = (td_vec){0};                                                    \
            for (int64_t k = b * 32; k < b * 32 + 32; k++) {                                  \
                td_vec wv[TD_NV];                                                             \
                for (int v = 0; v < TD_NV; v++)                                               \
                    wv[v] = td_load(w + k * TILE_N + v * TD_VW);                              \
                for (int i = 0; i < MB; i++) {                                                \
                    const float xv = x[i * ldx + k];                                          \
                    for (int v = 0; v < TD_NV; v++)                                           \
                        s[i][v] += xv * wv[v];                                                \
                }                                                                             \
            }                                                                                 \
            for (int v = 0; v < TD_NV; v++) {                                                 \
                const td_vec sc = td_load(bs + b * TILE_N + v * TD_VW);                       \
                for (int i = 0; i < MB; i++) {                                                \
                    float *o = out[i] + v * TD_VW;                                            \
                    if (xs)                                                                   \
                        td_store(o, td_load(o) + s[i][v] * (xs[i * ldxs + b] * sc));          \
                    else                                                                      \
                        td_store(o, td_load(o) + s[i][v] * sc);                               \
                }                                                                             \
            }                                                                                 \
        }                                                                                     \
    }

TILE_DOT_SPLITS_MB(1)
TILE_DOT_BLOCKS_MB(1)
#if TILE_DOT_MB >= 2
TILE_DOT_SPLITS_MB(2)
TILE_DOT_BLOCKS_MB(2)
#endif
#if TILE_DOT_MB >= 3
TILE_DOT_SPLITS_MB(3)
TILE_DOT_BLOCKS_MB(3)
#endif
#if TILE_DOT_MB >= 4
TILE_DOT_SPLITS_MB(4)
TILE_DOT_BLOCKS_MB(4)
#endif
#if TILE_DOT_MB >= 5
TILE_DOT_SPLITS_MB(5)
TILE_DOT_BLOCKS_MB(5)
#endif
#if TILE_DOT_MB >= 6
TILE_DOT_SPLITS_MB(6)
TILE_DOT_BLOCKS_MB(6)
#endif
#if TILE_DOT_MB >= 7
TILE_DOT_SPLITS_MB(7)
TILE_DOT_BLOCKS_MB(7)
#endif
#if TILE_DOT_MB >= 8
TILE_DOT_SPLITS_MB(8)
TILE_DOT_BLOCKS_MB(8)
#endif
#undef TILE_DOT_SPLITS_MB
#undef TILE_DOT_BLOCKS_MB

/* Rows x .. x + (mb - 1) * ldx, 1 <= mb <= TILE_DOT_MB, into out[0 .. mb). */
static inline void tile_dot_splits(const float *w, const float *x, int64_t ldx, int mb, int64_t K,
                                   int64_t sk, float out[][TILE_N])
{
    switch (mb) {
#if TILE_DOT_MB >= 8
    case 8: tile_dot_splits_8(w, x, ldx, K, sk, out); break;
#endif
#if TILE_DOT_MB >= 7
    case 7: tile_dot_splits_7(w, x, ldx, K, sk, out); break;
#endif
#if TILE_DOT_MB >= 6
    case 6: tile_dot_splits_6(w, x, ldx, K, sk, out); break;
#endif
#if TILE_DOT_MB >= 5
    case 5: tile_dot_splits_5(w, x, ldx, K, sk, out); break;
#endif
#if TILE_DOT_MB >= 4
    case 4: tile_dot_splits_4(w, x, ldx, K, sk, out); break;
#endif
#if TILE_DOT_MB >= 3
    case 3: tile_dot_splits_3(w, x, ldx, K, sk, out); break;
#endif
#if TILE_DOT_MB >= 2
    case 2: tile_dot_splits_2(w, x, ldx, K, sk, out); break;
#endif
    default: tile_dot_splits_1(w, x, ldx, K, sk, out); break;
    }
}

static inline void tile_dot_blocks(const float *w, const float *x, int64_t ldx, int mb, int64_t K,
                                   const float *bs, const float *xs, int64_t ldxs,
                                   float out[][TILE_N])
{
    switch (mb) {
#if TILE_DOT_MB >= 8
    case 8: tile_dot_blocks_8(w, x, ldx, K, bs, xs, ldxs, out); break;
#endif
#if TILE_DOT_MB >= 7
    case 7: tile_dot_blocks_7(w, x, ldx, K, bs, xs, ldxs, out); break;
#endif
#if TILE_DOT_MB >= 6
    case 6: tile_dot_blocks_6(w, x, ldx, K, bs, xs, ldxs, out); break;
#endif
#if TILE_DOT_MB >= 5
    case 5: tile_dot_blocks_5(w, x, ldx, K, bs, xs, ldxs, out); break;
#endif
#if TILE_DOT_MB >= 4
    case 4: tile_dot_blocks_4(w, x, ldx, K, bs, xs, ldxs, out); break;
#endif
#if TILE_DOT_MB >= 3
    case 3: tile_dot_blocks_3(w, x, ldx, K, bs, xs, ldxs, out); break;
#endif
#if TILE_DOT_MB >= 2
    case 2: tile_dot_blocks_2(w, x, ldx, K, bs, xs, ldxs, out); break;
#endif
    default: tile_dot_blocks_1(w, x, ldx, K, bs, xs, ldxs, out); break;
    }
}

#endif
