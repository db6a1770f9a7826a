#include "diag_ctx.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "gemm_ref.h"

static const char *const hypothesis_names[DIAG_COUNT] = {
    [DIAG_NONE] = "none",
    [DIAG_CLEAN] = "clean",
    [DIAG_ROWS_POISONED] = "rows-poisoned",
    [DIAG_REF_ROWS_POISONED] = "ref-rows-poisoned",
    [DIAG_SCALE_POW2] = "scale-pow2",
    [DIAG_SCALE_CONST] = "scale-const",
    [DIAG_COLUMNS] = "columns",
    [DIAG_WPERM_UNDONE] = "wperm-undone",
    [DIAG_WPERM_APPLIED] = "wperm-applied",
    [DIAG_SCALE_LAYOUT] = "scale-layout",
    [DIAG_SANITIZED] = "sanitized",
    [DIAG_UNSANITIZED] = "unsanitized",
    [DIAG_QUANT_VARIANT] = "quant-variant",
    [DIAG_ROWS] = "rows",
    [DIAG_TILES] = "tiles",
    [DIAG_K_BLOCKS] = "k-blocks",
    [DIAG_MISREAD] = "misread",
    [DIAG_ACC_PRECISION] = "acc-precision",
    [DIAG_GRAMMAR] = "grammar",
};

const char *diag_hypothesis_name(diag_hypothesis_t h)
{
    return (unsigned)h < DIAG_COUNT ? hypothesis_names[h] : "?";
}

int diag_is_poison(float v)
{
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    return u == 0x7FC10000u;
}

cmp_t diag_compare(const float *out, const float *alt, int64_t M, int64_t N, float scale,
                   const unsigned char *skip_rows, const unsigned char *skip_cols)
{
    cmp_acc_t s = {{0, 0, 0}, 0, 0};
    for (int64_t m = 0; m < M; m++) {
        if (skip_rows && skip_rows[m])
            continue;
        for (int64_t n = 0; n < N; n++) {
            if (skip_cols && skip_cols[n])
                continue;
            cmp_acc_add(&s, out[m * N + n], (double)alt[m * N + n] * scale);
        }
    }
    return cmp_acc_result(&s);
}

cmp_t diag_compare_judged(const dctx_t *x, const float *alt, float scale)
{
    return diag_compare(x->d->out, alt, x->M, x->N, scale, x->poisoned_rows, NULL);
}

int diag_good(const dctx_t *x, cmp_t c)
{
    return c.nf_mismatch == 0 && c.finite > 0 && c.rel <= x->thr;
}

int diag_explains(const dctx_t *x, cmp_t c)
{
    if (!diag_good(x, c))
        return 0;
    const cmp_t b = x->base;
    return b.nf_mismatch > 0 || c.rel * 10 <= b.rel || (b.rel > x->thr && c.rel * 2 <= b.rel);
}

void diag_tried(dctx_t *x, const char *name)
{
    const size_t len = strlen(x->tried);
    if (strstr(x->tried, name))
        return;
    if (len + strlen(name) + 3 < sizeof x->tried)
        snprintf(x->tried + len, sizeof x->tried - len, "%s%s", len ? ", " : "", name);
}

int diag_matched(dctx_t *x, diag_hypothesis_t h, double rel, const char *fmt, ...)
{
    x->r->matched = 1;
    x->r->checked = 1;
    x->r->hypothesis = h;
    x->r->rel = rel;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(x->r->line, sizeof x->r->line, fmt, ap);
    va_end(ap);
    return 1;
}

int diag_gemm_too_big(dctx_t *x)
{
    if ((double)x->M * (double)x->N * (double)x->K <= DIAG_GEMM_MAX_MACS)
        return 0;
    x->gemm_too_big = 1;
    return 1;
}

int diag_alt_gemm(dctx_t *x, const float *A, const mxfp4_weight_t *W)
{
    if (x->d->max_gemms > 0 && x->r->gemms >= x->d->max_gemms) {
        x->budget_hit = 1;
        return 1;
    }
    /* A whole fp32 GEMM per hypothesis is for small cases: on a large one
     * the families that need it step aside (the grammar's samples cover
     * their hypotheses: WPERM, the scale layout). */
    if (diag_gemm_too_big(x))
        return 1;
    x->r->gemms++;
    return gemm_ref_f32(A, x->M, W, 0, x->alt, x->err) ? -1 : 0;
}

const char *diag_ref_name(const dctx_t *x)
{
    return x->d->ref_name ? x->d->ref_name : "the reference";
}

void diag_region_content(const dctx_t *x, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                         char *buf, int cap)
{
    const float *out = x->d->out, *ref = x->d->ref;
    int64_t nan = 0, zero = 0, total = 0, poison = 0;
    double num = 0, den = 0, neg = 0, dot = 0;
    for (int64_t m = r0; m <= r1; m++) {
        if (x->poisoned_rows && x->poisoned_rows[m])
            continue;
        for (int64_t n = c0; n <= c1; n++) {
            const float o = out[m * x->N + n], r = ref[m * x->N + n];
            total++;
            nan += isnan(o) ? 1 : 0;
            poison += diag_is_poison(o);
            zero += o == 0.0f ? 1 : 0;
            if (isfinite(o) && isfinite(r)) {
                num += ((double)o - r) * ((double)o - r);
                neg += ((double)o + r) * ((double)o + r);
                dot += (double)o * r;
                den += (double)r * r;
            }
        }
    }
    if (total > 0 && nan == total)
        snprintf(buf, (size_t)cap, "%s", poison == total ? "all NaN: the harness's poison 0x7FC1, never written"
                                                          : "all NaN");
    else if (total > 0 && zero == total)
        snprintf(buf, (size_t)cap, "all zero: never written, or masked to zero");
    else if (den > 0 && neg <= x->thr * x->thr * den)
        snprintf(buf, (size_t)cap, "negated: out = -%s there (rel %.3g)", diag_ref_name(x),
                 sqrt(neg / den));
    else if (den > 0 && dot > 0 && fabs(log2(dot / den)) > 0.5 &&
             fabs(log2(dot / den) - round(log2(dot / den))) < 0.02)
        snprintf(buf, (size_t)cap, "out = 2^%.0f x %s there", round(log2(dot / den)),
                 diag_ref_name(x));
    else
        snprintf(buf, (size_t)cap, "rel %.3g there%s", den > 0 ? sqrt(num / den) : INFINITY,
                 nan ? ", some NaN" : "");
}

int64_t diag_sample(int64_t n, int64_t want, const unsigned char *mask, int64_t *idx)
{
    int64_t avail = 0;
    for (int64_t i = 0; i < n; i++)
        avail += !(mask && mask[i]);
    if (avail == 0 || want <= 0)
        return 0;
    if (want > avail)
        want = avail;
    /* Walk the available indices, taking the j-th when it crosses j * avail / want:
     * evenly spread, both ends of the range included when want > 1. */
    int64_t taken = 0, seen = 0;
    for (int64_t i = 0; i < n && taken < want; i++) {
        if (mask && mask[i])
            continue;
        const int64_t target = want > 1 ? (taken * (avail - 1)) / (want - 1) : 0;
        if (seen == target)
            idx[taken++] = i;
        seen++;
    }
    return taken;
}
