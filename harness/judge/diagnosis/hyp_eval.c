/* Re-evaluation of a grammar hypothesis from the kernel's operands, bit for
 * bit in the route's canonical order (hyp_eval.h). */
#include "hyp_eval.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "acc_round.h"
#include "mxfp4_weight.h"

/* ---- formats ---- */

/* A sign-exponent-mantissa code with an IEEE top exponent (Inf, NaN):
 * e5m2 (5, 2, bias 15) and fp16 (5, 10, bias 15). */
static float ieee_small_value(uint32_t code, int ebits, int mbits, int bias)
{
    const uint32_t m = code & ((1u << mbits) - 1u), e = (code >> mbits) & ((1u << ebits) - 1u);
    float v;
    if (e == (1u << ebits) - 1u)
        v = m ? NAN : INFINITY;
    else if (e == 0)
        v = ldexpf((float)m, 1 - bias - mbits);
    else
        v = ldexpf((float)((1u << mbits) + m), (int)e - bias - mbits);
    return (code >> (ebits + mbits)) & 1u ? -v : v;
}

static float e5m2_value(uint8_t c)
{
    return ieee_small_value(c, 5, 2, 15);
}

static float half_value(uint16_t h)
{
    return ieee_small_value(h, 5, 10, 15);
}

/* The fp16 bits of v, which is an fp16 value (or Inf or NaN). */
static uint16_t half_bits(float v)
{
    const uint16_t sign = signbit(v) ? 0x8000u : 0u;
    if (isnan(v))
        return (uint16_t)(sign | 0x7E00u);
    const float a = fabsf(v);
    if (isinf(a))
        return (uint16_t)(sign | 0x7C00u);
    if (a < 0x1p-14f)
        return (uint16_t)(sign | (uint16_t)(a * 0x1p24f));
    int e;
    const float f = frexpf(a, &e);     /* a = f * 2^e, f in [0.5, 1) */
    return (uint16_t)(sign | (uint16_t)((e - 1 + 15) << 10) | (uint16_t)((f * 2.0f - 1.0f) * 1024.0f));
}

float g_round(float x, g_fmt_t fmt)
{
    if (fmt == G_FMT_BF16)
        return bf16_decode(bf16_encode(x));
    if (fmt == G_FMT_FP16)
        return acc_fp16_round(x);
    if (!isfinite(x) || x == 0.0f)
        return x;
    const int mant = fmt == G_FMT_E4M3 ? 3 : 2, emin = fmt == G_FMT_E4M3 ? -6 : -14;
    int e;
    frexp(fabs((double)x), &e);
    e = e - 1 < emin ? emin : e - 1;
    const double q = ldexp(1.0, e - mant), r = nearbyint((double)x / q) * q;
    if (fmt == G_FMT_E4M3)
        return (float)(r > 448.0 ? 448.0 : r < -448.0 ? -448.0 : r);
    return fabs(r) >= 61440.0 ? (r > 0 ? INFINITY : -INFINITY) : (float)r;
}

/* ---- plans ---- */

static float x_min_normal(const g_ops_t *g);
static void x_lut(const g_ops_t *g, uint64_t mask, int odd, float min_normal, float *lut);

void g_plan_make(const g_ops_t *g, const g_hyp_t *h, g_plan_t *p)
{
    memset(p, 0, sizeof *p);
    for (int i = 0; i < h->n; i++) {
        const g_prim_t *q = &g->prims[h->p[i]];
        switch (q->kind) {
        case G_KIND_INDEX: {
            int *n = &p->n_maps[q->op][q->axis];
            if (*n < G_PLAN_MAPS)
                p->maps[q->op][q->axis][(*n)++] = &g_index_rows[q->row];
            break;
        }
        case G_KIND_VALUE:
            p->values[q->op] |= (uint64_t)1 << q->row;
            break;
        case G_KIND_STRUCT:
            if (g_struct_rows[q->row].kind == GS_K_WEIGHT) {
                if (p->n_kw < 2)
                    p->kw[p->n_kw++] = &g_struct_rows[q->row];
            } else {
                p->acc = &g_struct_rows[q->row];
            }
            break;
        }
    }
    /* the activation codes' values once a plan, not once a row */
    if (p->values[G_XC] && g->shape.route != G_ROUTE_BF16) {
        for (int odd = 0; odd < 2; odd++)
            x_lut(g, p->values[G_XC], odd, x_min_normal(g), p->xlut[odd]);
        p->has_xlut = 1;
    }
}

int64_t g_plan_index(const g_plan_t *p, g_operand_t op, g_axis_t axis, int64_t i, int64_t len)
{
    for (int j = 0; j < p->n_maps[op][axis]; j++) {
        const g_index_row_t *r = p->maps[op][axis][j];
        i = r->fn(i, len, r->a, r->b);
    }
    return i;
}

int32_t *g_k_index(const g_plan_t *p, g_operand_t op, int64_t K)
{
    if (!p->n_maps[op][G_AX_K])
        return NULL;
    int32_t *idx = malloc((size_t)K * sizeof(int32_t));
    for (int64_t k = 0; idx && k < K; k++)
        idx[k] = (int32_t)g_plan_index(p, op, G_AX_K, k, K);
    return idx;
}

static void plan_index2(const g_plan_t *p, g_operand_t op, int64_t *r, int64_t *c, int64_t rows,
                        int64_t cols)
{
    if (p->n_maps[op][G_AX_2D]) {
        const g_index_row_t *row = p->maps[op][G_AX_2D][0];
        row->fn2(r, c, rows, cols, row->a);
    }
}

/* ---- values ---- */

static int has_kind(uint64_t mask, g_value_kind_t kind)
{
    for (uint64_t bits = mask; bits; bits &= bits - 1)
        if (g_value_rows[r_of(bits)].kind == kind)
            return 1;
    return 0;
}

/* The value maps of one operand that are not decodings, in table order. */
static float transform(uint64_t mask, float v, float min_normal)
{
    for (uint64_t bits = mask; bits; bits &= bits - 1) {
        const int r = r_of(bits);
        const g_value_row_t *row = &g_value_rows[r];
        switch (row->kind) {
        case GV_FLUSH_SUBNORMAL:
            if (v != 0.0f && fabsf(v) < min_normal)
                v = copysignf(0.0f, v);
            break;
        case GV_ABS: v = fabsf(v); break;
        case GV_NEG: v = -v; break;
        case GV_NEG_ZERO: v = v < 0.0f ? 0.0f : v; break;
        case GV_ROUND: v = g_round(v, (g_fmt_t)row->param); break;
        case GV_INVERT: v = 1.0f / v; break;
        case GV_ONE: v = 1.0f; break;
        case GV_TWICE: v = v * v; break;
        case GV_EXP_BIAS: v = v * ldexpf(1.0f, -row->param); break;
        default: break;
        }
    }
    return v;
}

/* The value maps of mask that apply at element k: a row restricted to odd
 * (or even) K is left out at the other parity. */
static uint64_t mask_at_parity(uint64_t mask, int odd)
{
    uint64_t m = mask;
    for (uint64_t bits = mask; bits; bits &= bits - 1)
        if (g_value_rows[r_of(bits)].parity == (odd ? 2 : 1))
            m &= ~((uint64_t)1 << r_of(bits));
    return m;
}

/* The code a single-bit or byte fault makes of c (width 4, 8 or 16 bits; on
 * 16 the bit rows act on the high byte). */
static unsigned code_bits(uint64_t mask, unsigned c, int width)
{
    for (uint64_t bits = mask; bits; bits &= bits - 1) {
        const int r = r_of(bits);
        const g_value_row_t *row = &g_value_rows[r];
        const int is_bit = row->kind == GV_BIT_CLEAR || row->kind == GV_BIT_SET || row->kind == GV_BIT_FLIP;
        /* only a bit row's parameter is a bit index (another row's may be negative) */
        const unsigned bit = is_bit ? 1u << (row->param + (width == 16 ? 8 : 0)) : 0u;
        switch (row->kind) {
        case GV_BIT_CLEAR: c &= ~bit; break;
        case GV_BIT_SET: c |= bit; break;
        case GV_BIT_FLIP: c ^= bit; break;
        case GV_BYTES:
            c = row->param == 0 ? c & 0xff00u : row->param == 1 ? c & 0xffu : ((c & 0xffu) << 8) | (c >> 8);
            break;
        default: break;
        }
    }
    return c & ((1u << width) - 1);
}

static float fp8_value(const g_ops_t *g, uint64_t mask, uint8_t c)
{
    c = (uint8_t)code_bits(mask, c, 8);
    if (has_kind(mask, GV_DECODE_E5M2))
        return e5m2_value(c);
    if (has_kind(mask, GV_DECODE_INT8))
        return (float)(int8_t)c;
    if (has_kind(mask, GV_DECODE_E4M3FNUZ) || (g->fp8_fnuz && !has_kind(mask, GV_DECODE_E4M3FN)))
        return e4m3fnuz_decode(c);
    return e4m3fn_decode(c);
}

static float e2m1_value(uint64_t mask, uint8_t c)
{
    c = (uint8_t)code_bits(mask, c & 15u, 4);
    if (has_kind(mask, GV_DECODE_INT4))
        return (float)((c & 8) ? (int)(c & 15) - 16 : (int)(c & 15));
    return e2m1_decode(c);
}

static float bf16_bits_value(uint64_t mask, uint16_t bits)
{
    bits = (uint16_t)code_bits(mask, bits, 16);
    return has_kind(mask, GV_DECODE_FP16) ? half_value(bits) : bf16_decode(bits);
}

static float e8m0_value(uint64_t mask, uint8_t b, e8m0_mode_t mode)
{
    b = (uint8_t)code_bits(mask, b, 8);
    if (b == 0 && has_kind(mask, GV_E8M0_ZERO))
        return 0.0f;
    if (b < 127 && has_kind(mask, GV_EXP_WRAP8))
        return INFINITY;
    return transform(mask, e8m0_decode(b, mode), 0.0f);
}

/* ---- operands ---- */

/* An activation code's value on the route (W4A8 fp8, W4A4 e2m1). */
static float code_value(const g_ops_t *g, uint64_t mask, uint8_t c)
{
    return g->shape.route == G_ROUTE_W4A8 ? fp8_value(g, mask, c) : e2m1_value(mask, c);
}

void g_ops_ready(g_ops_t *g)
{
    for (int c = 0; c < 256; c++)
        g->xlut[c] = g->shape.route == G_ROUTE_BF16 ? 0.0f : code_value(g, 0, (uint8_t)c);
}

static float x_min_normal(const g_ops_t *g)
{
    const g_route_t route = g->shape.route;
    return route == G_ROUTE_W4A8 ? (g->fp8_fnuz ? 0x1p-7f : 0x1p-6f) : route == G_ROUTE_W4A4 ? 1.0f : 0x1p-126f;
}

/* The activation codes' values under value maps `mask`, at odd or even K. */
static void x_lut(const g_ops_t *g, uint64_t mask, int odd, float min_normal, float *lut)
{
    const uint64_t at = mask_at_parity(mask, odd);
    for (int c = 0; c < 256; c++)
        lut[c] = transform(at, code_value(g, at, (uint8_t)c), min_normal);
}

void g_x_row(const g_ops_t *g, const g_plan_t *p, int64_t m, const int32_t *kidx, float *a, float *xb)
{
    const int64_t M = g->M, K = g->K, nb = g->nb;
    const uint64_t mask = p->values[G_XC];
    const g_route_t route = g->shape.route;
    if (a) {
        const int64_t m1 = g_plan_index(p, G_XC, G_AX_M, m, M);
        const float min_normal = x_min_normal(g);
        const int k_maps = p->n_maps[G_XC][G_AX_K] > 0, two_d = p->n_maps[G_XC][G_AX_2D] > 0;
        /* The codes' values, once for all 256 (or 16) codes, at even and odd K
         * (the maps of one nibble apply at one parity). */
        float own[2][256];
        const float *lut[2] = {g->xlut, g->xlut};
        if (p->has_xlut)
            lut[0] = p->xlut[0], lut[1] = p->xlut[1];
        else if (route != G_ROUTE_BF16 && mask)
            for (int odd = 0; odd < 2; odd++) {
                x_lut(g, mask, odd, min_normal, own[odd]);
                lut[odd] = own[odd];
            }
        for (int64_t k = 0; k < K; k++) {
            int64_t mm = m1, k1 = kidx ? kidx[k] : k_maps ? g_plan_index(p, G_XC, G_AX_K, k, K) : k;
            if (two_d)
                plan_index2(p, G_XC, &mm, &k1, M, K);
            if (route != G_ROUTE_BF16) {
                a[k] = lut[k1 & 1][g->xcodes[mm * K + k1]];
            } else {
                const float v = g->xvals[mm * K + k1];
                a[k] = mask ? transform(mask, bf16_bits_value(mask, bf16_encode(v)), min_normal) : v;
            }
        }
    }
    if (route != G_ROUTE_W4A4 || !xb)
        return;
    const int64_t mx = g_plan_index(p, G_XS, G_AX_M, m, M);
    for (int64_t b = 0; b < nb; b++) {
        const int64_t b1 = g_plan_index(p, G_XS, G_AX_B, b, nb);
        xb[b] = e8m0_value(p->values[G_XS], g->xbscale[mx * nb + b1], E8M0_SPEC);
    }
}

void g_w_col(const g_ops_t *g, const g_plan_t *p, int64_t n, const int32_t *kidx, float *w, float *ws)
{
    const int64_t N = g->N, K = g->K, nb = g->nb;
    const int bf16 = g->shape.route == G_ROUTE_BF16;
    if (w) {
        const int64_t n1 = g_plan_index(p, G_WC, G_AX_N, n, N);
        const uint64_t mask = p->values[G_WC];
        const int k_maps = p->n_maps[G_WC][G_AX_K] > 0, two_d = p->n_maps[G_WC][G_AX_2D] > 0;
        const float min_normal = bf16 ? 0x1p-126f : 1.0f;
        float lut[2][16];
        for (int odd = 0; odd < 2 && !bf16; odd++) {
            const uint64_t at = mask_at_parity(mask, odd);
            for (int c = 0; c < 16; c++)
                lut[odd][c] = at ? transform(at, e2m1_value(at, (uint8_t)c), min_normal) : e2m1_decode((uint8_t)c);
        }
        for (int64_t k = 0; k < K; k++) {
            int64_t nn = n1, kk = kidx ? kidx[k] : k_maps ? g_plan_index(p, G_WC, G_AX_K, k, K) : k;
            if (two_d)
                plan_index2(p, G_WC, &nn, &kk, N, K);
            if (!bf16) {
                w[k] = lut[kk & 1][mxfp4_code_at(g->w->packed, K, nn, kk)];
            } else {
                const float v = bf16_bits_value(mask, g->wbf16[nn * K + kk]);
                w[k] = mask ? transform(mask, v, min_normal) : v;
            }
        }
    }
    if (bf16 || !ws)
        return;
    const int64_t ns = g_plan_index(p, G_WS, G_AX_N, n, N);
    for (int64_t b = 0; b < nb; b++) {
        int64_t nn = ns, bb = g_plan_index(p, G_WS, G_AX_B, b, nb);
        plan_index2(p, G_WS, &nn, &bb, N, nb);
        ws[b] = e8m0_value(p->values[G_WS], mxfp4_scale_at(g->w->scales, g->w->layout, N, K, nn, bb),
                           g->w->e8m0_mode);
    }
}

float g_x_scale(const g_ops_t *g, const g_plan_t *p, int64_t m, int64_t n)
{
    if (g->shape.route != G_ROUTE_W4A8)
        return 1.0f;
    int64_t m1 = g_plan_index(p, G_XS, G_AX_M, m, g->M), n1 = n;
    plan_index2(p, G_XS, &m1, &n1, g->M, g->N);
    return transform(p->values[G_XS], g->xscale[m1], 0.0f);
}

void g_k_weights(const g_ops_t *g, const g_plan_t *p, float *c)
{
    const int64_t K = g->K;
    for (int64_t k = 0; k < K; k++)
        c[k] = 1.0f;
    for (int i = 0; i < p->n_kw; i++) {
        const g_struct_row_t *r = p->kw[i];
        if (r->parity) {
            for (int64_t k = r->parity == 1 ? 1 : 0; k < K; k += 2)
                c[k] *= (float)r->weight;
            continue;
        }
        const int64_t len = r->unit ? r->unit : K / r->parts * (r->span ? r->span : 1);
        const int64_t k0 = r->last ? K - len : 0;
        for (int64_t k = k0; k < k0 + len; k++)
            c[k] *= (float)r->weight;
    }
}

void g_out_position(const g_ops_t *g, const g_plan_t *p, int64_t *m, int64_t *n)
{
    *m = g_plan_index(p, G_OUT, G_AX_M, *m, g->M);
    *n = g_plan_index(p, G_OUT, G_AX_N, *n, g->N);
    plan_index2(p, G_OUT, m, n, g->M, g->N);
}

/* ---- the computation ---- */

static float acc_round_to(const g_struct_row_t *r, float v)
{
    return g_round(v, r->fmt);
}

/* Elements k0..k0+len summed in r's format, every addition rounded. */
static float chunk_sum(const g_struct_row_t *r, const float *a, const float *w, const float *c, int64_t k0,
                       int64_t len)
{
    float h = 0.0f;
    for (int64_t k = k0; k < k0 + len; k++)
        h = acc_round_to(r, h + (a[k] * w[k]) * c[k]);
    return h;
}

/* bf16: one sequential sum, or the structure row r's. */
static float value_bf16(const g_struct_row_t *r, const float *a, const float *w, const float *c, int64_t K)
{
    float acc = 0.0f;
    if (!r) {
        for (int64_t k = 0; k < K; k++)
            acc += (a[k] * w[k]) * c[k];
    } else if (r->kind == GS_CHUNK) {
        for (int64_t k0 = 0; k0 < K; k0 += r->every)
            acc += chunk_sum(r, a, w, c, k0, r->every < K - k0 ? r->every : K - k0);
    } else if (r->kind == GS_ROUND_PRODUCT) {
        for (int64_t k = 0; k < K; k++)
            acc += acc_round_to(r, (a[k] * w[k]) * c[k]);
    } else if (r->kind == GS_SPLIT_STORE) {
        const int64_t per = K / r->parts;
        for (int s = 0; s < r->parts; s++) {
            float part = 0.0f;
            for (int64_t k = s * per; k < (s + 1) * per; k++)
                part += (a[k] * w[k]) * c[k];
            acc += acc_round_to(r, part);
        }
    } else if (r->every == 1) {
        for (int64_t k = 0; k < K; k++)
            acc = acc_round_to(r, acc + (a[k] * w[k]) * c[k]);
    } else {
        for (int64_t k0 = 0; k0 < K; k0 += r->every) {
            float t = 0.0f;
            for (int64_t k = k0; k < k0 + r->every && k < K; k++)
                t += (a[k] * w[k]) * c[k];
            acc = acc_round_to(r, acc + t);
        }
    }
    return acc;
}

static float block_sum(const float *a, const float *w, const float *c, int64_t k0, int64_t k1)
{
    float s = 0.0f;
    for (int64_t k = k0; k < k1; k++)
        s += (a[k] * w[k]) * c[k];
    return s;
}

/* The MXFP4 routes with a rounding structure: a running sum rounded every
 * `every` K, products rounded, or split-K partials stored narrow. */
static float value_mx_rounded(const g_ops_t *g, const g_struct_row_t *r, const float *a, const float *w,
                              const float *c, const float *bs, float xs)
{
    const int64_t nb = g->nb;
    const int w4a8 = g->shape.route == G_ROUTE_W4A8;
    const float in = r->xs_inside ? xs : 1.0f;
    float acc = 0.0f;
    if (r->kind == GS_CHUNK) {
        for (int64_t b = 0; b < nb; b++) {
            float sb = 0.0f;
            for (int64_t k0 = 32 * b; k0 < 32 * b + 32; k0 += r->every)
                sb += chunk_sum(r, a, w, c, k0, r->every);
            acc += sb * bs[b];
        }
        return w4a8 ? acc * xs : acc;
    }
    if (r->kind == GS_SPLIT_STORE) {
        const int64_t per = nb / r->parts;
        for (int s = 0; s < r->parts; s++) {
            float part = 0.0f;
            for (int64_t b = s * per; b < (s + 1) * per; b++)
                part += block_sum(a, w, c, 32 * b, 32 * b + 32) * bs[b];
            acc += acc_round_to(r, w4a8 ? part * xs : part);
        }
        return acc;
    }
    if (r->kind == GS_ROUND_PRODUCT) {
        for (int64_t k = 0; k < g->K; k++)
            acc += acc_round_to(r, (((a[k] * w[k]) * c[k]) * bs[k / 32]) * in);
        return acc;
    }
    if (r->every == 1) {
        for (int64_t k = 0; k < g->K; k++)
            acc = acc_round_to(r, acc + (((a[k] * w[k]) * c[k]) * bs[k / 32]) * in);
    } else if (r->every == 16) {
        for (int64_t h = 0; h < g->K / 16; h++)
            acc = acc_round_to(r, acc + (block_sum(a, w, c, 16 * h, 16 * h + 16) * bs[h / 2]) * in);
    } else {
        const int64_t per = r->every / 32;
        for (int64_t b0 = 0; b0 < nb; b0 += per) {
            float t = 0.0f;
            for (int64_t b = b0; b < b0 + per && b < nb; b++)
                t += (block_sum(a, w, c, 32 * b, 32 * b + 32) * bs[b]) * in;
            acc = acc_round_to(r, acc + t);
        }
    }
    return w4a8 && !r->xs_inside ? acc * xs : acc;
}

float g_value(const g_ops_t *g, const g_plan_t *p, const float *a, const float *xb, const float *w,
              const float *ws, const float *c, float xs)
{
    /* A carried accumulator is the plain sum here; g_eval carries it. */
    const g_struct_row_t *r = p->acc && p->acc->kind != GS_CARRY ? p->acc : NULL;
    if (g->shape.route == G_ROUTE_BF16)
        return value_bf16(r, a, w, c, g->K);
    const int64_t nb = g->nb;
    float bs_local[512], *bs = bs_local, *heap = NULL;
    if (nb > 512 && !(bs = heap = malloc((size_t)nb * sizeof(float))))
        return NAN;
    for (int64_t b = 0; b < nb; b++)
        bs[b] = g->shape.route == G_ROUTE_W4A4 ? xb[b] * ws[b] : ws[b];
    float v;
    if (r) {
        v = value_mx_rounded(g, r, a, w, c, bs, xs);
    } else {
        float acc = 0.0f;
        for (int64_t b = 0; b < nb; b++)
            acc += block_sum(a, w, c, 32 * b, 32 * b + 32) * bs[b];
        v = g->shape.route == G_ROUTE_W4A8 ? acc * xs : acc;
    }
    free(heap);
    return v;
}

float g_store(const g_plan_t *p, float v)
{
    const uint64_t mask = p->values[G_OUT];
    if (!mask)
        return bf16_decode(bf16_encode(v));
    for (uint64_t rows = mask; rows; rows &= rows - 1) {
        const g_value_kind_t kind = g_value_rows[r_of(rows)].kind;
        if (kind == GV_ABS || kind == GV_NEG)
            v = kind == GV_ABS ? fabsf(v) : -v;
    }
    uint16_t bits;
    if (has_kind(mask, GV_TRUNC_BF16)) {
        const uint32_t u = f32_bits(v);
        bits = isnan(v) ? (uint16_t)((u >> 16 & 0x8000u) | 0x7FC0u) : (uint16_t)(u >> 16);
    } else if (has_kind(mask, GV_DOUBLE_ROUND_FP16)) {
        bits = bf16_encode(acc_fp16_round(v));
    } else if (has_kind(mask, GV_ENCODE_FP16)) {
        bits = half_bits(acc_fp16_round(v));
    } else {
        bits = bf16_encode(v);
    }
    if (has_kind(mask, GV_FLUSH_SUBNORMAL) && (bits & 0x7F80u) == 0 && (bits & 0x7Fu) != 0)
        bits &= 0x8000u;
    return bf16_decode(bits);
}

/* The distinct values of idx[0..count) into uniq (at most count), and where
 * each idx went (slot[i]).  Returns how many. */
static int64_t distinct(const int64_t *idx, int64_t count, int64_t *uniq, int64_t *slot)
{
    int64_t u = 0;
    for (int64_t i = 0; i < count; i++) {
        int64_t j = 0;
        while (j < u && uniq[j] != idx[i])
            j++;
        if (j == u)
            uniq[u++] = idx[i];
        slot[i] = j;
    }
    return u;
}

/* Multiply-adds a carried accumulator may cost one evaluation. */
#define G_CARRY_BUDGET 400000000LL

/* The outputs at (mm[i], nn[i]) under a carried accumulator (GS_CARRY):
 * each one's fp32 accumulator summed, in index order, with those of the
 * outputs before it along the carry's axis back to its tile's start, then
 * the epilogue.  When that would cost more than G_CARRY_BUDGET, every
 * output reads -FLT_MAX, a value no bf16 output holds: the hypothesis is
 * not evaluated, and matches nothing (not even a NaN output). */
static int eval_carry(const g_ops_t *g, const g_plan_t *p, const int64_t *mm, const int64_t *nn,
                      int64_t count, const float *c, float *alt)
{
    const g_struct_row_t *r = p->acc;
    const int64_t K = g->K, nb = g->nb;
    const int along_n = r->carry == 1;
    int64_t work = 0;
    for (int64_t i = 0; i < count && work <= G_CARRY_BUDGET; i++) {
        const int64_t pos = along_n ? nn[i] : mm[i];
        work += (pos - (r->tile ? pos / r->tile * r->tile : 0) + 1) * K;
    }
    if (work > G_CARRY_BUDGET) {
        for (int64_t i = 0; i < count; i++)
            alt[i] = -FLT_MAX;
        return 0;
    }
    float *xa = malloc((size_t)(K + nb) * sizeof(float)), *wa = malloc((size_t)(K + nb) * sizeof(float));
    int32_t *kx = g_k_index(p, G_XC, K), *kw = g_k_index(p, G_WC, K);
    if (!xa || !wa) {
        free(xa), free(wa), free(kx), free(kw);
        return -1;
    }
    for (int64_t i = 0; i < count; i++) {
        const int64_t pos = along_n ? nn[i] : mm[i], start = r->tile ? pos / r->tile * r->tile : 0;
        if (along_n)
            g_x_row(g, p, mm[i], kx, xa, xa + K);
        else
            g_w_col(g, p, nn[i], kw, wa, wa + K);
        float acc = 0.0f;
        for (int64_t q = start; q <= pos; q++) {
            if (along_n)
                g_w_col(g, p, q, kw, wa, wa + K);
            else
                g_x_row(g, p, q, kx, xa, xa + K);
            acc += g_value(g, p, xa, xa + K, wa, wa + K, c, 1.0f);
        }
        alt[i] = g_store(p, acc * g_x_scale(g, p, mm[i], nn[i]));
    }
    free(xa), free(wa), free(kx), free(kw);
    return 0;
}

int g_eval(const g_ops_t *g, const g_hyp_t *h, const int64_t *pm, const int64_t *pn, int64_t count,
           float *alt)
{
    g_plan_t p;
    g_plan_make(g, h, &p);
    const int64_t K = g->K, nb = g->nb;
    int64_t *mm = malloc((size_t)count * 6 * sizeof(int64_t));
    float *c = malloc((size_t)K * sizeof(float));
    if (!mm || !c) {
        free(mm);
        free(c);
        return -1;
    }
    int64_t *nn = mm + count, *rows = nn + count, *cols = rows + count, *rs = cols + count,
            *cs = rs + count;
    for (int64_t i = 0; i < count; i++) {
        mm[i] = pm[i];
        nn[i] = pn[i];
        g_out_position(g, &p, &mm[i], &nn[i]);
    }
    if (p.acc && p.acc->kind == GS_CARRY) {
        g_k_weights(g, &p, c);
        const int rc = eval_carry(g, &p, mm, nn, count, c, alt);
        free(mm), free(c);
        return rc;
    }
    const int64_t nr = distinct(mm, count, rows, rs), nc = distinct(nn, count, cols, cs);
    float *xa = malloc((size_t)(nr * (K + nb)) * sizeof(float)),
          *wa = malloc((size_t)(nc * (K + nb)) * sizeof(float));
    if (!xa || !wa) {
        free(mm), free(c), free(xa), free(wa);
        return -1;
    }
    g_k_weights(g, &p, c);
    int32_t *kx = g_k_index(&p, G_XC, K), *kw = g_k_index(&p, G_WC, K);
    for (int64_t r = 0; r < nr; r++)
        g_x_row(g, &p, rows[r], kx, xa + r * (K + nb), xa + r * (K + nb) + K);
    for (int64_t j = 0; j < nc; j++)
        g_w_col(g, &p, cols[j], kw, wa + j * (K + nb), wa + j * (K + nb) + K);
    free(kx);
    free(kw);
    for (int64_t i = 0; i < count; i++) {
        const float *x = xa + rs[i] * (K + nb), *w = wa + cs[i] * (K + nb);
        const float v = g_value(g, &p, x, x + K, w, w + K, c, g_x_scale(g, &p, mm[i], nn[i]));
        alt[i] = g_store(&p, v);
    }
    free(mm), free(c), free(xa), free(wa);
    return 0;
}
