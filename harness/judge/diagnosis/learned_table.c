/* A decode table learned from the output (learned_table.h).  The output is
 * linear in the value each code (or scale byte) decodes to, so the table a
 * kernel used can be fitted: least squares over a sample of outputs, one
 * unknown per code value present, each snapped to the format's grid (an
 * e2m1 value, a power of two).  Where the snapped table differs from the
 * specification, the kernel is re-evaluated with it, bit for bit, and the
 * difference is stated only when that reproduces the output. */
#include "learned_table.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mxfp4_weight.h"

#define LT_ROWS 24
#define LT_COLS 48
#define LT_MAX_U 64             /* unknowns: 16 codes, or the distinct scale bytes */

typedef enum { LT_W_CODES = 0, LT_W_SCALES, LT_X_CODES, LT_X_SCALES, LT_COUNT } lt_target_t;

static const char *const lt_what[LT_COUNT] = {"weight e2m1 codes", "weight block scales (e8m0)",
                                              "activation e2m1 codes", "activation block scales (e8m0)"};

typedef struct {
    const g_ops_t *g;
    lt_target_t t;
    int64_t rows[LT_ROWS], cols[LT_COLS], nr, nc;
    float *a, *xb, *w, *ws;     /* [nr][K], [nr][nb], [nc][K], [nc][nb] as specified */
    int unit_of[256];           /* code or byte -> unknown, -1 when absent */
    int codes[LT_MAX_U], nu;    /* unknown -> code or byte */
    double spec[LT_MAX_U], fit[LT_MAX_U];
    float snapped[LT_MAX_U];
    g_plan_t plan;              /* the kernel as specified */
    int clamp;                  /* scales: 1 every changed byte lies below the rest and reads one
                                   value (a floor), 2 above (a ceiling), 0 neither */
    int clamp_edge;             /* the highest (lowest) changed byte */
    float clamp_value;
} lt_t;

static uint8_t code_of(const lt_t *s, int64_t m, int64_t n, int64_t k, int64_t b)
{
    const g_ops_t *g = s->g;
    switch (s->t) {
    case LT_W_CODES: return mxfp4_code_at(g->w->packed, g->K, n, k);
    case LT_W_SCALES: return mxfp4_scale_at(g->w->scales, g->w->layout, g->N, g->K, n, b);
    case LT_X_CODES: return g->xcodes[m * g->K + k] & 15u;
    case LT_X_SCALES: return g->xbscale[m * g->nb + b];
    case LT_COUNT: break;
    }
    return 0;
}

static int per_block(const lt_t *s)
{
    return s->t == LT_W_SCALES || s->t == LT_X_SCALES;
}

/* The unknowns: every code (byte) the sample meets, with its value as
 * specified. */
static int collect(lt_t *s)
{
    const g_ops_t *g = s->g;
    memset(s->unit_of, -1, sizeof s->unit_of);
    s->nu = 0;
    const int by_row = s->t == LT_X_CODES || s->t == LT_X_SCALES;
    const int64_t lines = by_row ? s->nr : s->nc, len = per_block(s) ? g->nb : g->K;
    for (int64_t l = 0; l < lines; l++)
        for (int64_t j = 0; j < len; j++) {
            const uint8_t c = code_of(s, by_row ? s->rows[l] : 0, by_row ? 0 : s->cols[l], j, j);
            if (s->unit_of[c] >= 0)
                continue;
            if (s->nu == LT_MAX_U)
                return 0;
            s->unit_of[c] = s->nu;
            s->codes[s->nu] = c;
            s->spec[s->nu] = per_block(s) ? e8m0_decode(c, s->t == LT_W_SCALES ? g->w->e8m0_mode : E8M0_SPEC)
                                          : e2m1_decode(c);
            s->nu++;
        }
    return s->nu >= 2;
}

/* Row i of the design: the output's coefficient on each unknown. */
static void design_row(const lt_t *s, int64_t r, int64_t c, double *row)
{
    const g_ops_t *g = s->g;
    const int64_t K = g->K, nb = g->nb;
    const float *a = s->a + r * K, *w = s->w + c * K, *ws = s->ws + c * nb;
    const float *xb = g->shape.route == G_ROUTE_W4A4 ? s->xb + r * nb : NULL;
    const int64_t m = s->rows[r], n = s->cols[c];
    memset(row, 0, (size_t)s->nu * sizeof(double));
    for (int64_t b = 0; b < nb; b++) {
        const double xs = xb ? xb[b] : 1.0;
        if (per_block(s)) {
            double sum = 0;
            for (int64_t k = 32 * b; k < 32 * b + 32; k++)
                sum += (double)a[k] * w[k];
            const double other = s->t == LT_W_SCALES ? xs : ws[b];
            row[s->unit_of[code_of(s, m, n, 0, b)]] += sum * other;
        } else {
            const double bs = xs * ws[b];
            for (int64_t k = 32 * b; k < 32 * b + 32; k++)
                row[s->unit_of[code_of(s, m, n, k, b)]] += bs * (s->t == LT_W_CODES ? a[k] : w[k]);
        }
    }
}

/* Solves the normal equations G t = h in place (Gaussian elimination with
 * partial pivoting); an unknown the sample cannot see keeps its value. */
static void solve(double *G, double *h, int n, double *t)
{
    for (int i = 0; i < n; i++) {
        int p = i;
        for (int r = i + 1; r < n; r++)
            if (fabs(G[r * n + i]) > fabs(G[p * n + i]))
                p = r;
        if (fabs(G[p * n + i]) < 1e-300)
            continue;
        for (int c = 0; c < n && p != i; c++) {
            const double tmp = G[i * n + c];
            G[i * n + c] = G[p * n + c];
            G[p * n + c] = tmp;
        }
        const double th = h[i];
        h[i] = h[p], h[p] = th;
        for (int r = i + 1; r < n; r++) {
            const double f = G[r * n + i] / G[i * n + i];
            for (int c = i; c < n; c++)
                G[r * n + c] -= f * G[i * n + c];
            h[r] -= f * h[i];
        }
    }
    for (int i = n - 1; i >= 0; i--) {
        if (fabs(G[i * n + i]) < 1e-300)
            continue;
        double v = h[i];
        for (int c = i + 1; c < n; c++)
            v -= G[i * n + c] * t[c];
        t[i] = v / G[i * n + i];
    }
}

static float snap(const lt_t *s, double v)
{
    if (per_block(s))
        return v > 0 ? ldexpf(1.0f, (int)lround(log2(v))) : 0.0f;
    static const float grid[] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
    float best = 0;
    for (int i = 0; i < 8; i++)
        if (fabs(fabs(v) - grid[i]) < fabs(fabs(v) - best))
            best = grid[i];
    return v < 0 ? -best : best;
}

/* The fit, over the sample's finite outputs; returns how many unknowns
 * snap away from the specification. */
static int fit(lt_t *s, const float *out, int64_t N)
{
    const int n = s->nu;
    double *G = calloc((size_t)n * n, sizeof(double)), *h = calloc((size_t)n, sizeof(double));
    double *row = malloc((size_t)n * sizeof(double));
    int64_t used = 0;
    for (int64_t r = 0; r < s->nr && G && h && row; r++)
        for (int64_t c = 0; c < s->nc; c++) {
            const float o = out[s->rows[r] * N + s->cols[c]];
            const float xs = g_x_scale(s->g, &s->plan, s->rows[r], s->cols[c]);
            if (!isfinite(o) || !(xs != 0.0f))
                continue;
            design_row(s, r, c, row);
            const double y = (double)o / xs;
            for (int i = 0; i < n; i++) {
                h[i] += row[i] * y;
                for (int j = 0; j < n; j++)
                    G[i * n + j] += row[i] * row[j];
            }
            used++;
        }
    int changed = 0;
    if (G && h && row && used > 4 * n) {
        memcpy(s->fit, s->spec, (size_t)n * sizeof(double));
        solve(G, h, n, s->fit);
        for (int i = 0; i < n; i++) {
            s->snapped[i] = snap(s, s->fit[i]);
            changed += s->snapped[i] != (float)s->spec[i];
        }
    }
    free(G), free(h), free(row);
    return changed;
}

/* The sample: rows spread over the judged ones, columns spread over N
 * (offset: another spread, for the check), with their operands decoded as
 * specified. */
static int sample(lt_t *s, const dctx_t *x, int offset)
{
    const g_ops_t *g = s->g;
    const int64_t K = g->K, nb = g->nb;
    s->nr = s->nc = 0;
    for (int64_t i = 0; i < LT_ROWS && i < g->M; i++) {
        const int64_t m = (i * g->M / (LT_ROWS < g->M ? LT_ROWS : g->M) + offset) % g->M;
        if (!(x->poisoned_rows && x->poisoned_rows[m]))
            s->rows[s->nr++] = m;
    }
    for (int64_t i = 0; i < LT_COLS && i < g->N; i++)
        s->cols[s->nc++] = (i * g->N / (LT_COLS < g->N ? LT_COLS : g->N) + offset * 7) % g->N;
    s->a = malloc((size_t)(s->nr * K + 1) * sizeof(float));
    s->xb = malloc((size_t)(s->nr * nb + 1) * sizeof(float));
    s->w = malloc((size_t)(s->nc * K + 1) * sizeof(float));
    s->ws = malloc((size_t)(s->nc * nb + 1) * sizeof(float));
    if (!s->a || !s->xb || !s->w || !s->ws)
        return -1;
    for (int64_t r = 0; r < s->nr; r++)
        g_x_row(g, &s->plan, s->rows[r], NULL, s->a + r * K, s->xb + r * nb);
    for (int64_t c = 0; c < s->nc; c++)
        g_w_col(g, &s->plan, s->cols[c], NULL, s->w + c * K, s->ws + c * nb);
    return s->nr > 0 && s->nc > 0;
}

static void sample_free(lt_t *s)
{
    free(s->a), free(s->xb), free(s->w), free(s->ws);
    s->a = s->xb = s->w = s->ws = NULL;
}

/* Whether the changed scale bytes are a clamp: all below (above) the
 * unchanged ones, all read as one value.  A clamp reaches the bytes the fit
 * did not meet. */
static void find_clamp(lt_t *s)
{
    int changed = 0, lo = 256, hi = -1, same_val = 1;
    float val = 0;
    for (int i = 0; i < s->nu; i++)
        if (s->snapped[i] != (float)s->spec[i]) {
            lo = s->codes[i] < lo ? s->codes[i] : lo;
            hi = s->codes[i] > hi ? s->codes[i] : hi;
            same_val &= changed == 0 || s->snapped[i] == val;
            val = s->snapped[i];
            changed++;
        }
    int below = 1, above = 1;
    for (int i = 0; i < s->nu; i++)
        if (s->snapped[i] == (float)s->spec[i]) {
            below &= s->codes[i] > hi;
            above &= s->codes[i] < lo;
        }
    s->clamp = per_block(s) && same_val && changed ? (below ? 1 : above ? 2 : 0) : 0;
    s->clamp_edge = s->clamp == 1 ? hi : lo;
    s->clamp_value = val;
}

/* The value the learned table gives code c (spec: its value as specified). */
static float learned_value(const lt_t *s, int c, float spec)
{
    const int u = s->unit_of[c];
    if (u >= 0)
        return s->snapped[u];
    if ((s->clamp == 1 && c < s->clamp_edge) || (s->clamp == 2 && c > s->clamp_edge))
        return s->clamp_value;
    return spec;
}

/* The learned table applied to a sample's operands (codes the fit did not
 * meet keep their value), the kernel re-evaluated bit for bit: how many
 * outputs, how many identical. */
static void check(lt_t *v, const lt_t *fitted, const float *out, int64_t *count, int64_t *same)
{
    const g_ops_t *g = v->g;
    const int64_t K = g->K, nb = g->nb;
    float *ones = malloc((size_t)K * sizeof(float)), *a = malloc((size_t)K * sizeof(float));
    float *w = malloc((size_t)K * sizeof(float)), *ws = malloc((size_t)nb * sizeof(float));
    float *xb = malloc((size_t)nb * sizeof(float));
    *count = *same = 0;
    for (int64_t k = 0; ones && k < K; k++)
        ones[k] = 1.0f;
    for (int64_t r = 0; r < v->nr && ones && a && w && ws && xb; r++)
        for (int64_t c = 0; c < v->nc; c++) {
            const int64_t m = v->rows[r], n = v->cols[c];
            memcpy(a, v->a + r * K, (size_t)K * sizeof(float));
            memcpy(xb, v->xb + r * nb, (size_t)nb * sizeof(float));
            memcpy(w, v->w + c * K, (size_t)K * sizeof(float));
            memcpy(ws, v->ws + c * nb, (size_t)nb * sizeof(float));
            for (int64_t j = 0; j < (per_block(v) ? nb : K); j++) {
                float *dst = v->t == LT_W_CODES ? w : v->t == LT_W_SCALES ? ws : v->t == LT_X_CODES ? a : xb;
                const uint8_t code = code_of(v, m, n, j, j);
                const float spec = per_block(v) ? e8m0_decode(code, v->t == LT_W_SCALES ? g->w->e8m0_mode : E8M0_SPEC)
                                                : e2m1_decode(code);
                dst[j] = learned_value(fitted, code, spec);
            }
            const float o = out[m * g->N + n];
            const float alt = g_store(&v->plan, g_value(g, &v->plan, a, xb, w, ws, ones, g_x_scale(g, &v->plan, m, n)));
            (*count)++;
            *same += o == alt || (isnan(o) && isnan(alt));
        }
    free(ones), free(a), free(w), free(ws), free(xb);
}

/* "code 8: -6 (not -0), code 9: -4 (not -0.5)"; on scales, a clamp when
 * every changed byte lies below (above) the others and reads one value. */
static void describe(const lt_t *s, char *buf, int cap)
{
    int len = 0, shown = 0, changed = 0;
    for (int i = 0; i < s->nu; i++)
        changed += s->snapped[i] != (float)s->spec[i];
    if (s->clamp) {
        const int e = (int)lround(log2(s->clamp_value));
        snprintf(buf, (size_t)cap, "exponent clamped from %s at 2^%d: every byte %s %d reads as 2^%d",
                 s->clamp == 1 ? "below" : "above", e, s->clamp == 1 ? "up to" : "from", s->clamp_edge, e);
        return;
    }
    for (int i = 0; i < s->nu && len < cap; i++)
        if (s->snapped[i] != (float)s->spec[i] && shown++ < 6)
            len += snprintf(buf + len, (size_t)(cap - len), per_block(s) ? "%sbyte %d: %g (not %g)" : "%scode %d: %g (not %g)",
                            len ? ", " : "", s->codes[i], (double)s->snapped[i], s->spec[i]);
    if (changed > shown && len < cap)
        snprintf(buf + len, (size_t)(cap - len), ", ... (%d entries)", changed);
}

static int try_target(dctx_t *x, const g_ops_t *g, lt_target_t t)
{
    lt_t s = {.g = g, .t = t}, v = {.g = g, .t = t};
    const g_hyp_t none = {0, {0, 0}};
    g_plan_make(g, &none, &s.plan);
    g_plan_make(g, &none, &v.plan);
    int result = 0, ok = sample(&s, x, 0);
    if (ok > 0 && collect(&s) && fit(&s, x->d->out, g->N) > 0) {
        find_clamp(&s);
        ok = sample(&v, x, 1);
        int64_t count = 0, same = 0;
        if (ok > 0)
            check(&v, &s, x->d->out, &count, &same);
        if (getenv("KREPLAY_DIAG_DEBUG")) {
            fprintf(stderr, "learned table %s: %lld of %lld identical;", lt_what[t], (long long)same, (long long)count);
            for (int i = 0; i < s.nu; i++)
                fprintf(stderr, " %d:%g/%g", s.codes[i], s.fit[i], s.spec[i]);
            fprintf(stderr, "\n");
        }
        if (ok > 0 && count > 0 && same == count) {
            char what[400];
            describe(&s, what, sizeof what);
            x->r->checked = 1;
            result = diag_matched(x, DIAG_GRAMMAR, 0.0,
                                  "operand misread: %s decoded through another table: %s (a table fitted to the "
                                  "output by least squares and snapped; checked: bit-identical on all %lld outputs "
                                  "of another sample)",
                                  lt_what[t], what, (long long)count);
        }
    }
    sample_free(&s), sample_free(&v);
    return ok < 0 ? -1 : result;
}

int g_learned_table(dctx_t *x, const g_ops_t *g)
{
    if (g->shape.route == G_ROUTE_BF16)
        return 0;
    for (int t = 0; t < LT_COUNT; t++) {
        if (g->shape.route == G_ROUTE_W4A8 && t >= LT_X_CODES)
            break;
        const int rc = try_target(x, g, (lt_target_t)t);
        if (rc != 0)
            return rc;
    }
    return 0;
}
