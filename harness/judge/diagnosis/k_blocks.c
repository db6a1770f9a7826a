/* Attribution along K: the output fitted, by least squares over finite
 * pairs, as sum_b c_b P_b, where P_b is the reference's partial product of
 * 32-block b (A[m, b] . W[n, b] with its block scale).  A correct kernel has
 * every c_b = 1; a K loop that stops early leaves c_b = 0, a block counted
 * twice 2, a block taken with the wrong exponent 2^k.  A coefficient is
 * called anomalous only when it is off 1 by more than 0.1 and by more than
 * five of its standard errors (heavy-tailed activations leave some blocks
 * with little weight in the fit), and the fit with the anomalous blocks
 * snapped to 0 / 2^k / their constant must explain the output on the sample. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diag_ctx.h"
#include "mxfp4_weight.h"

typedef struct {
    int64_t nb, S;                  /* unknowns, equations */
    double *P;                      /* [S, nb] partial products */
    double *y;                      /* [S] the output */
    double *ref;                    /* [S] the reference there */
} kfit_t;

/* Cholesky of the nb x nb matrix G in place (lower); 0, or -1 if not positive definite. */
static int cholesky(double *G, int64_t n)
{
    for (int64_t j = 0; j < n; j++) {
        double d = G[j * n + j];
        for (int64_t k = 0; k < j; k++)
            d -= G[j * n + k] * G[j * n + k];
        if (!(d > 0))
            return -1;
        d = sqrt(d);
        G[j * n + j] = d;
        for (int64_t i = j + 1; i < n; i++) {
            double s = G[i * n + j];
            for (int64_t k = 0; k < j; k++)
                s -= G[i * n + k] * G[j * n + k];
            G[i * n + j] = s / d;
        }
    }
    return 0;
}

/* Solves L L^T v = b in place. */
static void chol_solve(const double *L, int64_t n, double *b)
{
    for (int64_t i = 0; i < n; i++) {
        double s = b[i];
        for (int64_t k = 0; k < i; k++)
            s -= L[i * n + k] * b[k];
        b[i] = s / L[i * n + i];
    }
    for (int64_t i = n - 1; i >= 0; i--) {
        double s = b[i];
        for (int64_t k = i + 1; k < n; k++)
            s -= L[k * n + i] * b[k];
        b[i] = s / L[i * n + i];
    }
}

/* The partial products on a sample of judged rows and columns. */
static int build(dctx_t *x, kfit_t *f)
{
    const int64_t M = x->M, N = x->N, K = x->K, nb = K / 32;
    int64_t *rows = malloc((size_t)M * sizeof(int64_t)), *cols = malloc((size_t)N * sizeof(int64_t));
    float *wrow = malloc((size_t)K * sizeof(float));
    if (!rows || !cols || !wrow) {
        free(rows);
        free(cols);
        free(wrow);
        return kr_fail(x->err, "out of memory in diagnose");
    }
    const int64_t sm = diag_sample(M, 32, x->poisoned_rows, rows);
    int64_t want_n = 8 * nb / (sm ? sm : 1) + 64;
    if (want_n < 256)
        want_n = 256;
    const int64_t sn = diag_sample(N, want_n, NULL, cols);
    f->nb = nb;
    f->S = 0;
    f->P = malloc((size_t)(sm * sn * nb) * sizeof(double));
    f->y = malloc((size_t)(sm * sn) * sizeof(double));
    f->ref = malloc((size_t)(sm * sn) * sizeof(double));
    if (!f->P || !f->y || !f->ref) {
        free(rows);
        free(cols);
        free(wrow);
        return kr_fail(x->err, "out of memory in diagnose");
    }
    const mxfp4_weight_t *w = &x->d->in->weight;
    for (int64_t j = 0; j < sn; j++) {
        mxfp4_dequant_row(w->packed, w->scales, w->layout, N, K, cols[j], w->e8m0_mode, wrow);
        for (int64_t i = 0; i < sm; i++) {
            const float *a = x->A + rows[i] * K;
            const double o = x->d->out[rows[i] * N + cols[j]];
            if (!isfinite(o))
                continue;
            double *p = f->P + f->S * nb;
            int finite = 1;
            for (int64_t b = 0; b < nb && finite; b++) {
                double s = 0;
                for (int64_t k = 32 * b; k < 32 * b + 32; k++)
                    s += (double)a[k] * wrow[k];
                p[b] = s;
                finite = isfinite(s);
            }
            const double r = x->d->ref[rows[i] * N + cols[j]];
            if (finite && isfinite(r)) {
                f->ref[f->S] = r;
                f->y[f->S++] = o;
            }
        }
    }
    free(rows);
    free(cols);
    free(wrow);
    return 0;
}

/* rel of y against sum_b c_b P_b over the sample. */
static double fit_rel(const kfit_t *f, const double *c)
{
    double num = 0, den = 0;
    for (int64_t e = 0; e < f->S; e++) {
        double a = 0;
        for (int64_t b = 0; b < f->nb; b++)
            a += c[b] * f->P[e * f->nb + b];
        num += (f->y[e] - a) * (f->y[e] - a);
        den += a * a;
    }
    return den > 0 ? sqrt(num / den) : INFINITY;
}

/* What an anomalous coefficient is: 0 (missing), 2^k, -1, or itself. */
static double snap(double c, char *word, int cap)
{
    if (fabs(c) <= 0.1) {
        snprintf(word, (size_t)cap, "missing");
        return 0;
    }
    if (fabs(c + 1) <= 0.05) {
        snprintf(word, (size_t)cap, "negated");
        return -1;
    }
    if (c > 0) {
        const double k = round(log2(c));
        if (fabs(log2(c) - k) <= 0.05 && k != 0) {
            snprintf(word, (size_t)cap, "x 2^%.0f%s", k, k == 1 ? " (counted twice)" : "");
            return ldexp(1.0, (int)k);
        }
    }
    snprintf(word, (size_t)cap, "x %.4g", c);
    return c;
}

int diag_try_k_blocks(dctx_t *x)
{
    const mxfp4_weight_t *w = &x->d->in->weight;
    const int64_t nb = x->K / 32;
    if (!x->A || !w->packed || !w->scales || nb < 2)
        return 0;
    diag_tried(x, diag_hypothesis_name(DIAG_K_BLOCKS));
    kfit_t f = {0};
    double *G = NULL, *c = NULL, *ones = NULL, *col = NULL;
    unsigned char *odd = NULL;
    int result = build(x, &f);
    if (result || f.S < 4 * nb)
        goto done;
    G = calloc((size_t)(nb * nb), sizeof(double));
    c = calloc((size_t)nb, sizeof(double));
    ones = malloc((size_t)nb * sizeof(double));
    col = malloc((size_t)nb * sizeof(double));
    odd = calloc((size_t)nb, 1);
    if (!G || !c || !ones || !col || !odd) {
        result = kr_fail(x->err, "out of memory in diagnose");
        goto done;
    }
    for (int64_t e = 0; e < f.S; e++) {
        const double *p = f.P + e * nb;
        for (int64_t i = 0; i < nb; i++) {
            c[i] += p[i] * f.y[e];
            for (int64_t j = 0; j <= i; j++)
                G[i * nb + j] += p[i] * p[j];
        }
    }
    double trace = 0;
    for (int64_t i = 0; i < nb; i++) {
        for (int64_t j = 0; j < i; j++)
            G[j * nb + i] = G[i * nb + j];
        trace += G[i * nb + i];
        ones[i] = 1;
    }
    for (int64_t i = 0; i < nb; i++)
        G[i * nb + i] += 1e-12 * trace / (double)nb;
    if (cholesky(G, nb))
        goto done;
    chol_solve(G, nb, c);
    const double base = fit_rel(&f, ones);
    /* The partial products must add up to the reference, or the fit means nothing. */
    double sn2 = 0, sd2 = 0;
    for (int64_t e = 0; e < f.S; e++) {
        double a = 0;
        for (int64_t b = 0; b < nb; b++)
            a += f.P[e * nb + b];
        sn2 += (a - f.ref[e]) * (a - f.ref[e]);
        sd2 += f.ref[e] * f.ref[e];
    }
    if (!(sd2 > 0) || sn2 > x->thr * x->thr * sd2)
        goto done;
    const double rss_rel = fit_rel(&f, c);
    /* sigma^2 of the residual, and each coefficient's standard error from (G^-1)_bb. */
    double rss = 0;
    for (int64_t e = 0; e < f.S; e++) {
        double a = 0;
        for (int64_t b = 0; b < nb; b++)
            a += c[b] * f.P[e * nb + b];
        rss += (f.y[e] - a) * (f.y[e] - a);
    }
    const double sigma2 = rss / (double)(f.S - nb);
    int64_t n_odd = 0;
    double *snapped = ones; /* reused: 1 for normal blocks, the snapped value for odd ones */
    char words[8][40];
    int64_t odd_idx[8];
    for (int64_t b = 0; b < nb; b++) {
        memset(col, 0, (size_t)nb * sizeof(double));
        col[b] = 1;
        chol_solve(G, nb, col);
        const double se = sqrt(sigma2 * col[b]);
        if (fabs(c[b] - 1) > 0.1 && fabs(c[b] - 1) > 5 * se) {
            odd[b] = 1;
            char word[40];
            snapped[b] = snap(c[b], word, sizeof word);
            if (n_odd < 8) {
                memcpy(words[n_odd], word, sizeof word);
                odd_idx[n_odd] = b;
            }
            n_odd++;
        }
    }
    if (n_odd == 0 || n_odd > nb / 2 || n_odd > 8)
        goto done;
    const double snapped_rel = fit_rel(&f, snapped);
    const cmp_t alt = {snapped_rel, 0, f.S}, base_c = {base, 0, f.S};
    if (!diag_good(x, alt) || !(snapped_rel * 2 <= base || base_c.rel > 10 * snapped_rel))
        goto done;
    char list[224] = "";
    for (int64_t i = 0; i < n_odd; i++) {
        const size_t len = strlen(list);
        const int64_t b = odd_idx[i];
        if (len + 1 >= sizeof list)
            break;
        const int w = snprintf(list + len, sizeof list - len, "%sblock %lld (k %lld-%lld) %s%s", len ? ", " : "",
                 (long long)b, (long long)(32 * b), (long long)(32 * b + 31), words[i],
                 b == nb - 1 ? " [the last]" : b == 0 ? " [the first]" : "");
        if (w < 0)
            break;
    }
    const char *why = "a K loop with the wrong bounds, or a block's scale misapplied";
    if (n_odd == 1 && snapped[odd_idx[0]] == 0 && odd_idx[0] == nb - 1)
        why = "a K loop that stops one 32-block early (the K tail dropped)";
    else if (n_odd == 1 && snapped[odd_idx[0]] == 2)
        why = "that block accumulated twice (a K loop restarting or overlapping)";
    result = diag_matched(x, DIAG_K_BLOCKS, snapped_rel,
                          "along K, %lld of %lld 32-blocks are off (least squares over %lld "
                          "finite pairs; rel %.3g fitted, %.3g with them snapped, %.3g as "
                          "computed by %s): %s: %s",
                          (long long)n_odd, (long long)nb, (long long)f.S, rss_rel, snapped_rel,
                          base, diag_ref_name(x), list, why);
done:
    free(f.P);
    free(f.y);
    free(f.ref);
    free(G);
    free(c);
    free(ones);
    free(col);
    free(odd);
    return result;
}
