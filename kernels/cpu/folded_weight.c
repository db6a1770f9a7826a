#include "folded_weight.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pthread.h>
#include <stdatomic.h>

#include "byte_tile.h"
#include "formats.h"
#include "mxfp4_weight.h"
#include "parallel.h"
#include "tile_dot.h"

#ifdef BYTE_TILE_VECTOR
typedef float float_x16 __attribute__((vector_size(64)));
#endif

/* The shift tables, the same for every plan (see folded_plan_t). */
static float shift_value[FOLDED_ZERO_ROW + 1][16];
static int32_t shift_changed[FOLDED_ZERO_ROW + 1][16];
/* shift_arith[row]: the vector fill may compute the row instead of looking
 * it up: shifted_w8 of e2m1(code) * shift_factor[row] gives every value of
 * the row to the bit, and (value != e2m1(code) * factor) its changed flag
 * (checked for all 16 codes when the table is built). */
static uint8_t shift_arith[FOLDED_ZERO_ROW + 1];
static float shift_factor[FOLDED_ZERO_ROW + 1];
/* shift_exact[row]: the multiply alone gives the row (the shifts e4m3 holds
 * exactly) and nothing is lost: checked the same way. */
static uint8_t shift_exact[FOLDED_ZERO_ROW + 1];

#ifdef BYTE_TILE_VECTOR
/* e4m3fn_decode(e4m3fn_encode(x, FP8_SATURATE)) on 16 lanes of |x| <= 448,
 * no NaN: formats.h's e4m3_encode_in_range (bias 7) then
 * e4m3fn_decode_bits_of, written on vectors. */
static inline void shifted_w8(const float_x16 *in, float_x16 *out)
{
    const float_x16 x = *in;
    const bt_i32x16 u = (bt_i32x16)x, mag = u & 0x7FFFFFFF, sign = u & (int32_t)0x80000000;
    const bt_i32x16 exponent = mag >> 23, above = exponent > 121;   /* -1 or 0 */
    const bt_i32x16 field = (exponent & above) | (121 & ~above);
    const bt_i32x16 m_bits = (field + 20) << 23;
    const bt_i32x16 steps = (bt_i32x16)((float_x16)mag + (float_x16)m_bits) - m_bits;
    const bt_i32x16 code = ((field - 121) << 3) + steps;        /* 7 bits, no sign */
    const bt_i32x16 e = code >> 3, m = code & 7, normal = (e != 0) & 1;
    const bt_i32x16 significand = 8 * normal + m;
    const bt_i32x16 p = e + (1 - normal) - 10;
    const float_x16 value = __builtin_convertvector(significand, float_x16) *
                            (float_x16)((p + 127) << 23);
    *out = (float_x16)((bt_i32x16)value | sign);
}
#endif
static pthread_once_t shift_tables_once = PTHREAD_ONCE_INIT;

static void shift_tables_build(void)
{
    for (int s = -255; s <= 255; s++) {
        for (int c = 0; c < 16; c++) {
            const float v = e2m1_decode((uint8_t)c);
            const float shifted = ldexpf(v, -s);   /* exact wherever e4m3 can tell */
            const float w8 = e4m3fn_decode(e4m3fn_encode(shifted, FP8_SATURATE));
            shift_value[s + 255][c] = w8;
            shift_changed[s + 255][c] = (double)w8 != ldexp((double)v, -s);
        }
    }
    /* FOLDED_ZERO_ROW stays 0 (static storage), and looked up. */
#ifdef BYTE_TILE_VECTOR
    for (int s = 0; s <= 126; s++) {
        const float factor = f32_from_bits((uint32_t)(127 - s) << 23);     /* 2^-s */
        float_x16 x;
        for (int c = 0; c < 16; c++)
            x[c] = e2m1_decode((uint8_t)c) * factor;
        float_x16 w8;
        shifted_w8(&x, &w8);
        int same = 1, exact = 1;
        for (int c = 0; c < 16; c++) {
            same &= f32_bits(w8[c]) == f32_bits(shift_value[s + 255][c]);
            same &= (w8[c] != x[c]) == shift_changed[s + 255][c];
            exact &= f32_bits(x[c]) == f32_bits(shift_value[s + 255][c]);
            exact &= shift_changed[s + 255][c] == 0;
        }
        shift_arith[s + 255] = (uint8_t)same;
        shift_exact[s + 255] = (uint8_t)exact;
        shift_factor[s + 255] = factor;
    }
#endif
}

int folded_plan_init(folded_plan_t *p, const kernel_inputs_t *in, folded_wlayout_t wl,
                     kr_error_t *err)
{
    memset(p, 0, sizeof *p);
    const mxfp4_weight_t *w = &in->weight;
    const int64_t N = in->N, K = in->K;
    if (!w->packed || !w->scales)
        return kr_fail(err, "the case has no MXFP4 weight");
    if (N <= 0 || K <= 0 || K % 32 != 0 || w->N != N || w->K != K)
        return kr_fail(err, "bad W4A8 shape N=%lld K=%lld (weight %lldx%lld)", (long long)N,
                       (long long)K, (long long)w->N, (long long)w->K);
    p->N = N;
    p->K = K;
    p->scales = w->scales;
    p->scale_layout = w->layout;
    p->e8m0_mode = w->e8m0_mode;
    p->wlayout = wl;
    p->bytes = w->packed;
    if (wl == FOLDED_W_FRAGMENT) {
        if (N % 16 != 0)
            return kr_fail(err, "fragment order needs N %% 16 == 0 (N=%lld)", (long long)N);
        p->owned = malloc((size_t)N * (size_t)(K / 2));
        if (!p->owned)
            return kr_fail(err, "out of memory permuting the weight");
        if (wperm_permute(w->packed, N, K, p->owned)) {
            folded_plan_free(p);
            return kr_fail(err, "fragment order needs N %% 16 == 0 and K %% 16 == 0");
        }
        p->bytes = p->owned;
    }
    p->tiles = (N + TILE_N - 1) / TILE_N;
    p->ref = malloc((size_t)N);
    p->epi = malloc((size_t)N * sizeof(float));
    p->tile_stats = calloc((size_t)p->tiles, sizeof(folded_stats_t));
    if (!p->ref || !p->epi || !p->tile_stats) {
        folded_plan_free(p);
        return kr_fail(err, "out of memory for the folded weight plan");
    }
    const int64_t nblocks = K / 32;
    if (in->weight_ref && in->weight_ref_len == N) {
        memcpy(p->ref, in->weight_ref, (size_t)N);
        p->ref_from_case = 1;
    } else {
        /* make_row_ref: weight_scale.max(dim=0) over the [K/32, N] scales. */
        for (int64_t n = 0; n < N; n++) {
            uint8_t r = 0;
            for (int64_t b = 0; b < nblocks; b++) {
                uint8_t e = mxfp4_scale_at(w->scales, w->layout, N, K, n, b);
                if (e > r)
                    r = e;
            }
            p->ref[n] = r;
        }
    }
    for (int64_t n = 0; n < N; n++)
        p->epi[n] = e8m0_decode(p->ref[n], p->e8m0_mode);   /* ldexpf(1, ref - 127): exact */
    pthread_once(&shift_tables_once, shift_tables_build);
    p->value = shift_value;
    p->changed = shift_changed;
    return 0;
}

void folded_plan_free(folded_plan_t *p)
{
    free(p->owned);
    free(p->ref);
    free(p->epi);
    free(p->tile_stats);
    *p = (folded_plan_t){0};
}

/* Index of the 4-byte group holding weight byte (n, kb), kb % 4 == 0. */
static inline int64_t weight_byte_index(const folded_plan_t *p, int64_t n, int64_t kb)
{
    if (p->wlayout == FOLDED_W_CHECKPOINT)
        return n * (p->K / 2) + kb;
    /* permute_w: [n-tile][k-step][half][row][4 bytes] */
    return (((n / 16 * (p->K / 16) + kb / 8) * 2 + (kb % 8) / 4) * 16 + n % 16) * 4 + kb % 4;
}

/* Per column and block, the row of the shift table its codes read (the
 * zero row for a block that is 0 by the weight's own format), and the
 * block counts. */
static void tile_table_rows(const folded_plan_t *p, folded_tile_t *t, int32_t *table_row, folded_stats_t *st)
{
    const int64_t N = p->N, K = p->K, nblocks = K / 32;
    for (int64_t j = 0; j < TILE_N; j++) {
        if (j >= t->width) {
            for (int64_t b = 0; b < nblocks; b++)
                table_row[b * TILE_N + j] = FOLDED_ZERO_ROW;
            continue;
        }
        const int64_t n = t->n0 + j;
        const int ref = p->ref[n];
        t->epi[j] = p->epi[n];
        for (int64_t b = 0; b < nblocks; b++) {
            const int e = mxfp4_scale_at(p->scales, p->scale_layout, N, K, n, b);
            const int s = ref - e;
            st->blocks++;
            if (p->e8m0_mode == E8M0_ZERO_IS_ZERO && e == 0) {
                table_row[b * TILE_N + j] = FOLDED_ZERO_ROW;
            } else {
                table_row[b * TILE_N + j] = s + 255;
                st->blocks_under += s > 8;
                st->blocks_over += s < 0;
            }
        }
    }
}

#if defined(BYTE_TILE_VECTOR) && defined(__AVX2__) && !defined(__AVX512F__)
#define FOLDED_EXACT_BLOCK_AVX2 1
/* tile_decode_vector's common case for one block of 16 columns, on AVX2's
 * 8-lane registers: every lane's value is e2m1(code) * factor (nothing to
 * round), and nonzero counts the nonzero codes of counted lanes: the same
 * operations as the 16-lane form, on 8-lane registers (byte_tile.h says
 * why).  w: the block's first k row at this group of 16 columns. */
static void exact_block_avx2(const bt_i32x16 col[16], const float factor[16],
                             const bt_i32x16 *counted, float *w, bt_i32x16 *nonzero)
{
    const __m256i magnitude = _mm256_set1_epi32(7);
    for (int g = 0; g < 2; g++) {
        const __m256 scale = _mm256_loadu_ps(factor + 8 * g);
        const __m256i cnt = _mm256_loadu_si256((const __m256i *)((const int32_t *)counted + 8 * g));
        __m256i nz = _mm256_loadu_si256((const __m256i *)((const int32_t *)nonzero + 8 * g));
        for (int i = 0; i < 16; i++) {
            const __m256i b = _mm256_loadu_si256((const __m256i *)((const int32_t *)&col[i] + 8 * g));
            for (int half = 0; half < 2; half++) {
                /* The low nibble needs no mask: only bits 0..3 are read. */
                const __m256i c = half ? _mm256_srli_epi32(b, 4) : b;
                const __m256i bits = byte_tile_e2m1_avx2(c);
                _mm256_storeu_ps(w + (2 * i + half) * TILE_N + 8 * g,
                                 _mm256_mul_ps(_mm256_castsi256_ps(bits), scale));
                const __m256i zero = _mm256_cmpeq_epi32(_mm256_and_si256(c, magnitude),
                                                        _mm256_setzero_si256());
                nz = _mm256_sub_epi32(nz, _mm256_andnot_si256(zero, cnt));
            }
        }
        _mm256_storeu_si256((__m256i *)((int32_t *)nonzero + 8 * g), nz);
    }
}
#endif

#ifdef FOLDED_EXACT_BLOCK_AVX2
/* shifted_w8 on 8 lanes: the same integer and float steps. */
static inline __m256 shifted_w8_avx2(__m256 x)
{
    const __m256i u = _mm256_castps_si256(x);
    const __m256i mag = _mm256_and_si256(u, _mm256_set1_epi32(0x7FFFFFFF));
    const __m256i sign = _mm256_and_si256(u, _mm256_set1_epi32((int32_t)0x80000000));
    const __m256i exponent = _mm256_srai_epi32(mag, 23);
    const __m256i above = _mm256_cmpgt_epi32(exponent, _mm256_set1_epi32(121));
    const __m256i field = _mm256_or_si256(_mm256_and_si256(exponent, above),
                                          _mm256_andnot_si256(above, _mm256_set1_epi32(121)));
    const __m256i m_bits = _mm256_slli_epi32(_mm256_add_epi32(field, _mm256_set1_epi32(20)), 23);
    const __m256i steps = _mm256_sub_epi32(
        _mm256_castps_si256(_mm256_add_ps(_mm256_castsi256_ps(mag), _mm256_castsi256_ps(m_bits))),
        m_bits);
    const __m256i code = _mm256_add_epi32(
        _mm256_slli_epi32(_mm256_sub_epi32(field, _mm256_set1_epi32(121)), 3), steps);
    const __m256i e = _mm256_srai_epi32(code, 3), m = _mm256_and_si256(code, _mm256_set1_epi32(7));
    const __m256i normal = _mm256_andnot_si256(_mm256_cmpeq_epi32(e, _mm256_setzero_si256()),
                                               _mm256_set1_epi32(1));
    const __m256i significand = _mm256_add_epi32(_mm256_slli_epi32(normal, 3), m);
    const __m256i p = _mm256_sub_epi32(_mm256_add_epi32(e, _mm256_sub_epi32(_mm256_set1_epi32(1), normal)),
                                       _mm256_set1_epi32(10));
    const __m256 value = _mm256_mul_ps(
        _mm256_cvtepi32_ps(significand),
        _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(p, _mm256_set1_epi32(127)), 23)));
    return _mm256_castsi256_ps(_mm256_or_si256(_mm256_castps_si256(value), sign));
}

/* tile_decode_vector's general case for one block of 16 columns on AVX2:
 * lanes computed by shifted_w8 (counting those that lost bits), lanes of
 * lookup_lanes from the shift table, as the 16-lane form does. */
static void rounded_block_avx2(const bt_i32x16 col[16], const float factor[16],
                               const bt_i32x16 *base, const bt_i32x16 *computed,
                               const bt_i32x16 *counted, int lookup_lanes, const float *value,
                               const int32_t *changed, float *w, bt_i32x16 *nonzero,
                               bt_i32x16 *lost)
{
    const __m256i magnitude = _mm256_set1_epi32(7);
    const __m256i nibble = _mm256_set1_epi32(15);
    for (int g = 0; g < 2; g++) {
        const int lookup = lookup_lanes >> (8 * g) & 0xFF;
        const __m256 scale = _mm256_loadu_ps(factor + 8 * g);
        const __m256i cnt = _mm256_loadu_si256((const __m256i *)((const int32_t *)counted + 8 * g));
        const __m256i comp = _mm256_loadu_si256((const __m256i *)((const int32_t *)computed + 8 * g));
        const __m256i bas = _mm256_loadu_si256((const __m256i *)((const int32_t *)base + 8 * g));
        __m256i nz = _mm256_loadu_si256((const __m256i *)((const int32_t *)nonzero + 8 * g));
        __m256i ls = _mm256_loadu_si256((const __m256i *)((const int32_t *)lost + 8 * g));
        for (int i = 0; i < 16; i++) {
            const __m256i b = _mm256_loadu_si256((const __m256i *)((const int32_t *)&col[i] + 8 * g));
            for (int half = 0; half < 2; half++) {
                const __m256i c = half ? _mm256_srli_epi32(b, 4) : _mm256_and_si256(b, nibble);
                const __m256i bits = byte_tile_e2m1_avx2(c);
                const __m256 x = _mm256_mul_ps(_mm256_castsi256_ps(bits), scale);
                __m256 out = shifted_w8_avx2(x);
                ls = _mm256_sub_epi32(ls, _mm256_and_si256(_mm256_castps_si256(
                                                               _mm256_cmp_ps(out, x, _CMP_NEQ_UQ)),
                                                           comp));
                float *dst = w + (2 * i + half) * TILE_N + 8 * g;
                _mm256_storeu_ps(dst, out);
                if (lookup) {
                    int32_t index[8], lost_add[8];
                    _mm256_storeu_si256((__m256i *)index, _mm256_add_epi32(bas, c));
                    for (int r = 0; r < 8; r++) {
                        lost_add[r] = 0;
                        if (lookup >> r & 1) {
                            dst[r] = value[index[r]];
                            lost_add[r] = changed[index[r]];
                        }
                    }
                    ls = _mm256_add_epi32(ls, _mm256_loadu_si256((const __m256i *)lost_add));
                }
                const __m256i zero = _mm256_cmpeq_epi32(_mm256_and_si256(c, magnitude),
                                                        _mm256_setzero_si256());
                nz = _mm256_sub_epi32(nz, _mm256_andnot_si256(zero, cnt));
            }
        }
        _mm256_storeu_si256((__m256i *)((int32_t *)nonzero + 8 * g), nz);
        _mm256_storeu_si256((__m256i *)((int32_t *)lost + 8 * g), ls);
    }
}
#endif

#ifdef BYTE_TILE_VECTOR
static void tile_decode_vector(const folded_plan_t *p, folded_tile_t *t, const int32_t *table_row,
                               folded_stats_t *st)
{
    const int64_t K = p->K, nblocks = K / 32;
    const float *value = &p->value[0][0];
    const int32_t *changed = &p->changed[0][0];
    /* 16 columns x one block (16 bytes of each row) at a time: the codes of
     * each k for the 16 columns come out of a byte transpose (checkpoint
     * order) or straight out of 4-byte groups (fragment order keeps each k's
     * 16 rows together), and every lane looks its value up in its own row of
     * the shift table (a gather). */
    for (int64_t h = 0; h < TILE_N / 16; h++) {
        if (16 * h >= t->width) {           /* all padding: zeros */
            for (int64_t k = 0; k < K; k++)
                memset(t->w + k * TILE_N + 16 * h, 0, 16 * sizeof(float));
            continue;
        }
        const uint8_t *row[16];
        for (int r = 0; r < 16; r++) {
            const int64_t j = 16 * h + r;
            row[r] = j < t->width ? p->bytes + (t->n0 + j) * (K / 2) : NULL;
        }
        bt_i32x16 nonzero = {0}, lost = {0};
        for (int64_t b = 0; b < nblocks; b++) {
            bt_i32x16 col[16];
            if (p->wlayout == FOLDED_W_CHECKPOINT) {
                byte_tile_columns(row, b * 16, b * 16 + 256 < K / 2 ? 256 : 0, col);
            } else {
                /* permute_w keeps 16 rows x 4 bytes of one k-group contiguous:
                 * lane r of the 32-bit word at row r holds bytes kb..kb+3. */
                for (int g = 0; g < 4; g++) {
                    bt_i32x16 words;
                    memcpy(&words, p->bytes + weight_byte_index(p, t->n0 + 16 * h, b * 16 + 4 * g),
                           sizeof words);
                    for (int i = 0; i < 4; i++)
                        col[4 * g + i] = (words >> (8 * i)) & 0xFF;
                }
                for (int r = 0; r < 16; r++)        /* rows past the width read as 0 */
                    if (!row[r])
                        for (int i = 0; i < 16; i++)
                            col[i][r] = 0;
            }
            /* Lanes whose row can be computed (every shift from 0 to 126
             * binades, which is all but inconsistent weight_refs and
             * zero-format blocks) compute it, the rest look their row up
             * (a gather), with the count of values that lost bits. */
            bt_i32x16 base;
            float factor[16];
            int lookup_lanes = 0, all_exact = 1;
            for (int r = 0; r < 16; r++) {
                const int32_t tr = table_row[b * TILE_N + 16 * h + r];
                base[r] = tr * 16;
                factor[r] = shift_factor[tr];
                lookup_lanes |= (shift_arith[tr] ? 0 : 1) << r;
                all_exact &= shift_exact[tr];
            }
            float_x16 scale;
            memcpy(&scale, factor, sizeof scale);
            bt_i32x16 computed;                                         /* -1 or 0 */
            for (int r = 0; r < 16; r++)
                computed[r] = lookup_lanes >> r & 1 ? 0 : -1;
            const bt_i32x16 counted = base != FOLDED_ZERO_ROW * 16;     /* -1 or 0 */
#ifdef FOLDED_EXACT_BLOCK_AVX2
            if (all_exact)
                exact_block_avx2(col, factor, &counted, t->w + 32 * b * TILE_N + 16 * h, &nonzero);
            else
                rounded_block_avx2(col, factor, &base, &computed, &counted, lookup_lanes, value,
                                   changed, t->w + 32 * b * TILE_N + 16 * h, &nonzero, &lost);
            continue;
#endif
            for (int i = 0; i < 16; i++) {
                const int64_t k = 2 * (b * 16 + i);
                for (int half = 0; half < 2; half++) {
                    const bt_i32x16 code = half ? col[i] >> 4 : col[i] & 15;
                    bt_i32x16 e2m1;
                    byte_tile_e2m1(&code, &e2m1);
                    const float_x16 x = (float_x16)e2m1 * scale;
                    if (all_exact) {            /* the common case: nothing to round */
                        memcpy(t->w + (k + half) * TILE_N + 16 * h, &x, sizeof x);
                        nonzero -= ((code & 7) != 0) & counted;
                        continue;
                    }
                    float_x16 out;
                    shifted_w8(&x, &out);
                    lost -= (out != x) & computed;     /* -1 per computed value that lost bits */
                    if (lookup_lanes) {
                        const bt_i32x16 index = base + code;
#if defined(__AVX512F__)
                        const __mmask16 mask = (__mmask16)lookup_lanes;
                        out = (float_x16)_mm512_mask_i32gather_ps((__m512)out, mask, (__m512i)index,
                                                                  value, 4);
                        lost += (bt_i32x16)_mm512_mask_i32gather_epi32(
                            _mm512_setzero_si512(), mask, (__m512i)index, changed, 4);
#else
                        for (int r = 0; r < 16; r++)
                            if (lookup_lanes >> r & 1) {
                                out[r] = value[index[r]];
                                lost[r] += changed[index[r]];
                            }
#endif
                    }
                    memcpy(t->w + (k + half) * TILE_N + 16 * h, &out, sizeof out);
                    nonzero -= ((code & 7) != 0) & counted;
                }
            }
        }
        for (int r = 0; r < 16; r++) {
            st->nonzero += nonzero[r];
            st->changed += lost[r];
        }
    }
}
#endif

/* Blocks from b_from on, one column and one 4-byte group at a time. */
static void tile_decode_scalar(const folded_plan_t *p, folded_tile_t *t, const int32_t *table_row, int64_t b_from,
                               folded_stats_t *st)
{
    const int64_t nblocks = p->K / 32;
    for (int64_t b = b_from; b < nblocks; b++) {
        for (int64_t j = 0; j < t->width; j++) {
            const int32_t tr = table_row[b * TILE_N + j];
            for (int64_t g = 0; g < 4; g++) {
                const int64_t kb = b * 16 + 4 * g;
                const uint8_t *src = p->bytes + weight_byte_index(p, t->n0 + j, kb);
                float *dst = t->w + (2 * kb) * TILE_N + j;
                for (int i = 0; i < 4; i++) {
                    const uint8_t lo = src[i] & 0x0F, hi = src[i] >> 4;
                    dst[(2 * i) * TILE_N] = p->value[tr][lo];
                    dst[(2 * i + 1) * TILE_N] = p->value[tr][hi];
                    if (tr != FOLDED_ZERO_ROW) {
                        st->nonzero += ((lo & 7) != 0) + ((hi & 7) != 0);
                        st->changed += p->changed[tr][lo] + p->changed[tr][hi];
                    }
                }
            }
        }
    }
}

int folded_tile_load(folded_plan_t *p, int64_t tile_index, int record_stats, folded_tile_t *t)
{
    const int64_t N = p->N, K = p->K, nblocks = K / 32;
    memset(t, 0, sizeof *t);
    t->n0 = tile_index * TILE_N;
    t->width = (N - t->n0) < TILE_N ? (N - t->n0) : TILE_N;
    const size_t bytes = (size_t)K * TILE_N * sizeof(float);
    t->w = scratch_get(&t->buffer, bytes);
    if (!t->w)
        return -1;
#ifndef BYTE_TILE_VECTOR
    if (t->width < TILE_N)          /* the scalar loop below writes no padding column */
        memset(t->w, 0, bytes);
#endif
    folded_stats_t st = {0};
    int32_t *table_row = scratch_get(&t->rows_buffer, (size_t)nblocks * TILE_N * sizeof(int32_t));
    if (!table_row) {
        folded_tile_free(t);
        return -1;
    }
    tile_table_rows(p, t, table_row, &st);
    int64_t b_done = 0;
#ifdef BYTE_TILE_VECTOR
    tile_decode_vector(p, t, table_row, &st);
    b_done = nblocks;
#endif
    tile_decode_scalar(p, t, table_row, b_done, &st);
    scratch_put(&t->rows_buffer);
    if (record_stats)
        p->tile_stats[tile_index] = st;
    return 0;
}

void folded_tile_free(folded_tile_t *t)
{
    scratch_put(&t->buffer);
    scratch_put(&t->rows_buffer);
    t->w = NULL;
}

typedef struct {
    folded_plan_t *plan;
    int64_t M, rows_per_range;
    folded_task_fn fn;
    void *job;
    atomic_int failed;
} folded_run_t;

static void folded_run_task(void *ctx, int64_t task)
{
    folded_run_t *run = ctx;
    const int64_t tile = task % run->plan->tiles, range = task / run->plan->tiles;
    const int64_t m0 = range * run->rows_per_range;
    const int64_t m1 = run->M - m0 < run->rows_per_range ? run->M : m0 + run->rows_per_range;
    folded_tile_t t;
    if (folded_tile_load(run->plan, tile, range == 0, &t)) {
        atomic_store(&run->failed, 1);
        return;
    }
    run->fn(run->job, &t, m0, m1);
    folded_tile_free(&t);
}

/* Rough single-core costs for parallel_for_cost, in nanoseconds: loading
 * one weight element, and one row x one k of a tile's sums. */
#define FOLDED_NS_LOAD 1.0
#define FOLDED_NS_ROW_K 1.1
#define FOLDED_MIN_ROWS 16

int folded_run(folded_plan_t *p, int64_t M, int threads, folded_task_fn fn, void *job)
{
    folded_run_t run = {.plan = p, .M = M, .fn = fn, .job = job};
    atomic_init(&run.failed, 0);
    /* Row ranges only to even out few tiles over the threads: the fewest
     * ranges that give a whole number of rounds or 4 tasks per thread. */
    const int64_t threads_used = parallel_thread_count(threads);
    int64_t ranges = 1;
    while (ranges < 4 && (p->tiles * ranges) % threads_used != 0 &&
           p->tiles * ranges < 4 * threads_used && M / (ranges + 1) >= FOLDED_MIN_ROWS)
        ranges++;
    run.rows_per_range = M > 0 ? (M + ranges - 1) / ranges : 1;
    ranges = M > 0 ? (M + run.rows_per_range - 1) / run.rows_per_range : 1;
    const double cost = (double)p->K * TILE_N * FOLDED_NS_LOAD +
                        (double)run.rows_per_range * (double)p->K * FOLDED_NS_ROW_K;
    parallel_for_cost(p->tiles * ranges, threads, cost, folded_run_task, &run);
    return atomic_load(&run.failed) ? -1 : 0;
}

void folded_act_init(folded_act_t *a, const uint8_t *codes, int tiled, int64_t M, int64_t K,
                     const float *scale, fp8_format_t fmt)
{
    a->codes = codes;
    a->tiled = tiled;
    a->M = M;
    a->K = K;
    a->scale = scale;
    for (int c = 0; c < 256; c++)
        a->lut[c] = fmt == FP8_E4M3FN ? e4m3fn_decode((uint8_t)c) : e4m3fnuz_decode((uint8_t)c);
}

uint8_t *folded_pack_atiled(const uint8_t *codes, int64_t M, int64_t K)
{
    const int64_t mtiles = (M + 15) / 16, ksteps = K / 16;
    uint8_t *t = calloc((size_t)(mtiles * 16), (size_t)K);
    if (!t)
        return NULL;
    for (int64_t mt = 0; mt < mtiles; mt++)
        for (int64_t ks = 0; ks < ksteps; ks++)
            for (int lane = 0; lane < 32; lane++) {
                const int64_t m = 16 * mt + (lane & 15), k = 16 * ks + 8 * (lane >> 4);
                if (m < M)
                    memcpy(t + ((mt * ksteps + ks) * 32 + lane) * 8, codes + m * K + k, 8);
            }
    return t;
}

/* The 8 codes x[m][k8 .. k8+8) in the activation layout (k8 % 8 == 0). */
static inline const uint8_t *act_run8(const folded_act_t *a, int64_t m, int64_t k8)
{
    if (!a->tiled)
        return a->codes + m * a->K + k8;
    const int64_t lane = (m & 15) + ((k8 >> 3) & 1) * 16;
    return a->codes + (((m >> 4) * (a->K >> 4) + (k8 >> 4)) * 32 + lane) * 8;
}

/* Columns one pass of folded_dot keeps sums for: two vectors a row, so that
 * 4 rows of sums, the weight vectors and the broadcast x fit the vector
 * registers (16 on AVX2, where a whole 32-column tile of 4 rows is 16
 * vectors of sums alone: the compiler kept them on the stack and every k
 * waited on a store and a reload). */
#define FOLDED_DOT_COLS (2 * TD_VW)
#define FOLDED_DOT_NV 2
#if TILE_N % FOLDED_DOT_COLS != 0
#error "TILE_N must be a multiple of FOLDED_DOT_COLS"
#endif

/* One specialization per row count, so the accumulators stay in registers.
 * Each acc[i][j] is one (m, n) sum, acc + x * w; fp8 x e4m3 products are
 * exact in fp32 (at most 4 x 4 significant bits, exponents far inside the
 * normal range), so td_fma_exact's fused step gives the bits of mul + add.
 * The additions happen in ascending k (the column passes change which sums
 * are computed together, not their order). */
#define FOLDED_DOT_MB(MB)                                                                     \
    static void folded_dot_##MB(const folded_tile_t *t, const folded_act_t *a, int64_t m0,    \
                                int64_t k0, int64_t k1, int fresh, float sums[][TILE_N])      \
    {                                                                                         \
        for (int j0 = 0; j0 < TILE_N; j0 += FOLDED_DOT_COLS) {                                \
            td_vec acc[MB][FOLDED_DOT_NV];                                                    \
            for (int i = 0; i < MB; i++)                                                      \
                for (int v = 0; v < FOLDED_DOT_NV; v++)                                       \
                    acc[i][v] = fresh ? (td_vec){0} : td_load(&sums[i][j0 + v * TD_VW]);      \
            for (int64_t k8 = k0; k8 < k1; k8 += 8) {                                         \
                const uint8_t *xp[MB];                                                        \
                for (int i = 0; i < MB; i++)                                                  \
                    xp[i] = act_run8(a, m0 + i, k8);                                          \
                for (int kk = 0; kk < 8; kk++) {                                              \
                    const float *w = t->w + (k8 + kk) * TILE_N + j0;                          \
                    td_vec wv[FOLDED_DOT_NV];                                                 \
                    for (int v = 0; v < FOLDED_DOT_NV; v++) {                                 \
                        wv[v] = td_load(w + v * TD_VW);                                       \
                        TD_IN_REGISTER(wv[v]);                                                \
                    }                                                                         \
                    for (int i = 0; i < MB; i++) {                                            \
                        const float xv = a->lut[xp[i][kk]];                                   \
                        for (int v = 0; v < FOLDED_DOT_NV; v++)                               \
                            acc[i][v] = td_fma_exact(acc[i][v], xv, wv[v]);                   \
                    }                                                                         \
                }                                                                             \
            }                                                                                 \
            for (int i = 0; i < MB; i++)                                                      \
                for (int v = 0; v < FOLDED_DOT_NV; v++)                                       \
                    td_store(&sums[i][j0 + v * TD_VW], acc[i][v]);                            \
        }                                                                                     \
    }
FOLDED_DOT_MB(1)
FOLDED_DOT_MB(2)
FOLDED_DOT_MB(3)
FOLDED_DOT_MB(4)
#if FOLDED_MB >= 6
FOLDED_DOT_MB(5)
FOLDED_DOT_MB(6)
#endif
#if FOLDED_MB >= 8
FOLDED_DOT_MB(7)
FOLDED_DOT_MB(8)
#endif
#if FOLDED_MB != 4 && FOLDED_MB != 6 && FOLDED_MB != 8
#error "folded_dot has specializations for FOLDED_MB 4, 6 and 8"
#endif
#undef FOLDED_DOT_MB

void folded_dot(const folded_tile_t *t, const folded_act_t *a, int64_t m0, int mb, int64_t k0,
                int64_t k1, int fresh, float sums[][TILE_N])
{
    switch (mb) {
    case 1: folded_dot_1(t, a, m0, k0, k1, fresh, sums); break;
    case 2: folded_dot_2(t, a, m0, k0, k1, fresh, sums); break;
    case 3: folded_dot_3(t, a, m0, k0, k1, fresh, sums); break;
#if FOLDED_MB >= 8
    case 4: folded_dot_4(t, a, m0, k0, k1, fresh, sums); break;
    case 5: folded_dot_5(t, a, m0, k0, k1, fresh, sums); break;
    case 6: folded_dot_6(t, a, m0, k0, k1, fresh, sums); break;
    case 7: folded_dot_7(t, a, m0, k0, k1, fresh, sums); break;
    default: folded_dot_8(t, a, m0, k0, k1, fresh, sums); break;
#elif FOLDED_MB >= 6
    case 4: folded_dot_4(t, a, m0, k0, k1, fresh, sums); break;
    case 5: folded_dot_5(t, a, m0, k0, k1, fresh, sums); break;
    default: folded_dot_6(t, a, m0, k0, k1, fresh, sums); break;
#else
    default: folded_dot_4(t, a, m0, k0, k1, fresh, sums); break;
#endif
    }
}

void folded_store(const folded_tile_t *t, const float *acc, float xscale, uint16_t *out_row,
                  int64_t j0, int64_t j1)
{
    for (int64_t j = j0; j < j1; j++) {
        const float f = xscale * t->epi[j];     /* the scale product first, in fp32 */
        out_row[t->n0 + j] = bf16_encode(acc[j] * f);
    }
}

void folded_stats_note(const folded_plan_t *p, char *buf, int cap)
{
    folded_stats_t s = {0};
    for (int64_t i = 0; i < p->tiles; i++) {
        s.blocks += p->tile_stats[i].blocks;
        s.blocks_under += p->tile_stats[i].blocks_under;
        s.blocks_over += p->tile_stats[i].blocks_over;
        s.nonzero += p->tile_stats[i].nonzero;
        s.changed += p->tile_stats[i].changed;
    }
    const size_t used = strlen(buf);
    if ((int)used >= cap - 1)
        return;
    int n = snprintf(buf + used, (size_t)cap - used,
                     "%sfolded underflow: %lld/%lld blocks (%.2f%%) >8 binades below row ref; "
                     "%.2f%% of nonzero weights lost bits",
                     used ? "; " : "", (long long)s.blocks_under, (long long)s.blocks,
                     s.blocks ? 100.0 * (double)s.blocks_under / (double)s.blocks : 0.0,
                     s.nonzero ? 100.0 * (double)s.changed / (double)s.nonzero : 0.0);
    if (n < 0 || (size_t)n >= (size_t)cap - used)
        return;
    if (s.blocks_over) {
        const size_t u2 = used + (size_t)n;
        snprintf(buf + u2, (size_t)cap - u2, "; %lld blocks above weight_ref (saturate)",
                 (long long)s.blocks_over);
    }
}

void folded_r4d_cfg(int64_t M, int64_t K, int *wv, int *sk, int *mb, int *npw)
{
    int64_t b = (M + 15) / 16;
    *mb = (int)(b < 1 ? 1 : b > 4 ? 4 : b);
    int s = M <= 16 ? 8 : 4;
    while (s > 1 && K % (s * 32))
        s /= 2;
    *sk = s;
    *wv = 2;
    *npw = 2;
}
