/* Register-blocked, in-order dot products over a k-major fp32 weight chunk,
 * shared by w4a8.perblock, w4a4.aiter, bf16.skinny, bf16.sequential and
 * ref_linear (through tile_gemm.h).
 *
 * The weight chunk is w[kc][TILE_N] (padding columns 0); the activations are
 * fp32 rows x[m][k] with row stride ldx, pointing at the chunk's first k.
 * A call computes up to TILE_DOT_MB rows at once over the first nv vectors
 * of each row (nv = TD_NV for a whole tile, TD_NV / 2 for a half-width
 * one): each row's accumulators are lanes (one output column each), so the
 * loops vectorize across columns and the rows give the independent add
 * chains that hide the adder latency.  Blocking rows and columns, cutting K
 * into chunks, and keeping a few 32-blocks in flight at once never change
 * bits: for every (m, n) the helpers do exactly the operations, in exactly
 * the order, stated here -- the same as the plain scalar loop each model's
 * header describes.  (Accumulators sit in memory between calls; storing and
 * reloading an fp32 is exact.)
 *
 *   tile_dot_blocks:  for each 32-block b of the chunk, ascending:
 *                         s = +0; for k in block ascending: s += x[k] * w[k][j];
 *                         acc += s * bs[b][j]                  (xs == NULL)
 *                         acc += s * (xs[i][b] * bs[b][j])     (xs != NULL)
 *                     The caller sets acc = +0 before the first chunk.
 *                     Each block's s is its own chain, independent of the
 *                     others until it is added to acc, so with few rows the
 *                     helper sums up to TD_BLOCKS_IN_FLIGHT blocks side by
 *                     side and then adds them to acc in block order.
 *   tile_dot_segment: part = +0 (fresh) or as stored; for k ascending over
 *                     the segment: part += x[k] * w[k][j].  tile_gemm.c
 *                     cuts K into split ranges and reduces the parts in
 *                     split order.
 *
 * Written with GCC/Clang vector extensions (the project builds with GCC or
 * Clang); -ffp-contract=off keeps every mul and add separate, except where
 * td_fma_exact fuses them on purpose (the in-block sums, whose products are
 * exact, so fusing changes no bit; see there).  One thing no
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
 * each row keeps nv accumulators live (plus as many weight vectors per k).
 * The vector is never wider than the target's, so no function passes a
 * vector its ABI lacks. */
#if defined(__AVX512F__)
#define TD_VW 16
/* 32 registers: 6 rows keep 12 block sums and the 12 running sums in
 * registers across the blocks (TD_BLOCKS_REG), with the 2 weight vectors and
 * the broadcast x.  kr_bench --models 1024 on a 2-core AVX-512 EPYC, against
 * 8 rows with the running sums stored every block: w4a8.perblock 0.54 ->
 * 0.505-0.515 s, w4a4.aiter 0.62 -> 0.54 s; 7 rows spill (aiter 0.635 s),
 * 5 rows 0.527 / 0.555 s. */
#define TD_MB_DEFAULT 6
#define TD_REG_ACC 1
#elif defined(__AVX__)
#define TD_VW 8
/* 16 registers: a whole tile (4 vectors a row) leaves room for 2 rows, and
 * then the weight vectors are reloaded for each row (10 loads a k, more than
 * the 2 a cycle the load ports take for 8 mul + add pairs).  Half a tile at
 * a time keeps its 2 weight vectors in registers.  Each column's sums are
 * the same either way; only which columns a call walks changes.  Rows: with
 * FMA, 6 (12 sums in flight, enough to cover a fused multiply-add's 4-5
 * cycles on 2 units, and 12 + 2 weight vectors + the broadcast x fill the
 * 16 registers); without, 4 (8 mul + add pairs and the temporaries). */
#define TD_WHOLE_AS_HALVES 1
#if defined(__FMA__)
#define TD_MB_DEFAULT 6
#else
#define TD_MB_DEFAULT 4
#endif
#else
#define TD_VW 4
#define TD_MB_DEFAULT 1
#endif
#ifndef TILE_DOT_MB
#define TILE_DOT_MB TD_MB_DEFAULT
#endif
#ifndef TD_REG_ACC
#define TD_REG_ACC 0
#endif
#define TD_NV (TILE_N / TD_VW)          /* vectors per tile row */
#define TD_NV_HALF (TD_NV / 2)          /* vectors per half-width tile row */
#if TILE_N % (2 * TD_VW) != 0
#error "TILE_N must be a multiple of twice the vector width"
#endif

/* Independent add chains the blocks helper aims for (rows x vectors x
 * blocks in flight), and the most blocks it keeps in flight. */
#define TD_CHAINS 8
#define TD_BLOCKS_IN_FLIGHT 8

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

/* acc + x * w for products that are exact in fp32: then one fused
 * multiply-add rounds once, exactly where mul + add rounds (the mul does not
 * round), so the bits are the same and a core with FMA units does the k-step
 * in one instruction instead of two.  Only the blocks helper uses it, and only
 * for the in-block sums of small-format values (fp8 or e2m1 times e2m1: at
 * most 4 x 2 significant bits, exponents far inside fp32's normal range);
 * the split-K sums of bf16 or fp32 values keep mul + add, whose products
 * round. */
#if defined(__AVX512F__) && TD_VW == 16
#include <immintrin.h>
static inline td_vec td_fma_exact(td_vec acc, float x, td_vec w)
{
    return (td_vec)_mm512_fmadd_ps(_mm512_set1_ps(x), (__m512)w, (__m512)acc);
}
#elif defined(__FMA__) && TD_VW == 8
#include <immintrin.h>
/* With 4 rows (8 sums in flight) the fused form measured slower than
 * mul + add on a Zen 2 core: too few chains for its latency.  With 6 rows
 * (TD_MB_DEFAULT above) it measured 20-25% faster than mul + add on a Zen 3
 * core, which also issues half the instructions. */
static inline td_vec td_fma_exact(td_vec acc, float x, td_vec w)
{
    return (td_vec)_mm256_fmadd_ps(_mm256_set1_ps(x), (__m256)w, (__m256)acc);
}
#else
static inline td_vec td_fma_exact(td_vec acc, float x, td_vec w)
{
    return acc + x * w;
}
#endif

/* Each weight vector of a k is loaded once and used for every row.  The
 * compiler would rather fold the load into each row's multiply (one load a
 * row and vector): with several rows that is more loads than the ports take
 * per cycle, and the k-step waits on them.  An empty asm that takes the
 * vector in a register makes the load a value of its own.  No arithmetic
 * changes. */
#if defined(__x86_64__) || defined(__i386__)
#define TD_IN_REGISTER(v) __asm__("" : "+v"(v))
#else
#define TD_IN_REGISTER(v) ((void)0)
#endif

/* One k of the in-order sums: ACC[i][v] = ACC[i][v] + x[i][k] * w[k][v], MB
 * rows, the product rounded (STEP td_mul_add) or exact (STEP td_fma_exact). */
static inline td_vec td_mul_add(td_vec acc, float x, td_vec w)
{
    return acc + x * w;
}
#define TD_RANK1(MB, NV, ACC, K, STEP)                                                        \
    do {                                                                                      \
        td_vec wv[NV];                                                                        \
        for (int v = 0; v < NV; v++) {                                                        \
            wv[v] = td_load(w + (K) * TILE_N + v * TD_VW);                                    \
            TD_IN_REGISTER(wv[v]);                                                            \
        }                                                                                     \
        for (int i = 0; i < MB; i++) {                                                        \
            const float xv = x[i * ldx + (K)];                                                \
            for (int v = 0; v < NV; v++)                                                      \
                (ACC)[i][v] = STEP((ACC)[i][v], xv, wv[v]);                                   \
        }                                                                                     \
    } while (0)

/* With 16 registers (AVX2) the running sums acc stay in memory between
 * blocks.  Left to itself the compiler keeps them in registers across the
 * whole chunk, which leaves too few for the block sums s: some of those then
 * live on the stack, and a k-step waits on a store and a reload (measured: a
 * model GEMM at a third of the sgemm's rate on a 16-register AVX2 core).
 * Reloading acc once per 32-block costs a few loads; the operations and
 * their order, so the bits, are the same.  With 32 (AVX-512) both fit:
 * TD_BLOCKS_REG. */
#define TD_ACC_IN_MEMORY() __asm__ volatile("" ::: "memory")

/* BB blocks in flight, starting at block b, for MB rows and NV vectors. */
#define TD_BLOCKS_STEP(MB, NV, BB)                                                            \
    do {                                                                                      \
        td_vec s[BB][MB][NV];                                                                 \
        for (int bb = 0; bb < BB; bb++)                                                       \
            for (int i = 0; i < MB; i++)                                                      \
                for (int v = 0; v < NV; v++)                                                  \
                    s[bb][i][v] = (td_vec){0};                                                \
        for (int kk = 0; kk < 32; kk++)                                                       \
            for (int bb = 0; bb < BB; bb++) {                                                 \
                const int64_t k = (b + bb) * 32 + kk;                                         \
                TD_RANK1(MB, NV, s[bb], k, td_fma_exact);                                     \
            }                                                                                 \
        for (int bb = 0; bb < BB; bb++)                                                       \
            for (int v = 0; v < NV; v++) {                                                    \
                const td_vec sc = td_load(bs + (b + bb) * TILE_N + v * TD_VW);                \
                for (int i = 0; i < MB; i++) {                                                \
                    float *o = acc[i] + v * TD_VW;                                            \
                    if (xs)                                                                   \
                        td_store(o, td_load(o) + s[bb][i][v] * (xs[i * ldxs + b + bb] * sc)); \
                    else                                                                      \
                        td_store(o, td_load(o) + s[bb][i][v] * sc);                           \
                }                                                                             \
            }                                                                                 \
        TD_ACC_IN_MEMORY();                                                                   \
    } while (0)

/* acc in registers across the blocks (AVX-512: 32 registers hold MB x NV
 * block sums and as many running sums): the same operations in the same
 * order as TD_BLOCKS_STEP, without storing and reloading acc every block. */
#define TD_BLOCKS_REG(MB, NV)                                                                 \
    do {                                                                                      \
        td_vec a[MB][NV];                                                                     \
        for (int i = 0; i < MB; i++)                                                          \
            for (int v = 0; v < NV; v++)                                                      \
                a[i][v] = td_load(acc[i] + v * TD_VW);                                        \
        for (; b < nblk; b++) {                                                               \
            td_vec s[MB][NV];                                                                 \
            for (int i = 0; i < MB; i++)                                                      \
                for (int v = 0; v < NV; v++)                                                  \
                    s[i][v] = (td_vec){0};                                                    \
            for (int kk = 0; kk < 32; kk++) {                                                 \
                const int64_t k = b * 32 + kk;                                                \
                TD_RANK1(MB, NV, s, k, td_fma_exact);                                         \
            }                                                                                 \
            for (int v = 0; v < NV; v++) {                                                    \
                const td_vec sc = td_load(bs + b * TILE_N + v * TD_VW);                       \
                for (int i = 0; i < MB; i++)                                                  \
                    a[i][v] = xs ? a[i][v] + s[i][v] * (xs[i * ldxs + b] * sc)                \
                                 : a[i][v] + s[i][v] * sc;                                    \
            }                                                                                 \
        }                                                                                     \
        for (int i = 0; i < MB; i++)                                                          \
            for (int v = 0; v < NV; v++)                                                      \
                td_store(acc[i] + v * TD_VW, a[i][v]);                                        \
    } while (0)

#define TD_BB(MB, NV)                                                                         \
    ((MB) * (NV) >= TD_CHAINS ? 1                                                             \
     : TD_CHAINS / ((MB) * (NV)) > TD_BLOCKS_IN_FLIGHT ? TD_BLOCKS_IN_FLIGHT                  \
                                                       : TD_CHAINS / ((MB) * (NV)))

/* acc[i][j] (rows x + i * ldx, i < MB; lanes j < NV * TD_VW) over nblk
 * 32-blocks: the per-block sum above; xs is NULL or the per-row block
 * factors of these blocks, xs[i * ldxs + b]. */
#define TD_BLOCKS_FN(NAME, MB, NV)                                                            \
    static inline void NAME(const float *w, const float *x, int64_t ldx, int64_t nblk,        \
                            const float *bs, const float *xs, int64_t ldxs,                   \
                            float acc[][TILE_N])                                              \
    {                                                                                         \
        enum { BB = TD_BB(MB, NV) };                                                          \
        int64_t b = 0;                                                                        \
        if (TD_REG_ACC && (MB) * (NV) >= TD_CHAINS) {                                         \
            TD_BLOCKS_REG(MB, NV);                                                            \
            return;                                                                           \
        }                                                                                     \
        for (; b + BB <= nblk; b += BB)                                                       \
            TD_BLOCKS_STEP(MB, NV, BB);                                                       \
        for (; b < nblk; b++)                                                                 \
            TD_BLOCKS_STEP(MB, NV, 1);                                                        \
    }

/* part[i][j] over len k's: fresh (part = +0 first) or continuing. */
#define TD_SEGMENT_FN(NAME, MB, NV)                                                           \
    static inline void NAME(const float *w, const float *x, int64_t ldx, int64_t len,         \
                            int fresh, float part[][TILE_N])                                  \
    {                                                                                         \
        td_vec p[MB][NV];                                                                     \
        for (int i = 0; i < MB; i++)                                                          \
            for (int v = 0; v < NV; v++)                                                      \
                p[i][v] = fresh ? (td_vec){0} : td_load(part[i] + v * TD_VW);                 \
        for (int64_t k = 0; k < len; k++) {                                                   \
            TD_RANK1(MB, NV, p, k, td_mul_add);                                               \
        }                                                                                     \
        for (int i = 0; i < MB; i++)                                                          \
            for (int v = 0; v < NV; v++)                                                      \
                td_store(part[i] + v * TD_VW, p[i][v]);                                       \
    }

/* One call of either helper, so a single switch picks the row count. */
typedef struct {
    const float *w, *x;
    int64_t ldx;
    int mb, half, segment;
    int64_t nblk, ldxs;         /* blocks */
    const float *bs, *xs;
    float (*acc)[TILE_N];
    int64_t len;                /* segment */
    int fresh;
    float (*part)[TILE_N];
} td_call_t;

#define TD_DEFINE(MB)                                                                         \
    TD_BLOCKS_FN(tile_dot_blocks_full_##MB, MB, TD_NV)                                        \
    TD_BLOCKS_FN(tile_dot_blocks_half_##MB, MB, TD_NV_HALF)                                   \
    TD_SEGMENT_FN(tile_dot_segment_full_##MB, MB, TD_NV)                                      \
    TD_SEGMENT_FN(tile_dot_segment_half_##MB, MB, TD_NV_HALF)                                 \
    static inline void tile_dot_run_##MB(const td_call_t *c)                                  \
    {                                                                                         \
        if (c->segment && c->half)                                                            \
            tile_dot_segment_half_##MB(c->w, c->x, c->ldx, c->len, c->fresh, c->part);        \
        else if (c->segment)                                                                  \
            tile_dot_segment_full_##MB(c->w, c->x, c->ldx, c->len, c->fresh, c->part);        \
        else if (c->half)                                                                     \
            tile_dot_blocks_half_##MB(c->w, c->x, c->ldx, c->nblk, c->bs, c->xs, c->ldxs,     \
                                      c->acc);                                                \
        else                                                                                  \
            tile_dot_blocks_full_##MB(c->w, c->x, c->ldx, c->nblk, c->bs, c->xs, c->ldxs,     \
                                      c->acc);                                                \
    }

TD_DEFINE(1)
#if TILE_DOT_MB >= 2
TD_DEFINE(2)
#endif
#if TILE_DOT_MB >= 3
TD_DEFINE(3)
#endif
#if TILE_DOT_MB >= 4
TD_DEFINE(4)
#endif
#if TILE_DOT_MB >= 5
TD_DEFINE(5)
#endif
#if TILE_DOT_MB >= 6
TD_DEFINE(6)
#endif
#if TILE_DOT_MB >= 7
TD_DEFINE(7)
#endif
#if TILE_DOT_MB >= 8
TD_DEFINE(8)
#endif
#if TILE_DOT_MB > 8
#error "TILE_DOT_MB is at most 8"
#endif

#define TD_CASE(MB)                                                                           \
    case MB:                                                                                  \
        tile_dot_run_##MB(c);                                                                 \
        break;

/* c->mb rows, 1 <= mb <= TILE_DOT_MB; anything else runs one row. */
static inline void tile_dot_run(const td_call_t *c)
{
    switch (c->mb) {
#if TILE_DOT_MB >= 8
        TD_CASE(8)
#endif
#if TILE_DOT_MB >= 7
        TD_CASE(7)
#endif
#if TILE_DOT_MB >= 6
        TD_CASE(6)
#endif
#if TILE_DOT_MB >= 5
        TD_CASE(5)
#endif
#if TILE_DOT_MB >= 4
        TD_CASE(4)
#endif
#if TILE_DOT_MB >= 3
        TD_CASE(3)
#endif
#if TILE_DOT_MB >= 2
        TD_CASE(2)
#endif
    default:
        tile_dot_run_1(c);
        break;
    }
}

/* c, or with TD_WHOLE_AS_HALVES a whole tile as its two halves in turn. */
static inline void tile_dot_call(td_call_t c)
{
#ifdef TD_WHOLE_AS_HALVES
    if (!c.half) {
        enum { H = TILE_N / 2 };
        c.half = 1;
        tile_dot_run(&c);
        c.w += H;
        c.bs = c.bs ? c.bs + H : NULL;
        c.acc = c.acc ? (float(*)[TILE_N])(c.acc[0] + H) : NULL;
        c.part = c.part ? (float(*)[TILE_N])(c.part[0] + H) : NULL;
    }
#endif
    tile_dot_run(&c);
}

/* Rows x .. x + (mb - 1) * ldx, 1 <= mb <= TILE_DOT_MB, into acc[0 .. mb);
 * half: only the first TILE_N / 2 columns. */
static inline void tile_dot_blocks(const float *w, const float *x, int64_t ldx, int mb, int half,
                                   int64_t nblk, const float *bs, const float *xs, int64_t ldxs,
                                   float acc[][TILE_N])
{
    tile_dot_call((td_call_t){.w = w, .x = x, .ldx = ldx, .mb = mb, .half = half, .segment = 0,
                              .nblk = nblk, .bs = bs, .xs = xs, .ldxs = ldxs, .acc = acc});
}

static inline void tile_dot_segment(const float *w, const float *x, int64_t ldx, int mb, int half,
                                    int64_t len, int fresh, float part[][TILE_N])
{
    tile_dot_call((td_call_t){.w = w, .x = x, .ldx = ldx, .mb = mb, .half = half, .segment = 1,
                              .len = len, .fresh = fresh, .part = part});
}

#undef TD_CASE
#undef TD_DEFINE

#endif
