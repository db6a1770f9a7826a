/* Operand misreads (misread.h): every table entry re-evaluated on a sample
 * of judged rows and columns, ranked by residual against the output; the
 * best one, if it explains the row there, is confirmed on a larger sample
 * and named with its residual, and the runner-up with its own when close. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diag_ctx.h"
#include "formats.h"
#include "misread.h"
#include "mxfp4_weight.h"
#include "quant_fp8.h"

typedef struct {
    const dctx_t *x;
    int fp8;                    /* codes + per-token scales available: the fp8 path */
    fp8_format_t format;
    int64_t *rows, *cols;
    int64_t sm, sn;
    float *av, *wv;             /* [K] scratch */
    double *sv;                 /* [K/32] */
} mr_ctx_t;

static float e5m2_value(uint8_t c)
{
    const int sign = c >> 7, e = (c >> 2) & 31, m = c & 3;
    float v;
    if (e == 31)
        v = m ? NAN : INFINITY;
    else
        v = e == 0 ? ldexpf((float)m, -16) : ldexpf((float)(4 + m), e - 17);
    return sign ? -v : v;
}

static float act_value(const mr_ctx_t *c, mr_act_t how, uint8_t code)
{
    switch (how) {
    case MR_X_E4M3FNUZ:
        return e4m3fnuz_decode(code);
    case MR_X_E5M2:
        return e5m2_value(code);
    case MR_X_E4M3FN:
        return e4m3fn_decode(code);
    case MR_X_AS_IS:
        break;
    }
    return c->format == FP8_E4M3FNUZ ? e4m3fnuz_decode(code) : e4m3fn_decode(code);
}

/* Whether entry h can be evaluated on this row (and is not the reference itself). */
static int applicable(const mr_ctx_t *c, const misread_t *h)
{
    const int x_side = h->xa != MR_X_AS_IS || h->xs != MR_XS_AS_IS;
    if (x_side && !c->fp8)
        return 0;
    if (h->xa == MR_X_E4M3FNUZ && c->format == FP8_E4M3FNUZ)
        return 0;
    if (h->xa == MR_X_E4M3FN && c->format != FP8_E4M3FNUZ)
        return 0;
    if ((h->si == MR_S_N_NEXT || h->si == MR_S_N_PREV) && c->x->N < 2)
        return 0;
    return 1;
}

/* i moved by d, or i itself where that would leave 0..n-1: the edge block
 * or row keeps its own scale. */
static int64_t step_within(int64_t i, int d, int64_t n)
{
    const int64_t j = i + d;
    return j >= 0 && j < n ? j : i;
}

static uint8_t scale_byte(const dctx_t *x, const misread_t *h, int64_t n, int64_t b)
{
    const mxfp4_weight_t *w = &x->d->in->weight;
    const int64_t N = x->N, nb = x->K / 32;
    const scale_layout_t layout = w->layout;
    switch (h->si) {
    case MR_S_K_NEXT: b = step_within(b, +1, nb); break;
    case MR_S_K_PREV: b = step_within(b, -1, nb); break;
    case MR_S_N_NEXT: n = step_within(n, +1, N); break;
    case MR_S_N_PREV: n = step_within(n, -1, N); break;
    case MR_S_KN_AS_NK: {
        /* byte n*nb + b of the [K/32, N] array is block i / N of row i % N */
        const int64_t i = n * nb + b;
        n = i % N;
        b = i / N;
        break;
    }
    case MR_S_NK_AS_KN: {
        const int64_t i = b * N + n;
        n = i / nb;
        b = i % nb;
        break;
    }
    case MR_S_AS_IS:
        break;
    }
    return mxfp4_scale_at(w->scales, layout, N, x->K, n, b);
}

/* rel (and non-finite mismatches) of the output against entry h over the
 * first sm x sn of the sample. */
static cmp_t evaluate_vs(mr_ctx_t *c, const misread_t *h, int64_t sm, int64_t sn,
                         const float *target)
{
    const dctx_t *x = c->x;
    const int64_t M = x->M, N = x->N, K = x->K, nb = K / 32;
    const mxfp4_weight_t *w = &x->d->in->weight;
    const kernel_act_t *act = x->d->act;
    cmp_acc_t r = {{0, 0, 0}, 0, 0};
    for (int64_t j = 0; j < sn; j++) {
        const int64_t n = c->cols[j];
        for (int64_t k = 0; k < K; k++) {
            const int64_t kk = h->w == MR_W_NIBBLES_SWAPPED ? (k ^ 1) : k;
            uint8_t code = mxfp4_code_at(w->packed, K, n, kk);
            if (h->w == MR_W_SIGN_IGNORED)
                code &= 7;
            c->wv[k] = e2m1_decode(code);
        }
        for (int64_t b = 0; b < nb; b++) {
            double v = e8m0_decode(scale_byte(x, h, n, b), w->e8m0_mode);
            if (h->sv == MR_SV_TWICE)
                v *= v;
            else if (h->sv == MR_SV_BIAS_128)
                v *= 0.5;
            else if (h->sv == MR_SV_BIAS_126)
                v *= 2;
            c->sv[b] = v;
        }
        for (int64_t i = 0; i < sm; i++) {
            const int64_t m = c->rows[i];
            double xs = 1;
            if (c->fp8) {
                for (int64_t k = 0; k < K; k++)
                    c->av[k] = act_value(c, h->xa, act->codes[m * K + k]);
                const double s = act->token_scale[m];
                switch (h->xs) {
                case MR_XS_INVERTED: xs = 1 / s; break;
                case MR_XS_BY_COLUMN: xs = act->token_scale[n % M]; break;
                case MR_XS_MISSING: xs = 1; break;
                case MR_XS_TWICE: xs = s * s; break;
                case MR_XS_AS_IS: xs = s; break;
                }
            } else {
                memcpy(c->av, x->A + m * K, (size_t)K * sizeof(float));
            }
            double acc = 0;
            for (int64_t b = 0; b < nb; b++) {
                double s = 0;
                for (int64_t k = 32 * b; k < 32 * b + 32; k++)
                    s += (double)c->av[k] * c->wv[k];
                acc += s * c->sv[b];
            }
            cmp_acc_add(&r, target[m * N + n], acc * xs);
        }
    }
    return cmp_acc_result(&r);
}

static cmp_t evaluate(mr_ctx_t *c, const misread_t *h, int64_t sm, int64_t sn)
{
    return evaluate_vs(c, h, sm, sn, c->x->d->out);
}

/* out vs the reference itself on the sample. */
static cmp_t sample_base(const mr_ctx_t *c, int64_t sm, int64_t sn)
{
    const dctx_t *x = c->x;
    cmp_acc_t r = {{0, 0, 0}, 0, 0};
    for (int64_t i = 0; i < sm; i++)
        for (int64_t j = 0; j < sn; j++) {
            const int64_t e = c->rows[i] * x->N + c->cols[j];
            cmp_acc_add(&r, x->d->out[e], x->d->ref[e]);
        }
    return cmp_acc_result(&r);
}

static int explains_on(const dctx_t *x, cmp_t c, cmp_t base)
{
    return diag_good(x, c) &&
           (base.nf_mismatch > 0 || c.rel * 10 <= base.rel ||
            (base.rel > x->thr && c.rel * 2 <= base.rel));
}

/* a ranks before b: fewer non-finite mismatches, then the smaller residual. */
static int better(cmp_t a, cmp_t b)
{
    if (a.nf_mismatch != b.nf_mismatch)
        return a.nf_mismatch < b.nf_mismatch;
    return a.rel < b.rel;
}

int diag_try_misreads(dctx_t *x)
{
    const kernel_inputs_t *in = x->d->in;
    const kernel_act_t *act = x->d->act;
    if (!in->weight.packed || !in->weight.scales || x->K % 32)
        return 0;
    mr_ctx_t c = {.x = x};
    c.fp8 = !x->is_source && act && act->kind == ACT_FP8_PER_TOKEN && act->codes &&
            act->token_scale;
    c.format = act ? act->fp8_format : FP8_E4M3FN;
    if (!c.fp8 && !x->A)
        return 0;
    diag_tried(x, "misreads");
    c.rows = malloc((size_t)x->M * sizeof(int64_t));
    c.cols = malloc((size_t)x->N * sizeof(int64_t));
    c.av = malloc((size_t)x->K * sizeof(float));
    c.wv = malloc((size_t)x->K * sizeof(float));
    c.sv = malloc((size_t)(x->K / 32) * sizeof(double));
    cmp_t *score = malloc((size_t)misread_count * sizeof(cmp_t));
    int result = 0;
    if (!c.rows || !c.cols || !c.av || !c.wv || !c.sv || !score) {
        result = kr_fail(x->err, "out of memory in diagnose");
        goto done;
    }
    /* The ranking sample; the confirmation sample extends it. */
    c.sm = diag_sample(x->M, 64, x->poisoned_rows, c.rows);
    c.sn = diag_sample(x->N, 512, NULL, c.cols);
    int64_t rank_m = c.sm < 16 ? c.sm : 16, rank_n = c.sn < 64 ? c.sn : 64;
    /* The ranking sample is spread too: the first rank_m / rank_n of a
     * re-drawn sample, so it does not sit in one corner. */
    int64_t *rows_small = malloc((size_t)x->M * sizeof(int64_t)),
            *cols_small = malloc((size_t)x->N * sizeof(int64_t));
    if (!rows_small || !cols_small) {
        free(rows_small);
        free(cols_small);
        result = kr_fail(x->err, "out of memory in diagnose");
        goto done;
    }
    rank_m = diag_sample(x->M, rank_m, x->poisoned_rows, rows_small);
    rank_n = diag_sample(x->N, rank_n, NULL, cols_small);
    int64_t *rows_big = c.rows, *cols_big = c.cols;
    c.rows = rows_small;
    c.cols = cols_small;
    const cmp_t base_small = sample_base(&c, rank_m, rank_n);
    /* The operands read as they are must give the reference back, or the
     * table's alternatives mean nothing. */
    static const misread_t as_is = {"as-is", "", 0, 0, 0, 0, 0};
    const cmp_t self = evaluate_vs(&c, &as_is, rank_m, rank_n, x->d->ref);
    if (!diag_good(x, self)) {
        c.rows = rows_big;
        c.cols = cols_big;
        free(rows_small);
        free(cols_small);
        goto done;
    }
    int best = -1, second = -1;
    for (int i = 0; i < misread_count; i++) {
        if (!applicable(&c, &misread_table[i]))
            continue;
        score[i] = evaluate(&c, &misread_table[i], rank_m, rank_n);
        if (best < 0 || better(score[i], score[best])) {
            second = best;
            best = i;
        } else if (second < 0 || better(score[i], score[second])) {
            second = i;
        }
    }
    c.rows = rows_big;
    c.cols = cols_big;
    free(rows_small);
    free(cols_small);
    if (best < 0 || !explains_on(x, score[best], base_small))
        goto done;
    const cmp_t base_big = sample_base(&c, c.sm, c.sn);
    const cmp_t confirm = evaluate(&c, &misread_table[best], c.sm, c.sn);
    if (!explains_on(x, confirm, base_big))
        goto done;
    char runner[200] = "";
    if (second >= 0 && score[second].nf_mismatch == 0 &&
        (score[second].rel <= 2 * score[best].rel || score[second].rel <= x->thr))
        snprintf(runner, sizeof runner, "; runner-up '%s' (residual %.3g)",
                 misread_table[second].name, score[second].rel);
    char against[96];
    if (base_big.nf_mismatch > 0)
        snprintf(against, sizeof against, "%lld non-finite mismatches", (long long)base_big.nf_mismatch);
    else
        snprintf(against, sizeof against, "%.3g", base_big.rel);
    result = diag_matched(x, DIAG_MISREAD, confirm.rel,
                          "operand misread '%s': %s (residual %.3g on %lld sampled outputs, "
                          "against %s for %s as computed)%s",
                          misread_table[best].name, misread_table[best].meaning, confirm.rel,
                          (long long)confirm.finite, against, diag_ref_name(x), runner);
done:
    free(c.rows);
    free(c.cols);
    free(c.av);
    free(c.wv);
    free(c.sv);
    free(score);
    return result;
}
