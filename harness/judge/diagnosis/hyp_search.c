/* The grammar family of the diagnosis: every composition of at most two
 * primitives the case's shape allows (grammar.h) is screened on a small
 * sample of outputs (hyp_screen.c), those that come close and the fine
 * compositions (roundings, which only a bit-faithful re-evaluation sees) are
 * re-evaluated bit for bit (hyp_eval.c) on a larger sample and ranked, and
 * the best is confirmed on a larger one still.  It is stated as the cause
 * only when it reproduces the output there: bit-identical on every sampled
 * output, or within the row's threshold (the level of a correct kernel)
 * and clearly closer than the kernel as specified; the line says which, and
 * names the runner-up.  The samples lean on the outputs that are most wrong,
 * so a fault that touches a few rows is still in them. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diag_ctx.h"
#include "hyp_eval.h"
#include "hyp_screen.h"
#include "learned_map.h"
#include "learned_table.h"

#define G_MAX_PRIMS 2048
#define G_SCREEN_KEEP 0.05      /* the screen keeps a composition within this residual */
#define G_SCREEN_CAP 48
#define G_RANK_CAP 16
#define G_CONFIRM 4             /* compositions confirmed on the large sample */

typedef struct {
    g_hyp_t h;
    double rel;
    int64_t nf, same, count, finite;
    int named;                  /* primitives with a name the diagnosis has used before (the
                                   faults it has met): among compositions the data cannot
                                   tell apart, those come first */
} g_score_t;

typedef struct {
    int64_t *rows, *cols;
    int64_t nr, nc;
    int64_t *pm, *pn;           /* the grid, row-major */
    int64_t count;
} g_sample_t;

typedef struct {
    dctx_t *x;
    g_ops_t ops;
    g_prim_t *prims;
    double *row_bad, *col_bad;  /* how wrong each row / column is against the reference */
    float *alt;
} g_search_t;

/* ---- operands ---- */

static int ops_init(g_search_t *s)
{
    const diag_input_t *d = s->x->d;
    const kernel_inputs_t *in = d->in;
    const kernel_act_t *act = d->act;
    g_ops_t *g = &s->ops;
    memset(g, 0, sizeof *g);
    g->M = s->x->M, g->N = s->x->N, g->K = s->x->K, g->nb = g->K / 32;
    if (g->K % 32 || g->K < 64 || !act)
        return 0;
    g_route_t route;
    if (act->kind == ACT_FP8_PER_TOKEN && act->codes && act->token_scale && in->weight.packed && in->weight.scales) {
        route = G_ROUTE_W4A8;
        g->xcodes = act->codes;
        g->xscale = act->token_scale;
        g->fp8_fnuz = act->fp8_format == FP8_E4M3FNUZ;
    } else if (act->kind == ACT_MXFP4_PER_BLOCK && act->codes && act->block_scale && in->weight.packed &&
               in->weight.scales) {
        route = G_ROUTE_W4A4;
        g->xcodes = act->codes;
        g->xbscale = act->block_scale;
    } else if (!act->codes && act->dequant && in->weight_bf16) {
        route = G_ROUTE_BF16;
        g->xvals = act->dequant;
        g->wbf16 = in->weight_bf16;
    } else {
        return 0;
    }
    g->w = &in->weight;
    g->shape = (g_shape_t){route, g->M, g->N, g->K, g->fp8_fnuz, g->N % 16 == 0 && g->K % 16 == 0};
    s->prims = malloc(G_MAX_PRIMS * sizeof *s->prims);
    if (!s->prims)
        return -1;
    g->n_prims = g_enumerate(&g->shape, s->prims, G_MAX_PRIMS);
    g->prims = s->prims;
    g_ops_ready(g);
    return 1;
}

/* ---- samples ---- */

/* How wrong each judged row and column is: the share of its elements
 * non-finite on one side only, times 1e6 (nonfinite_kind), plus its squared
 * error over its reference's energy. */
static int badness(g_search_t *s)
{
    const dctx_t *x = s->x;
    const int64_t M = x->M, N = x->N;
    s->row_bad = calloc((size_t)M, sizeof(double));
    s->col_bad = calloc((size_t)N, sizeof(double));
    double *rden = calloc((size_t)M, sizeof(double)), *cden = calloc((size_t)N, sizeof(double));
    int64_t *rnf = calloc((size_t)M, sizeof(int64_t)), *cnf = calloc((size_t)N, sizeof(int64_t));
    unsigned char *wild = calloc((size_t)M, 1);
    const int ok = s->row_bad && s->col_bad && rden && cden && rnf && cnf && wild;
    for (int64_t m = 0; m < M && ok; m++) {
        if (x->poisoned_rows && x->poisoned_rows[m])
            continue;
        /* A row whose reference reaches fp32's top (operands scaled by
         * 2^127: an MXFP4 quantizer's NaN blocks) is ruled by a few huge
         * terms and tells readings apart poorly: not picked as most wrong. */
        for (int64_t n = 0; n < N && !wild[m]; n++)
            wild[m] = !(fabsf(x->d->ref[m * N + n]) < 0x1p100f) && !isnan(x->d->ref[m * N + n]);
        for (int64_t n = 0; n < N; n++) {
            const float o = x->d->out[m * N + n], r = x->d->ref[m * N + n];
            /* near fp32's top counts as non-finite, as in the screen */
            const int fo = isfinite(o) && fabsf(o) < 0x1p126f, fr = isfinite(r) && fabsf(r) < 0x1p126f;
            if (fo != fr) {
                rnf[m]++;
                cnf[n]++;
            } else if (fo) {
                const double e = ((double)o - r) * ((double)o - r);
                s->row_bad[m] += e;
                s->col_bad[n] += e;
                rden[m] += (double)r * r;
                cden[n] += (double)r * r;
            }
        }
    }
    for (int64_t m = 0; m < M && ok; m++)
        s->row_bad[m] = x->poisoned_rows && x->poisoned_rows[m] ? -1
                        : wild[m] ? 0 : 1e6 * (double)rnf[m] / (double)N + fmin(s->row_bad[m] / (rden[m] + 1e-300), 1e5);
    for (int64_t n = 0; n < N && ok; n++)
        s->col_bad[n] = 1e6 * (double)cnf[n] / (double)M + fmin(s->col_bad[n] / (cden[n] + 1e-300), 1e5);
    free(rden), free(cden), free(rnf), free(cnf), free(wild);
    return ok ? 0 : -1;
}

static int taken(const int64_t *idx, int64_t n, int64_t v)
{
    for (int64_t i = 0; i < n; i++)
        if (idx[i] == v)
            return 1;
    return 0;
}

static int nonfinite_kind(double bad)
{
    return bad >= 0.5e6;    /* badness(): mostly non-finite mismatches */
}

/* The most wrong index left for pick's pass (-1: none).  Pass 0 takes the
 * most wrong, then the most wrong of the other kind (wrong by finite values
 * vs by a non-finite mismatch), so a sample of the most wrong has finite
 * outputs to discriminate on; pass 1 indices of other alignments (low bits);
 * pass 2 any. */
static int64_t next_pick(const double *bad, int64_t len, const int64_t *idx, int64_t n, int pass)
{
    int64_t best = -1;
    for (int64_t i = 0; i < len; i++) {
        if (bad[i] < 0 || taken(idx, n, i))
            continue;
        if (pass == 0 && n == 1 && nonfinite_kind(bad[i]) == nonfinite_kind(bad[idx[0]]))
            continue;
        int fresh = 1;
        for (int64_t j = 0; j < n && pass == 1; j++)
            fresh &= (idx[j] & 7) != (i & 7);
        if (fresh && (best < 0 || bad[i] > bad[best]))
            best = i;
    }
    return best;
}

/* Up to `worst` of the most wrong indices (bad[i] < 0: never; next_pick),
 * then up to `spread` more spread evenly over the rest; returns how many. */
static int64_t pick(const double *bad, int64_t len, const unsigned char *skip, int64_t worst, int64_t spread,
                    int64_t *idx)
{
    int64_t n = 0;
    for (int pass = 0; pass < 3 && n < worst; pass++)
        for (int64_t got; n < worst && (pass > 0 || n < 2) && (got = next_pick(bad, len, idx, n, pass)) >= 0;)
            idx[n++] = got;
    /* the spread ones evenly over the indices not taken, both ends included */
    int64_t *even = malloc((size_t)len * sizeof(int64_t));
    unsigned char *mask = malloc((size_t)len);
    if (even && mask) {
        for (int64_t i = 0; i < len; i++)
            mask[i] = (skip && skip[i]) || bad[i] < 0;
        for (int64_t i = 0; i < n; i++)
            mask[idx[i]] = 1;
        /* one spread index is the middle one, not the first */
        const int64_t got = diag_sample(len, spread == 1 ? 3 : spread, mask, even);
        for (int64_t i = spread == 1 && got == 3 ? 1 : 0; i < got && i < (spread == 1 ? 2 : got); i++)
            idx[n++] = even[i];
    }
    free(even);
    free(mask);
    return n;
}

static void sample_free(g_sample_t *p)
{
    free(p->rows), free(p->cols), free(p->pm), free(p->pn);
    memset(p, 0, sizeof *p);
}

static int sample_make(const g_search_t *s, int64_t rw, int64_t rs, int64_t cw, int64_t cs, g_sample_t *p)
{
    const dctx_t *x = s->x;
    memset(p, 0, sizeof *p);
    p->rows = malloc((size_t)(rw + rs + x->M) * sizeof(int64_t));
    p->cols = malloc((size_t)(cw + cs + x->N) * sizeof(int64_t));
    if (!p->rows || !p->cols)
        return -1;
    p->nr = pick(s->row_bad, x->M, x->poisoned_rows, rw, rs, p->rows);
    p->nc = pick(s->col_bad, x->N, NULL, cw, cs, p->cols);
    p->count = p->nr * p->nc;
    p->pm = malloc((size_t)(p->count + 1) * sizeof(int64_t));
    p->pn = malloc((size_t)(p->count + 1) * sizeof(int64_t));
    if (!p->pm || !p->pn)
        return -1;
    for (int64_t i = 0; i < p->nr; i++)
        for (int64_t j = 0; j < p->nc; j++) {
            p->pm[i * p->nc + j] = p->rows[i];
            p->pn[i * p->nc + j] = p->cols[j];
        }
    return 0;
}

/* ---- bit-faithful scores ---- */

static int score_on(g_search_t *s, const g_sample_t *p, const g_hyp_t *h, const float *target, g_score_t *sc)
{
    if (g_eval(&s->ops, h, p->pm, p->pn, p->count, s->alt))
        return -1;
    const float *out = target ? target : s->x->d->out;
    const int64_t N = s->x->N;
    cmp_acc_t acc = {{0, 0, 0}, 0, 0};
    int64_t same = 0;
    for (int64_t i = 0; i < p->count; i++) {
        const float o = target ? out[i] : out[p->pm[i] * N + p->pn[i]], a = s->alt[i];
        same += o == a || (isnan(o) && isnan(a));
        cmp_acc_add(&acc, o, a);
    }
    const cmp_t c = cmp_acc_result(&acc);
    int named = 0;
    for (int i = 0; i < h->n; i++)
        named += s->ops.prims[h->p[i]].alias != NULL;
    *sc = (g_score_t){*h, c.rel, c.nf_mismatch, same, p->count, c.finite, named};
    return 0;
}

/* a ranks before b: fewer non-finite mismatches, the smaller residual, more
 * bit-identical outputs, fewer primitives, more named ones. */
static int before(const g_score_t *a, const g_score_t *b)
{
    if (a->nf != b->nf)
        return a->nf < b->nf;
    if (a->rel != b->rel)
        return a->rel < b->rel;
    if (a->same != b->same)
        return a->same > b->same;
    if (a->h.n != b->h.n)
        return a->h.n < b->h.n;
    return a->named > b->named;
}

static void insert(g_score_t *list, int *n, int cap, g_score_t v)
{
    int i = *n < cap ? *n : cap - 1;
    if (*n == cap && !before(&v, &list[i]))
        return;
    while (i > 0 && before(&v, &list[i - 1])) {
        list[i] = list[i - 1];
        i--;
    }
    list[i] = v;
    if (*n < cap)
        (*n)++;
}

/* ---- the stages ---- */

static int fine_only(const g_ops_t *g, const g_hyp_t *h)
{
    int fine = h->n > 0;
    for (int i = 0; i < h->n; i++)
        fine &= g->prims[h->p[i]].fine;
    return fine;
}

static g_hyp_t join1(g_hyp_t a, int p)
{
    a.p[a.n++] = p;
    return a;
}

static int joinable(const g_ops_t *g, const g_hyp_t *a, int p)
{
    if (a->n >= 2)
        return 0;
    for (int i = 0; i < a->n; i++)
        if (a->p[i] == p || !g_compatible(&g->prims[a->p[i]], &g->prims[p]))
            return 0;
    return 1;
}

/* The screen's survivors re-evaluated bit for bit on the small sample; when
 * none is bit-identical there, the fine primitives alone, in pairs, and on
 * each survivor of one primitive.  kept: best first. */
static int stage_small(g_search_t *s, const g_sample_t *p, const g_screen_t *scr, g_score_t *base,
                       g_score_t *kept, int *nk)
{
    const g_ops_t *g = &s->ops;
    const g_hyp_t none = {0, {0, 0}};
    if (score_on(s, p, &none, NULL, base))
        return -1;
    *nk = 0;
    int exact = 0;
    for (int i = 0; i < scr->n_cands; i++) {
        g_score_t v;
        if (score_on(s, p, &scr->cands[i].h, NULL, &v))
            return -1;
        if (v.nf == 0 && v.rel <= G_SCREEN_KEEP) {
            insert(kept, nk, G_RANK_CAP * 2, v);
            exact |= v.same == v.count;
        }
    }
    if (exact)
        return 0;
    g_score_t bases[9];
    int nb = 0;
    bases[nb++] = *base;
    for (int i = 0; i < *nk && nb < 9; i++)
        if (kept[i].h.n == 1)
            bases[nb++] = kept[i];
    for (int f = 0; f < g->n_prims; f++) {
        if (!g->prims[f].fine)
            continue;
        for (int b = 0; b < nb; b++) {
            if (!joinable(g, &bases[b].h, f))
                continue;
            const g_hyp_t h = join1(bases[b].h, f);
            g_score_t v;
            if (score_on(s, p, &h, NULL, &v))
                return -1;
            if (v.nf <= bases[b].nf && (v.same > bases[b].same || v.rel < bases[b].rel))
                insert(kept, nk, G_RANK_CAP * 2, v);
        }
        if (base->rel > G_SCREEN_KEEP || base->nf > 0)
            continue;
        for (int f2 = f + 1; f2 < g->n_prims; f2++) {
            const g_hyp_t h1 = {1, {f, 0}};
            if (!g->prims[f2].fine || !joinable(g, &h1, f2))
                continue;
            const g_hyp_t h = join1(h1, f2);
            g_score_t v;
            if (score_on(s, p, &h, NULL, &v))
                return -1;
            if (v.nf == 0 && (v.same > base->same || v.rel < base->rel))
                insert(kept, nk, G_RANK_CAP * 2, v);
        }
    }
    return 0;
}

/* Whether the outputs a carried accumulator leaves alone (the first of each
 * tile along its axis) are much less wrong than the others. */
static int carry_signature(const g_search_t *s, const g_struct_row_t *r)
{
    const int along_n = r->carry == 1;
    const double *bad = along_n ? s->col_bad : s->row_bad;
    const int64_t len = along_n ? s->x->N : s->x->M;
    double at_start = 0, rest = 0;
    int64_t n_start = 0, n_rest = 0;
    for (int64_t i = 0; i < len; i++) {
        if (bad[i] < 0)
            continue;
        const int start = r->tile ? i % r->tile == 0 : i == 0;
        *(start ? &at_start : &rest) += bad[i];
        *(start ? &n_start : &n_rest) += 1;
    }
    return n_start > 0 && n_rest > 0 && at_start / (double)n_start * 4 < rest / (double)n_rest;
}

/* A carried accumulator hides its partner from the screen (every output
 * moved by the ones before it): the output is un-carried (each output less
 * the one before it in its tile, the epilogue's x_scale undone), the
 * primitives alone screened against that, and each one that comes close
 * joined with the carry and re-evaluated bit for bit.  Only for a carry
 * whose signature the output shows, and a case small enough to un-carry
 * whole. */
static int stage_carry(g_search_t *s, const g_sample_t *p0, const g_sample_t *p, const g_score_t *base,
                       g_score_t *kept, int *nk)
{
    const g_ops_t *g = &s->ops;
    const int64_t M = s->x->M, N = s->x->N;
    if (M * N > (int64_t)1 << 22)
        return 0;
    float *un = malloc((size_t)(M * N) * sizeof(float));
    if (!un)
        return -1;
    g_plan_t plan;
    const g_hyp_t none = {0, {0, 0}};
    g_plan_make(g, &none, &plan);
    g_cand_t cands[G_SCREEN_CAP];
    int status = 0;
    for (int c = 0; c < g->n_prims && status == 0; c++) {
        const g_prim_t *pc = &g->prims[c];
        if (pc->kind != G_KIND_STRUCT || g_struct_rows[pc->row].kind != GS_CARRY ||
            !carry_signature(s, &g_struct_rows[pc->row]))
            continue;
        const g_struct_row_t *r = &g_struct_rows[pc->row];
        const float *out = s->x->d->out;
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++) {
                const int64_t i = r->carry == 1 ? n : m, prev = r->carry == 1 ? m * N + n - 1 : (m - 1) * N + n;
                const int start = r->tile ? i % r->tile == 0 : i == 0;
                float before = 0.0f;
                if (!start)
                    before = r->carry == 1 ? out[prev]
                                           : out[prev] * (g_x_scale(g, &plan, m, n) / g_x_scale(g, &plan, m - 1, n));
                un[m * N + n] = out[m * N + n] - before;
            }
        g_screen_t scr = {.g = g, .out = un, .rows = p0->rows, .cols = p0->cols, .r0 = (int)p0->nr,
                          .c0 = (int)p0->nc, .keep_rel = G_SCREEN_KEEP, .cands = cands, .cap = G_SCREEN_CAP,
                          .singles_only = 1};
        status = g_screen_run(&scr);
        for (int i = 0; i < scr.n_cands && status == 0; i++) {
            if (scr.cands[i].h.n != 1 || !joinable(g, &scr.cands[i].h, c))
                continue;
            const g_hyp_t h = join1(scr.cands[i].h, c);
            g_score_t v;
            status = score_on(s, p, &h, NULL, &v);
            if (status == 0 && v.nf <= base->nf && (v.same > base->same || v.rel < base->rel))
                insert(kept, nk, G_RANK_CAP * 2, v);
        }
    }
    free(un);
    return status;
}

/* Every output of the sample non-finite where the kernel as specified is
 * finite: the screen's real arithmetic has nothing to fit, so each
 * primitive alone is evaluated bit for bit, and those that give the same
 * non-finite value (NaN, or Inf of the sign) at every output are kept. */
static int stage_nonfinite(g_search_t *s, const g_sample_t *p, g_score_t *base, g_score_t *kept, int *nk)
{
    const g_hyp_t none = {0, {0, 0}};
    if (score_on(s, p, &none, NULL, base))
        return -1;
    *nk = 0;
    for (int f = 0; f < s->ops.n_prims; f++) {
        const g_hyp_t h = {1, {f, 0}};
        g_score_t v;
        if (score_on(s, p, &h, NULL, &v))
            return -1;
        if (v.nf == 0 && v.same == v.count)
            insert(kept, nk, G_RANK_CAP * 2, v);
    }
    return 0;
}

/* Whether the sample's outputs are all non-finite (the kernel as specified
 * is then checked to be finite there by the caller's ranking). */
static int all_nonfinite(const g_search_t *s, const g_sample_t *p)
{
    for (int64_t i = 0; i < p->count; i++)
        if (isfinite(s->x->d->out[p->pm[i] * s->x->N + p->pn[i]]))
            return 0;
    return p->count > 0;
}

/* Whether w reproduces the output on its sample, against the kernel as
 * specified (base). */
static int reproduces(const dctx_t *x, const g_ops_t *g, const g_score_t *w, const g_score_t *base)
{
    /* Agreeing on NaN alone tells no reading from another: some finite
     * outputs must be reproduced too. */
    const int64_t min_finite = w->count / 100 > 8 ? w->count / 100 : 8;
    if (w->nf == 0 && w->h.n == 1 && w->finite == 0 && w->count >= 64 && w->same == w->count &&
        base->nf == base->count)
        return 1;   /* non-finite everywhere the kernel as specified is finite, the same value each */
    if (w->nf > 0 || w->count == 0 || w->h.n == 0 || w->finite < min_finite)
        return 0;
    const int all = w->same == w->count;
    if (fine_only(g, &w->h)) {
        /* A rounding: bit for bit on nearly every output, where the kernel as
         * specified is not. */
        const int64_t margin = w->count / 50 > 4 ? w->count / 50 : 4;
        return w->same * 100 >= w->count * 99 && w->same >= base->same + margin && w->rel <= x->thr;
    }
    const int clearer = base->nf > 0 || w->rel * 10 <= base->rel ||
                        (base->rel > x->thr && w->rel * 2 <= base->rel);
    return (all || w->rel <= x->thr) && (clearer || (all && base->same < base->count));
}

/* ---- the report ---- */

/* A primitive's meaning; a K range with the case's own indices. */
static void prim_meaning(const g_ops_t *g, const g_prim_t *p, char *buf, int cap)
{
    g_prim_meaning(p, buf, cap);
    if (p->kind != G_KIND_STRUCT || g_struct_rows[p->row].kind != GS_K_WEIGHT || g_struct_rows[p->row].parity)
        return;
    const g_struct_row_t *r = &g_struct_rows[p->row];
    const int64_t K = g->K, len = r->unit ? r->unit : K / r->parts * (r->span ? r->span : 1);
    const int64_t k0 = r->last ? K - len : 0;
    const size_t used = strlen(buf);
    if (len == 1)
        snprintf(buf + used, (size_t)cap - used, ": k %lld %s", (long long)k0, r->weight ? "counted twice" : "missing");
    else if (len == 32)     /* in the words of the K-block fit, which names blocks so */
        snprintf(buf + used, (size_t)cap - used, ": block %lld (k %lld-%lld) %s [the %s]", (long long)(k0 / 32),
                 (long long)k0, (long long)(k0 + 31), r->weight ? "x 2^1 (counted twice)" : "missing",
                 r->last ? "last" : "first");
    else
        snprintf(buf + used, (size_t)cap - used, ": k %lld-%lld %s", (long long)k0, (long long)(k0 + len - 1),
                 r->weight ? "counted twice" : "missing");
}

/* "'a' + 'b'" (meanings 0) or "a's meaning; b's meaning" (meanings 1). */
static void hyp_text(const g_ops_t *g, const g_hyp_t *h, int meanings, char *buf, int cap)
{
    int len = 0;
    buf[0] = '\0';
    for (int i = 0; i < h->n && len < cap; i++) {
        char one[192];
        if (meanings)
            prim_meaning(g, &g->prims[h->p[i]], one, sizeof one);
        else
            g_prim_name(&g->prims[h->p[i]], one, sizeof one);
        len += snprintf(buf + len, (size_t)(cap - len), meanings ? "%s%s" : "%s'%s'",
                        i ? (meanings ? "; " : " + ") : "", one);
    }
}

/* One K map on both the activation and the weight codes moves each product
 * x_k w_k whole: the same output as codes read in order with each
 * element's block scale taken through the inverse map.  When the map moves
 * elements across 32-blocks, that reading (a scale indexing fault, the
 * likelier one in a kernel) is said beside the names. */
static void same_k_map_on_both(const g_ops_t *g, const g_hyp_t *h, char *names, int cap)
{
    if (h->n != 2)
        return;
    const g_prim_t *a = &g->prims[h->p[0]], *b = &g->prims[h->p[1]];
    if (a->kind != G_KIND_INDEX || b->kind != G_KIND_INDEX || a->axis != G_AX_K || b->axis != G_AX_K ||
        a->row != b->row || a->op == b->op || g->shape.route == G_ROUTE_BF16)
        return;
    const g_index_row_t *r = &g_index_rows[a->row];
    int across = 0;
    for (int64_t k = 0; k < g->K && !across; k++)
        across = r->fn(k, g->K, r->a, r->b) / 32 != k / 32;
    if (!across)
        return;
    const size_t len = strlen(names);
    snprintf(names + len, (size_t)cap - len, " (equivalently, codes in order and block scales indexed along K "
             "through the inverse: elements take another 32-block's scale)");
}

static const char *lead_of(const g_ops_t *g, const g_hyp_t *h)
{
    int operand = 1, out = 1, acc = 1;
    for (int i = 0; i < h->n; i++) {
        const g_operand_t op = g->prims[h->p[i]].op;
        operand &= op == G_XC || op == G_XS || op == G_WC || op == G_WS;
        out &= op == G_OUT;
        acc &= op == G_ACC;
    }
    return operand ? "operand misread" : out ? "output" : acc ? "computation" : "composition";
}

static void evidence(const dctx_t *x, const g_score_t *w, char *buf, int cap)
{
    if (w->same == w->count && w->finite == 0)
        snprintf(buf, (size_t)cap, "the same non-finite value (NaN, or Inf of the sign) at all %lld sampled outputs",
                 (long long)w->count);
    else if (w->same == w->count)
        snprintf(buf, (size_t)cap, "bit-identical on all %lld sampled outputs", (long long)w->count);
    else
        snprintf(buf, (size_t)cap,
                 "residual %.3g <= %.3g, a correct kernel's level; bit-identical on %lld of %lld sampled outputs",
                 w->rel, x->thr, (long long)w->same, (long long)w->count);
}

/* ---- the family ---- */

typedef struct {
    g_sample_t s0, sf, s1, s2;
    g_score_t kept[2 * G_RANK_CAP], ranked[G_RANK_CAP];
    g_cand_t cands[G_SCREEN_CAP];
    float *target;
} g_run_t;

static void run_free(g_search_t *s, g_run_t *r)
{
    sample_free(&r->s0), sample_free(&r->sf), sample_free(&r->s1), sample_free(&r->s2);
    free(r->target), free(s->prims), free(s->row_bad), free(s->col_bad), free(s->alt);
}

/* The kernel as specified must give the reference back on the sample, or
 * the operands are not the ones the reference was built from. */
static int operands_agree(g_search_t *s, g_run_t *r)
{
    const g_hyp_t none = {0, {0, 0}};
    for (int64_t i = 0; i < r->s1.count; i++)
        r->target[i] = s->x->d->ref[r->s1.pm[i] * s->x->N + r->s1.pn[i]];
    g_score_t self;
    if (score_on(s, &r->s1, &none, r->target, &self))
        return -1;
    return self.nf == 0 && self.rel <= s->x->thr;
}

/* Whether a holds every primitive of b (a composition that adds a primitive
 * the sample cannot see is no other explanation). */
static int contains(const g_hyp_t *a, const g_hyp_t *b)
{
    for (int i = 0; i < b->n; i++) {
        int in = 0;
        for (int j = 0; j < a->n; j++)
            in |= a->p[j] == b->p[i];
        if (!in)
            return 0;
    }
    return 1;
}

static int report(g_search_t *s, g_run_t *r, int nr)
{
    dctx_t *x = s->x;
    const g_hyp_t none = {0, {0, 0}};
    g_score_t best, base, runner = {0};
    if (score_on(s, &r->s2, &none, NULL, &base))
        return -1;
    /* the first few of the ranking confirmed on the larger sample, the best
     * there kept: a map the middle sample could not tell from another (two
     * row maps that differ on rows it has none of) is told apart here */
    int bi = 0;
    for (int i = 0; i < nr && i < G_CONFIRM; i++) {
        g_score_t v;
        if (score_on(s, &r->s2, &r->ranked[i].h, NULL, &v))
            return -1;
        if (i == 0 || before(&v, &best)) {
            best = v;
            bi = i;
        }
    }
    if (bi != 0) {      /* the runner-up below is looked for from the top again */
        const g_score_t t = r->ranked[0];
        r->ranked[0] = r->ranked[bi];
        r->ranked[bi] = t;
    }
    char names[400], meaning[400], ev[160];
    hyp_text(&s->ops, &best.h, 0, names, sizeof names);
    if (getenv("KREPLAY_DIAG_DEBUG"))
        fprintf(stderr, "grammar: best %s rel %g nf %lld same %lld/%lld finite %lld; base rel %g nf %lld same %lld\n",
                names, best.rel, (long long)best.nf, (long long)best.same, (long long)best.count,
                (long long)best.finite, base.rel, (long long)base.nf, (long long)base.same);
    if (!reproduces(x, &s->ops, &best, &base))
        return 0;
    char run[384] = "";
    int ri = 1;
    while (ri < nr && contains(&r->ranked[ri].h, &best.h))
        ri++;
    const int scored = ri < nr && score_on(s, &r->s2, &r->ranked[ri].h, NULL, &runner) == 0;
    if (scored && best.finite == 0 && runner.nf == 0 && runner.same == runner.count) {
        /* NaN everywhere, and another reading gives it too: nothing to tell them apart by */
        char rn[200];
        hyp_text(&s->ops, &runner.h, 0, rn, sizeof rn);
        snprintf(x->nearest, sizeof x->nearest, "%.80s and %.80s (and maybe more) give the same non-finite "
                 "outputs alone: the output cannot tell them apart", names, rn);
        return 0;
    }
    if (scored && runner.nf == 0 && (runner.rel <= 2 * best.rel + 1e-12 || runner.same * 100 >= best.same * 99)) {
        char rn[200];
        hyp_text(&s->ops, &runner.h, 0, rn, sizeof rn);
        snprintf(run, sizeof run, "; runner-up %s (bit-identical on %lld of %lld, residual %.3g)", rn,
                 (long long)runner.same, (long long)runner.count, runner.rel);
    }
    hyp_text(&s->ops, &best.h, 1, meaning, sizeof meaning);
    same_k_map_on_both(&s->ops, &best.h, names, sizeof names);
    evidence(x, &best, ev, sizeof ev);
    char against[64];
    if (base.nf > 0)
        snprintf(against, sizeof against, "%lld non-finite mismatches", (long long)base.nf);
    else
        snprintf(against, sizeof against, "residual %.3g", base.rel);
    x->r->checked = 1;
    return diag_matched(x, DIAG_GRAMMAR, best.rel, "%s %s: %s (checked: %s; the kernel as specified: %s)%s",
                        lead_of(&s->ops, &best.h), names, meaning, ev, against, run);
}

int diag_try_grammar(dctx_t *x)
{
    g_search_t s = {.x = x};
    g_run_t r;
    memset(&r, 0, sizeof r);
    const int usable = ops_init(&s);
    if (usable <= 0) {
        free(s.prims);
        return usable < 0 ? kr_fail(x->err, "out of memory in diagnose") : 0;
    }
    diag_tried(x, "grammar");
    int result = -1;
    if (badness(&s) || sample_make(&s, 2, 1, 2, 0, &r.s0) || sample_make(&s, 2, 2, 4, 4, &r.sf) ||
        sample_make(&s, 4, 4, 16, 16, &r.s1) || sample_make(&s, 8, 8, 32, 32, &r.s2))
        goto done;
    s.alt = malloc((size_t)(r.s2.count + r.s1.count + 1) * sizeof(float));
    r.target = malloc((size_t)(r.s1.count + 1) * sizeof(float));
    if (!s.alt || !r.target)
        goto done;
    const int agree = operands_agree(&s, &r);
    if (agree <= 0) {
        result = agree;
        goto done;
    }
    g_screen_t scr = {.g = &s.ops, .out = x->d->out, .rows = r.s0.rows, .cols = r.s0.cols,
                      .r0 = (int)r.s0.nr, .c0 = (int)r.s0.nc, .keep_rel = G_SCREEN_KEEP,
                      .cands = r.cands, .cap = G_SCREEN_CAP};
    if (g_screen_run(&scr))
        goto done;
    x->grammar_prims = s.ops.n_prims;
    x->grammar_tried = scr.screened;
    if (getenv("KREPLAY_DIAG_DEBUG")) {
        fprintf(stderr, "screen: base rel %g nf %lld, %d kept; rows %lld %lld cols %lld %lld\n", scr.base_rel,
                (long long)scr.base_nf, scr.n_cands, (long long)r.s0.rows[0], (long long)r.s0.rows[r.s0.nr - 1],
                (long long)r.s0.cols[0], (long long)r.s0.cols[r.s0.nc - 1]);
        for (int i = 0; i < scr.n_cands && i < 8; i++) {
            char nm[200];
            hyp_text(&s.ops, &scr.cands[i].h, 0, nm, sizeof nm);
            fprintf(stderr, "  %s %g\n", nm, scr.cands[i].rel);
        }
    }
    g_score_t base;
    int nk = 0, nr = 0;
    if (all_nonfinite(&s, &r.sf) ? stage_nonfinite(&s, &r.sf, &base, r.kept, &nk)
                                 : stage_small(&s, &r.sf, &scr, &base, r.kept, &nk))
        goto done;
    if ((nk == 0 || r.kept[0].same < r.kept[0].count) && stage_carry(&s, &r.s0, &r.sf, &base, r.kept, &nk))
        goto done;
    for (int i = 0; i < nk && i < G_RANK_CAP; i++) {
        g_score_t v;
        if (score_on(&s, &r.s1, &r.kept[i].h, NULL, &v))
            goto done;
        insert(r.ranked, &nr, G_RANK_CAP, v);
    }
    result = nr > 0 ? report(&s, &r, nr) : 0;
    /* a place that already says what the wrong lines hold needs no map of them */
    if (result == 0 && !x->r->matched && !x->place_checked)
        result = g_learned_line_map(x, &s.ops);
    if (result == 0 && !x->r->matched)
        result = g_learned_table(x, &s.ops);
done:
    run_free(&s, &r);
    return result < 0 ? kr_fail(x->err, "out of memory in diagnose") : result;
}
