/* The screen of the grammar's coarse compositions (hyp_screen.h): each part
 * of a composition evaluated once on the sample, the parts combined. */
#include "hyp_screen.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* a . b over n floats, eight lanes at a time (a screen needs no fixed
 * summation order). */
typedef float f32x8 __attribute__((vector_size(32)));
static float dotf(const float *a, const float *b, int64_t n)
{
    f32x8 acc = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        f32x8 va, vb;
        memcpy(&va, a + i, sizeof va);
        memcpy(&vb, b + i, sizeof vb);
        acc += va * vb;
    }
    float s = 0.0f;
    for (int l = 0; l < 8; l++)
        s += acc[l];
    for (; i < n; i++)
        s += a[i] * b[i];
    return s;
}

typedef enum { L_XC = 0, L_XB, L_WC, L_WB, L_F, L_T, L_FINE, L_COUNT } level_t;

static level_t level_of(const g_ops_t *g, const g_prim_t *p)
{
    const int w4a8 = g->shape.route == G_ROUTE_W4A8;
    if (p->fine)
        return L_FINE;
    switch (p->kind) {
    case G_KIND_STRUCT:
        return g_struct_rows[p->row].unit == 1 ? L_WC : L_WB;
    case G_KIND_VALUE:
        if (p->op == G_OUT)
            return g_value_rows[p->row].kind == GV_NEG ? L_F : L_T;
        break;
    case G_KIND_INDEX:
        break;
    }
    switch (p->op) {
    case G_XC: return L_XC;
    case G_XS: return w4a8 ? L_F : L_XB;
    case G_WC: return L_WC;
    case G_WS: return L_WB;
    case G_OUT: return L_T;
    default: return L_FINE;
    }
}

typedef struct {
    g_screen_t *s;
    const g_ops_t *g;
    int64_t K, nb;
    int r0, c0, rc;
    int *lv[L_COUNT], nl[L_COUNT];
    float *x0, *xb0, *w0, *wb0, *f0, *t0, *xf0, *wf0;
    unsigned char *d0;
    double *p00;
    float *xcodes, *wcodes, *xbs, *wbs, *fs;     /* singles' parts */
    double *px, *pw;                            /* singles' partials against the other side as is */
    double *dv;                                 /* depth <= 1 dots without factor: [1 + singles] */
    g_hyp_t *dh;
    int nd;
    float *tmp_a, *tmp_b, *alt, *tt;
    double *dtmp;
    unsigned char *dd;
    int32_t **kcache;           /* [prim] the K indices of each single K map on x or w codes */
    int32_t *kbuf;              /* [K] two K maps composed */
    int32_t **ocache;           /* [prim] each output row or column map's pre-images: the
                                   indices mapped to v are ocache[p][len + 1 + j] for j in
                                   [ocache[p][v], ocache[p][v + 1]) */
    int failed;
} scr_t;

/* The K indices composition h reads operand op's codes at (cached single
 * maps, composed for two), or NULL when h has no K map there. */
static const int32_t *kidx_for(scr_t *sc, const g_hyp_t *h, g_operand_t op)
{
    const int32_t *first = NULL;
    for (int i = 0; i < h->n; i++) {
        const g_prim_t *p = &sc->g->prims[h->p[i]];
        if (p->kind != G_KIND_INDEX || p->op != op || p->axis != G_AX_K)
            continue;
        const int32_t *arr = sc->kcache[h->p[i]];
        if (!arr)
            return NULL;
        if (!first) {
            first = arr;
            continue;
        }
        for (int64_t k = 0; k < sc->K; k++)
            sc->kbuf[k] = arr[first[k]];
        return sc->kbuf;
    }
    return first;
}

static g_hyp_t hyp0(void)
{
    g_hyp_t h = {0, {0, 0}};
    return h;
}

static g_hyp_t hyp1(int a)
{
    g_hyp_t h = {1, {a, 0}};
    return h;
}

static g_hyp_t hyp2(int a, int b)
{
    g_hyp_t h = {2, {a, b}};
    return h;
}

static g_hyp_t join(g_hyp_t a, g_hyp_t b)
{
    g_hyp_t h = a;
    for (int i = 0; i < b.n && h.n < 2; i++)
        h.p[h.n++] = b.p[i];
    return h;
}

/* ---- the parts ---- */

static void part_x_codes(scr_t *sc, const g_hyp_t *h, float *dst)
{
    g_plan_t p;
    g_plan_make(sc->g, h, &p);
    const int32_t *kidx = kidx_for(sc, h, G_XC);
    for (int r = 0; r < sc->r0; r++)
        g_x_row(sc->g, &p, sc->s->rows[r], kidx, dst + r * sc->K, NULL);
}

static void part_x_blocks(const scr_t *sc, const g_hyp_t *h, float *dst)
{
    if (sc->g->shape.route != G_ROUTE_W4A4) {
        for (int64_t i = 0; i < sc->r0 * sc->nb; i++)
            dst[i] = 1.0f;
        return;
    }
    g_plan_t p;
    g_plan_make(sc->g, h, &p);
    for (int r = 0; r < sc->r0; r++)
        g_x_row(sc->g, &p, sc->s->rows[r], NULL, NULL, dst + r * sc->nb);
}

static void part_w_codes(scr_t *sc, const g_hyp_t *h, float *dst, float *c)
{
    g_plan_t p;
    g_plan_make(sc->g, h, &p);
    if (p.n_kw)
        g_k_weights(sc->g, &p, c);
    const int32_t *kidx = kidx_for(sc, h, G_WC);
    for (int j = 0; j < sc->c0; j++) {
        float *w = dst + j * sc->K;
        g_w_col(sc->g, &p, sc->s->cols[j], kidx, w, NULL);
        for (int64_t k = 0; k < sc->K && p.n_kw; k++)
            w[k] *= c[k];
    }
}

static void part_w_blocks(const scr_t *sc, const g_hyp_t *h, float *dst, float *c)
{
    g_plan_t p;
    g_plan_make(sc->g, h, &p);
    g_k_weights(sc->g, &p, c);
    for (int j = 0; j < sc->c0; j++) {
        float *ws = dst + j * sc->nb;
        if (sc->g->shape.route == G_ROUTE_BF16)
            for (int64_t b = 0; b < sc->nb; b++)
                ws[b] = 1.0f;
        else
            g_w_col(sc->g, &p, sc->s->cols[j], NULL, NULL, ws);
        for (int64_t b = 0; b < sc->nb; b++)
            ws[b] *= c[32 * b];
    }
}

static void part_factor(const scr_t *sc, const g_hyp_t *h, float *dst)
{
    g_plan_t p;
    g_plan_make(sc->g, h, &p);
    float sign = 1.0f;
    for (int r = 0; (p.values[G_OUT] >> r) != 0; r++)
        if ((p.values[G_OUT] >> r & 1u) && g_value_rows[r].kind == GV_NEG)
            sign = -sign;
    for (int r = 0; r < sc->r0; r++)
        for (int c = 0; c < sc->c0; c++)
            dst[r * sc->c0 + c] = sign * g_x_scale(sc->g, &p, sc->s->rows[r], sc->s->cols[c]);
}

/* The first index the output's maps of h on `axis` send to v (maps in h's
 * order), or -1 when none does. */
static int64_t out_preimage(const scr_t *sc, const g_hyp_t *h, g_axis_t axis, int64_t v, int64_t len)
{
    int n = 0, p[2];
    for (int j = 0; j < h->n; j++) {
        const g_prim_t *q = &sc->g->prims[h->p[j]];
        if (q->kind == G_KIND_INDEX && q->op == G_OUT && q->axis == axis)
            p[n++] = h->p[j];
    }
    if (n == 0)
        return v;
    const int32_t *last = sc->ocache[p[n - 1]];
    for (int32_t j = last[v]; j < last[v + 1]; j++) {
        const int64_t u = last[len + 1 + j];
        if (n == 1)
            return u;
        const int32_t *first = sc->ocache[p[0]];
        if (first[u + 1] > first[u])
            return first[len + 1 + first[u]];
    }
    return -1;
}

/* The output a target composition says the sample's positions hold: each
 * position's pre-image under the output's index maps (the first one; none:
 * undetermined), read back through its encoding.  *abs_alt: compare |alt|. */
static void part_target(const scr_t *sc, const g_hyp_t *h, float *t, unsigned char *d, int *abs_alt)
{
    const g_ops_t *g = sc->g;
    g_plan_t p;
    g_plan_make(g, h, &p);
    *abs_alt = 0;
    int fp16 = 0;
    for (uint64_t rows = p.values[G_OUT]; rows; rows &= rows - 1) {
        *abs_alt |= g_value_rows[r_of(rows)].kind == GV_ABS;
        fp16 |= g_value_rows[r_of(rows)].kind == GV_ENCODE_FP16;
    }
    for (int r = 0; r < sc->r0; r++)
        for (int c = 0; c < sc->c0; c++) {
            int64_t mr = sc->s->rows[r], nc = sc->s->cols[c];
            if (p.n_maps[G_OUT][G_AX_2D]) {
                const g_index_row_t *row = p.maps[G_OUT][G_AX_2D][0];
                row->fn2(&mr, &nc, g->M, g->N, row->a);     /* the tile transposes are involutions */
            }
            const int64_t m = out_preimage(sc, h, G_AX_M, mr, g->M), n = out_preimage(sc, h, G_AX_N, nc, g->N);
            const int i = r * sc->c0 + c;
            d[i] = m >= 0 && n >= 0;
            if (!d[i])
                continue;
            const float o = sc->s->out[m * g->N + n];
            if (fp16) {
                const uint16_t bits = bf16_encode(o);
                const int e = (bits >> 10) & 31, mant = bits & 1023;
                const float v = e == 31 ? (mant ? NAN : INFINITY)
                                        : e == 0 ? ldexpf((float)mant, -24) : ldexpf((float)(1024 + mant), e - 25);
                t[i] = (bits & 0x8000u) ? -v : v;
            } else {
                t[i] = o;
            }
        }
}

/* P[(r * c0 + c) * nb + b] = sum over k in block b of x[r][k] * w[c][k]. */
static void partials(const scr_t *sc, const float *x, const float *w, double *P)
{
    for (int r = 0; r < sc->r0; r++)
        for (int c = 0; c < sc->c0; c++) {
            const float *xr = x + r * sc->K, *wc = w + c * sc->K;
            double *pp = P + (r * sc->c0 + c) * sc->nb;
            for (int64_t b = 0; b < sc->nb; b++) {
                double s = 0;
                for (int64_t k = 32 * b; k < 32 * b + 32; k++)
                    s += (double)xr[k] * wc[k];
                pp[b] = s;
            }
        }
}

/* D = sum over blocks of xb * wb * P. */
static void combine(const scr_t *sc, const double *P, const float *xb, const float *wb, double *D)
{
    for (int r = 0; r < sc->r0; r++)
        for (int c = 0; c < sc->c0; c++) {
            const double *pp = P + (r * sc->c0 + c) * sc->nb;
            double s = 0;
            for (int64_t b = 0; b < sc->nb; b++)
                s += (double)xb[r * sc->nb + b] * wb[c * sc->nb + b] * pp[b];
            D[r * sc->c0 + c] = s;
        }
}

/* Residual of alt against the target over the determined positions; 0 when
 * fewer than half are determined or none is finite on both sides. */
static int score(const scr_t *sc, const float *alt, const float *t, const unsigned char *d,
                 double *rel, int64_t *nf)
{
    double num = 0, den = 0;
    int det = 0, finite = 0;
    *nf = 0;
    for (int i = 0; i < sc->rc; i++) {
        if (!d[i])
            continue;
        det++;
        /* Near fp32's top the real-arithmetic screen and the kernel's fp32
         * part ways (an overflow in one order, not in another): there both
         * count as non-finite. */
        const int fa = isfinite(alt[i]) && fabsf(alt[i]) < 0x1p126f, ft = isfinite(t[i]) && fabsf(t[i]) < 0x1p126f;
        if (fa != ft) {
            (*nf)++;
        } else if (fa) {
            finite++;
            num += ((double)t[i] - alt[i]) * ((double)t[i] - alt[i]);
            den += (double)alt[i] * alt[i];
        }
    }
    /* NaN agreeing with NaN tells no reading from another: some finite pair */
    if (det * 2 < sc->rc || finite == 0)
        return 0;
    *rel = den > 0 ? sqrt(num / den) : (num > 0 ? INFINITY : 0.0);
    return 1;
}

static void push(g_screen_t *s, g_hyp_t h, double rel)
{
    int i = s->n_cands < s->cap ? s->n_cands : s->cap - 1;
    if (s->n_cands == s->cap && !(rel < s->cands[i].rel || (rel == s->cands[i].rel && h.n < s->cands[i].h.n)))
        return;
    while (i > 0 && (s->cands[i - 1].rel > rel || (s->cands[i - 1].rel == rel && s->cands[i - 1].h.n > h.n))) {
        s->cands[i] = s->cands[i - 1];
        i--;
    }
    s->cands[i] = (g_cand_t){h, rel};
    if (s->n_cands < s->cap)
        s->n_cands++;
}

/* Scores alt = f * D (|alt| when abs_alt) against target t, keeping h when close. */
static void consider(scr_t *sc, g_hyp_t h, const double *D, const float *f, const float *t,
                     const unsigned char *d, int abs_alt)
{
    g_screen_t *s = sc->s;
    for (int i = 0; i < sc->rc; i++) {
        const float v = (float)(f[i] * D[i]);
        sc->alt[i] = abs_alt ? fabsf(v) : v;
    }
    double rel;
    int64_t nf;
    s->screened++;
    if (!score(sc, sc->alt, t, d, &rel, &nf))
        return;
    if (h.n == 0) {
        s->base_rel = rel;
        s->base_nf = nf;
        if (getenv("KREPLAY_DIAG_DEBUG"))
            for (int i = 0; i < sc->rc; i++)
                fprintf(stderr, "  s0[%d] alt %g target %g det %d\n", i, sc->alt[i], t[i], d[i]);
        return;
    }
    if (nf == 0 && rel <= s->keep_rel && (s->base_nf > 0 || rel <= 0.5 * s->base_rel))
        push(s, h, rel);
}

/* x [rows, K] times the block factors xb [rows, nb], into dst. */
static void fold(const scr_t *sc, const float *x, const float *xb, int rows, float *dst)
{
    for (int r = 0; r < rows; r++)
        for (int64_t k = 0; k < sc->K; k++)
            dst[r * sc->K + k] = x[r * sc->K + k] * xb[r * sc->nb + k / 32];
}

static void free_scr(scr_t *sc)
{
    for (int l = 0; l < L_COUNT; l++)
        free(sc->lv[l]);
    free(sc->x0), free(sc->xb0), free(sc->w0), free(sc->wb0), free(sc->f0), free(sc->t0);
    free(sc->xf0), free(sc->wf0), free(sc->d0), free(sc->p00), free(sc->xcodes), free(sc->wcodes);
    free(sc->xbs), free(sc->wbs), free(sc->fs), free(sc->px), free(sc->pw), free(sc->dv), free(sc->dh);
    free(sc->tmp_a), free(sc->tmp_b), free(sc->alt), free(sc->tt), free(sc->dtmp), free(sc->dd);
    for (int i = 0; sc->kcache && i < sc->g->n_prims; i++)
        free(sc->kcache[i]);
    for (int i = 0; sc->ocache && i < sc->g->n_prims; i++)
        free(sc->ocache[i]);
    free(sc->kcache), free(sc->kbuf), free(sc->ocache);
}

static int alloc_scr(scr_t *sc)
{
    const g_ops_t *g = sc->g;
    const int64_t K = sc->K, nb = sc->nb, r0 = sc->r0, c0 = sc->c0, rc = sc->rc;
    for (int l = 0; l < L_COUNT; l++)
        sc->lv[l] = malloc((size_t)(g->n_prims + 1) * sizeof(int));
    for (int i = 0; i < g->n_prims; i++) {
        const level_t l = level_of(g, &g->prims[i]);
        if (sc->lv[l])
            sc->lv[l][sc->nl[l]++] = i;
    }
    const int nxc = sc->nl[L_XC], nwc = sc->nl[L_WC];
    sc->nd = 1 + nxc + nwc + sc->nl[L_XB] + sc->nl[L_WB];
    const int64_t kmax = K > 32 * nb ? K : 32 * nb;
#define ALLOC(p, n) ((p) = malloc((size_t)(n) * sizeof *(p)))
    ALLOC(sc->x0, r0 * K), ALLOC(sc->xb0, r0 * nb), ALLOC(sc->w0, c0 * K), ALLOC(sc->wb0, c0 * nb);
    ALLOC(sc->f0, rc), ALLOC(sc->t0, rc), ALLOC(sc->xf0, r0 * K), ALLOC(sc->wf0, c0 * K);
    ALLOC(sc->d0, rc), ALLOC(sc->p00, rc * nb), ALLOC(sc->xcodes, (nxc + 1) * r0 * K);
    ALLOC(sc->wcodes, (nwc + 1) * c0 * K), ALLOC(sc->xbs, (sc->nl[L_XB] + 1) * r0 * nb);
    ALLOC(sc->wbs, (sc->nl[L_WB] + 1) * c0 * nb), ALLOC(sc->fs, (sc->nl[L_F] + 1) * rc);
    ALLOC(sc->px, (nxc + 1) * rc * nb), ALLOC(sc->pw, (nwc + 1) * rc * nb), ALLOC(sc->dv, sc->nd * rc);
    ALLOC(sc->dh, sc->nd), ALLOC(sc->tmp_a, (r0 > c0 ? r0 : c0) * kmax);
    ALLOC(sc->tmp_b, (r0 > c0 ? r0 : c0) * kmax), ALLOC(sc->alt, rc);
    ALLOC(sc->tt, (sc->nl[L_T] + 1) * rc), ALLOC(sc->dtmp, rc), ALLOC(sc->dd, (sc->nl[L_T] + 1) * rc + 1);
    ALLOC(sc->kbuf, K);
#undef ALLOC
    sc->kcache = calloc((size_t)g->n_prims + 1, sizeof *sc->kcache);
    sc->ocache = calloc((size_t)g->n_prims + 1, sizeof *sc->ocache);
    for (int l = 0; l < L_COUNT; l++)
        if (!sc->lv[l] || !sc->kcache || !sc->kbuf || !sc->ocache)
            return -1;
    for (int i = 0; i < g->n_prims; i++) {
        const g_prim_t *p = &g->prims[i];
        if (p->kind == G_KIND_INDEX && p->axis == G_AX_K && (p->op == G_XC || p->op == G_WC)) {
            const g_hyp_t h = hyp1(i);
            g_plan_t plan;
            g_plan_make(g, &h, &plan);
            if (!(sc->kcache[i] = g_k_index(&plan, p->op, K)))
                return -1;
        }
        if (p->kind == G_KIND_INDEX && p->op == G_OUT && (p->axis == G_AX_M || p->axis == G_AX_N)) {
            const int64_t len = p->axis == G_AX_M ? g->M : g->N;
            const g_index_row_t *row = &g_index_rows[p->row];
            int32_t *c = sc->ocache[i] = calloc((size_t)(2 * len + 2), sizeof(int32_t));
            if (!c)
                return -1;
            /* the indices sorted by their image (a counting sort) */
            int32_t *cursor = malloc((size_t)(len + 1) * sizeof(int32_t));
            if (!cursor)
                return -1;
            for (int64_t j = 0; j < len; j++)
                c[row->fn(j, len, row->a, row->b) + 1]++;
            for (int64_t v = 0; v < len; v++)
                c[v + 1] += c[v];
            memcpy(cursor, c, (size_t)(len + 1) * sizeof(int32_t));
            for (int64_t j = 0; j < len; j++)
                c[len + 1 + cursor[row->fn(j, len, row->a, row->b)]++] = (int32_t)j;
            free(cursor);
        }
    }
    return sc->x0 && sc->xb0 && sc->w0 && sc->wb0 && sc->f0 && sc->t0 && sc->xf0 && sc->wf0 &&
                   sc->d0 && sc->p00 && sc->xcodes && sc->wcodes && sc->xbs && sc->wbs && sc->fs &&
                   sc->px && sc->pw && sc->dv && sc->dh && sc->tmp_a && sc->tmp_b && sc->alt &&
                   sc->tt && sc->dtmp && sc->dd
               ? 0 : -1;
}

/* The kernel as specified, and every coarse primitive alone. */
static void screen_singles(scr_t *sc)
{
    const g_hyp_t none = hyp0();
    const int64_t K = sc->K, nb = sc->nb, r0 = sc->r0, c0 = sc->c0, rc = sc->rc;
    part_x_codes(sc, &none, sc->x0);
    part_x_blocks(sc, &none, sc->xb0);
    part_w_codes(sc, &none, sc->w0, sc->tmp_a);
    part_w_blocks(sc, &none, sc->wb0, sc->tmp_a);
    part_factor(sc, &none, sc->f0);
    int abs_alt;
    part_target(sc, &none, sc->t0, sc->d0, &abs_alt);
    fold(sc, sc->x0, sc->xb0, (int)r0, sc->xf0);
    fold(sc, sc->w0, sc->wb0, (int)c0, sc->wf0);
    partials(sc, sc->x0, sc->w0, sc->p00);
    combine(sc, sc->p00, sc->xb0, sc->wb0, sc->dv);
    sc->dh[0] = none;
    consider(sc, none, sc->dv, sc->f0, sc->t0, sc->d0, 0);
    int d = 1;
    for (int i = 0; i < sc->nl[L_XC]; i++, d++) {
        const g_hyp_t h = hyp1(sc->lv[L_XC][i]);
        part_x_codes(sc, &h, sc->xcodes + i * r0 * K);
        partials(sc, sc->xcodes + i * r0 * K, sc->w0, sc->px + i * rc * nb);
        combine(sc, sc->px + i * rc * nb, sc->xb0, sc->wb0, sc->dv + d * rc);
        sc->dh[d] = h;
    }
    for (int j = 0; j < sc->nl[L_WC]; j++, d++) {
        const g_hyp_t h = hyp1(sc->lv[L_WC][j]);
        part_w_codes(sc, &h, sc->wcodes + j * c0 * K, sc->tmp_a);
        partials(sc, sc->x0, sc->wcodes + j * c0 * K, sc->pw + j * rc * nb);
        combine(sc, sc->pw + j * rc * nb, sc->xb0, sc->wb0, sc->dv + d * rc);
        sc->dh[d] = h;
    }
    for (int u = 0; u < sc->nl[L_XB]; u++, d++) {
        const g_hyp_t h = hyp1(sc->lv[L_XB][u]);
        part_x_blocks(sc, &h, sc->xbs + u * r0 * nb);
        combine(sc, sc->p00, sc->xbs + u * r0 * nb, sc->wb0, sc->dv + d * rc);
        sc->dh[d] = h;
    }
    for (int v = 0; v < sc->nl[L_WB]; v++, d++) {
        const g_hyp_t h = hyp1(sc->lv[L_WB][v]);
        part_w_blocks(sc, &h, sc->wbs + v * c0 * nb, sc->tmp_a);
        combine(sc, sc->p00, sc->xb0, sc->wbs + v * c0 * nb, sc->dv + d * rc);
        sc->dh[d] = h;
    }
    for (d = 1; d < sc->nd; d++)
        consider(sc, sc->dh[d], sc->dv + d * rc, sc->f0, sc->t0, sc->d0, 0);
    for (int a = 0; a < sc->nl[L_F]; a++) {
        const g_hyp_t h = hyp1(sc->lv[L_F][a]);
        part_factor(sc, &h, sc->fs + a * rc);
        consider(sc, h, sc->dv, sc->fs + a * rc, sc->t0, sc->d0, 0);
    }
    for (int t = 0; t < sc->nl[L_T]; t++) {
        const g_hyp_t h = hyp1(sc->lv[L_T][t]);
        part_target(sc, &h, sc->tt + t * rc, sc->dd + t * rc, &abs_alt);
        consider(sc, h, sc->dv, sc->f0, sc->tt + t * rc, sc->dd + t * rc, abs_alt);
    }
}

static int abs_of(const scr_t *sc, const g_hyp_t *h)
{
    for (int i = 0; i < h->n; i++) {
        const g_prim_t *p = &sc->g->prims[h->p[i]];
        if (p->kind == G_KIND_VALUE && p->op == G_OUT && g_value_rows[p->row].kind == GV_ABS)
            return 1;
    }
    return 0;
}

/* Pairs whose parts meet at the block partial sums, and the factor and
 * target pairs. */
static void screen_block_pairs(scr_t *sc)
{
    const g_prim_t *P = sc->g->prims;
    const int64_t nb = sc->nb, r0 = sc->r0, c0 = sc->c0, rc = sc->rc;
    const int nxc = sc->nl[L_XC], nwc = sc->nl[L_WC], nxb = sc->nl[L_XB], nwb = sc->nl[L_WB];
    for (int i = 0; i < nxc + nwc; i++) {
        const double *Pi = i < nxc ? sc->px + i * rc * nb : sc->pw + (i - nxc) * rc * nb;
        const int pi = i < nxc ? sc->lv[L_XC][i] : sc->lv[L_WC][i - nxc];
        for (int u = 0; u < nxb; u++) {
            combine(sc, Pi, sc->xbs + u * r0 * nb, sc->wb0, sc->dtmp);
            consider(sc, hyp2(pi, sc->lv[L_XB][u]), sc->dtmp, sc->f0, sc->t0, sc->d0, 0);
        }
        for (int v = 0; v < nwb; v++) {
            combine(sc, Pi, sc->xb0, sc->wbs + v * c0 * nb, sc->dtmp);
            consider(sc, hyp2(pi, sc->lv[L_WB][v]), sc->dtmp, sc->f0, sc->t0, sc->d0, 0);
        }
    }
    for (int u = 0; u < nxb; u++)
        for (int v = 0; v < nwb; v++) {
            combine(sc, sc->p00, sc->xbs + u * r0 * nb, sc->wbs + v * c0 * nb, sc->dtmp);
            consider(sc, hyp2(sc->lv[L_XB][u], sc->lv[L_WB][v]), sc->dtmp, sc->f0, sc->t0, sc->d0, 0);
        }
    for (int l = L_XB; l <= L_WB; l += L_WB - L_XB) {
        for (int a = 0; a < sc->nl[l]; a++)
            for (int b = 0; b < sc->nl[l]; b++) {
                const int pa = sc->lv[l][a], pb = sc->lv[l][b];
                if (a == b || !g_compatible(&P[pa], &P[pb]) || (b < a && !g_ordered(&P[pa], &P[pb])))
                    continue;
                const g_hyp_t h = hyp2(pa, pb);
                if (l == L_XB) {
                    part_x_blocks(sc, &h, sc->tmp_a);
                    combine(sc, sc->p00, sc->tmp_a, sc->wb0, sc->dtmp);
                } else {
                    part_w_blocks(sc, &h, sc->tmp_a, sc->tmp_b);
                    combine(sc, sc->p00, sc->xb0, sc->tmp_a, sc->dtmp);
                }
                consider(sc, h, sc->dtmp, sc->f0, sc->t0, sc->d0, 0);
            }
    }
    /* factors and targets with every depth-1 dot, and with each other */
    const int nf = sc->nl[L_F], nt = sc->nl[L_T];
    for (int d = 1; d < sc->nd; d++) {
        for (int a = 0; a < nf; a++)
            consider(sc, join(hyp1(sc->lv[L_F][a]), sc->dh[d]), sc->dv + d * rc, sc->fs + a * rc, sc->t0,
                     sc->d0, 0);
        for (int t = 0; t < nt; t++) {
            const g_hyp_t ht = hyp1(sc->lv[L_T][t]);
            consider(sc, join(ht, sc->dh[d]), sc->dv + d * rc, sc->f0, sc->tt + t * rc, sc->dd + t * rc,
                     abs_of(sc, &ht));
        }
    }
    for (int a = 0; a < nf; a++) {
        for (int b = 0; b < nf; b++) {
            const int pa = sc->lv[L_F][a], pb = sc->lv[L_F][b];
            if (a == b || !g_compatible(&P[pa], &P[pb]) || (b < a && !g_ordered(&P[pa], &P[pb])))
                continue;
            const g_hyp_t h = hyp2(pa, pb);
            part_factor(sc, &h, sc->alt);
            memcpy(sc->tmp_a, sc->alt, (size_t)rc * sizeof(float));
            consider(sc, h, sc->dv, sc->tmp_a, sc->t0, sc->d0, 0);
        }
        for (int t = 0; t < nt; t++) {
            const g_hyp_t ht = hyp1(sc->lv[L_T][t]);
            consider(sc, hyp2(sc->lv[L_F][a], sc->lv[L_T][t]), sc->dv, sc->fs + a * rc, sc->tt + t * rc,
                     sc->dd + t * rc, abs_of(sc, &ht));
        }
    }
    for (int a = 0; a < nt; a++)
        for (int b = 0; b < nt; b++) {
            const int pa = sc->lv[L_T][a], pb = sc->lv[L_T][b];
            if (a == b || !g_compatible(&P[pa], &P[pb]) || (b < a && !g_ordered(&P[pa], &P[pb])))
                continue;
            const g_hyp_t h = hyp2(pa, pb);
            int abs_alt;
            unsigned char *dd = sc->dd + nt * rc;
            part_target(sc, &h, sc->tmp_b, dd, &abs_alt);
            consider(sc, h, sc->dv, sc->f0, sc->tmp_b, dd, abs_alt);
        }
}

/* What a composition's vector on one side's codes depends on: where its
 * maps send the sampled rows (or columns), which K maps and 2-D map it
 * reads through, its value maps and K weights.  Compositions with the same
 * one have the same vector, so it is computed once (two row maps that send
 * the sample's rows to the same rows are one reading there). */
typedef struct {
    int64_t img[4];
    int k[2], two_d, kw[2];
    uint64_t mask;
} side_sig_t;

static void side_signature(const scr_t *sc, const g_hyp_t *h, int side, side_sig_t *sg)
{
    const g_ops_t *g = sc->g;
    const g_operand_t op = side ? G_WC : G_XC;
    g_plan_t p;
    g_plan_make(g, h, &p);
    memset(sg, 0, sizeof *sg);
    sg->k[0] = sg->k[1] = sg->two_d = sg->kw[0] = sg->kw[1] = -1;
    const int lines = side ? sc->c0 : sc->r0;
    for (int i = 0; i < lines && i < 4; i++)
        sg->img[i] = side ? g_plan_index(&p, G_WC, G_AX_N, sc->s->cols[i], g->N)
                          : g_plan_index(&p, G_XC, G_AX_M, sc->s->rows[i], g->M);
    int nk = 0, nw = 0;
    for (int i = 0; i < h->n; i++) {
        const g_prim_t *q = &g->prims[h->p[i]];
        if (q->kind == G_KIND_INDEX && q->op == op && q->axis == G_AX_K)
            sg->k[nk++] = h->p[i];
        else if (q->kind == G_KIND_INDEX && q->op == op && q->axis == G_AX_2D)
            sg->two_d = h->p[i];
        else if (q->kind == G_KIND_STRUCT)
            sg->kw[nw++] = h->p[i];
    }
    sg->mask = p.values[op];
}

/* Two maps on one side's codes: each distinct vector materialised (folded
 * with the block scales as is) and dotted with the other side's; every
 * composition then scored with its vector's dots. */
static void same_side_pairs(scr_t *sc, int side)
{
    const g_prim_t *P = sc->g->prims;
    const int l = side ? L_WC : L_XC, n = sc->nl[l];
    const int64_t K = sc->K, rows = side ? sc->c0 : sc->r0, rc = sc->rc;
    const int64_t cap = (int64_t)n * n + 1;
    g_hyp_t *hs = malloc((size_t)cap * sizeof *hs);
    int32_t *uid = malloc((size_t)cap * sizeof(int32_t));
    side_sig_t *sigs = malloc((size_t)cap * sizeof *sigs);
    double *dots = malloc((size_t)(cap * rc) * sizeof(double));
    float *vec = malloc((size_t)(rows * K) * sizeof(float));
    int64_t tcap = 1;
    while (tcap < 2 * cap)
        tcap *= 2;
    int32_t *table = malloc((size_t)tcap * sizeof(int32_t));
    if (!hs || !uid || !sigs || !dots || !vec || !table) {
        sc->failed = 1;
        free(hs), free(uid), free(sigs), free(dots), free(vec), free(table);
        return;
    }
    for (int64_t i = 0; i < tcap; i++)
        table[i] = -1;
    int64_t np = 0, nu = 0;
    for (int a = 0; a < n; a++)
        for (int b = 0; b < n; b++) {
            const int pa = sc->lv[l][a], pb = sc->lv[l][b];
            if (a == b || !g_compatible(&P[pa], &P[pb]) || (b < a && !g_ordered(&P[pa], &P[pb])))
                continue;
            hs[np] = hyp2(pa, pb);
            side_sig_t sg;
            side_signature(sc, &hs[np], side, &sg);
            /* open addressing on the signature's FNV-1a hash */
            uint64_t hash = 1469598103934665603ull;
            for (size_t i = 0; i < sizeof sg; i++)
                hash = (hash ^ ((const unsigned char *)&sg)[i]) * 1099511628211ull;
            int64_t slot = (int64_t)(hash & (uint64_t)(tcap - 1)), u;
            while ((u = table[slot]) >= 0 && memcmp(&sigs[u], &sg, sizeof sg))
                slot = (slot + 1) & (tcap - 1);
            if (u < 0) {
                u = nu;
                table[slot] = (int32_t)nu;
                sigs[nu++] = sg;
                if (!side)
                    part_x_codes(sc, &hs[np], sc->tmp_a);
                else
                    part_w_codes(sc, &hs[np], sc->tmp_a, sc->tmp_b);
                fold(sc, sc->tmp_a, side ? sc->wb0 : sc->xb0, (int)rows, vec);
                for (int r = 0; r < sc->r0; r++)
                    for (int c = 0; c < sc->c0; c++)
                        dots[u * rc + r * sc->c0 + c] = side ? dotf(sc->xf0 + r * K, vec + c * K, K)
                                                             : dotf(vec + r * K, sc->wf0 + c * K, K);
            }
            uid[np++] = (int32_t)u;
        }
    for (int64_t i = 0; i < np; i++)
        consider(sc, hs[i], dots + uid[i] * rc, sc->f0, sc->t0, sc->d0, 0);
    free(hs), free(uid), free(sigs), free(dots), free(vec), free(table);
}

/* Pairs of code maps: x codes with w codes, and two maps on one side
 * (materialised, each against the other side as is). */
static void screen_code_pairs(scr_t *sc)
{
    const int64_t K = sc->K, r0 = sc->r0, c0 = sc->c0;
    const int nxc = sc->nl[L_XC], nwc = sc->nl[L_WC];
    if (nxc > 0 && nwc > 0) {
        float *A = malloc((size_t)(nxc * r0 * K) * sizeof(float)), *B = malloc((size_t)(nwc * c0 * K) * sizeof(float));
        if (!A || !B) {
            sc->failed = 1;
        } else {
            for (int i = 0; i < nxc; i++)
                fold(sc, sc->xcodes + i * r0 * K, sc->xb0, (int)r0, A + i * r0 * K);
            for (int j = 0; j < nwc; j++)
                fold(sc, sc->wcodes + j * c0 * K, sc->wb0, (int)c0, B + j * c0 * K);
            /* one sgemm: every x map's rows against every w map's columns */
            float *C = malloc((size_t)(nxc * r0 * nwc * c0) * sizeof(float));
            if (!C) {
                sc->failed = 1;
            } else {
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)(nxc * r0), (int)(nwc * c0), (int)K,
                            1.0f, A, (int)K, B, (int)K, 0.0f, C, (int)(nwc * c0));
                for (int i = 0; i < nxc; i++)
                    for (int j = 0; j < nwc; j++) {
                        for (int r = 0; r < r0; r++)
                            for (int c = 0; c < c0; c++)
                                sc->dtmp[r * c0 + c] = C[(i * r0 + r) * nwc * c0 + j * c0 + c];
                        consider(sc, hyp2(sc->lv[L_XC][i], sc->lv[L_WC][j]), sc->dtmp, sc->f0, sc->t0, sc->d0, 0);
                    }
                free(C);
            }
        }
        free(A), free(B);
    }
    for (int side = 0; side < 2; side++)
        same_side_pairs(sc, side);
}

int g_screen_run(g_screen_t *s)
{
    scr_t sc = {.s = s, .g = s->g, .K = s->g->K, .nb = s->g->nb, .r0 = s->r0, .c0 = s->c0,
                .rc = s->r0 * s->c0};
    s->n_cands = 0;
    s->screened = 0;
    s->base_rel = INFINITY;
    s->base_nf = 0;
    int status = 0;
    if (alloc_scr(&sc) == 0) {
        screen_singles(&sc);
        if (!s->singles_only) {
            screen_block_pairs(&sc);
            screen_code_pairs(&sc);
        }
        status = sc.failed ? -1 : 0;
    } else {
        status = -1;
    }
    free_scr(&sc);
    return status;
}
