/* Magnitude: out = s * ref for one factor s, fitted by robust least squares
 * over the finite pairs of the judged rows (Huber-weighted, re-fitted a few
 * times, so a handful of wrong elements does not move it), and reported as
 * 2^k when 2^k fits as well as the fitted s does: an exact power of two is
 * named whatever the rounding noise does to |out|/|ref|. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "diag_ctx.h"

/* s minimising sum w_i (o_i - s r_i)^2 with Huber weights from the previous fit. */
static double robust_scale(const dctx_t *x)
{
    const int64_t M = x->M, N = x->N;
    const float *out = x->d->out, *ref = x->d->ref;
    double s = NAN, delta = INFINITY;
    for (int iter = 0; iter < 4; iter++) {
        double dot = 0, rr = 0, abs_res = 0;
        int64_t count = 0;
        for (int64_t m = 0; m < M; m++) {
            if (x->poisoned_rows && x->poisoned_rows[m])
                continue;
            for (int64_t n = 0; n < N; n++) {
                const double o = out[m * N + n], r = ref[m * N + n];
                if (!isfinite(o) || !isfinite(r))
                    continue;
                double w = 1;
                if (isfinite(s)) {
                    const double e = fabs(o - s * r);
                    w = e <= delta ? 1 : delta / e;
                }
                dot += w * o * r;
                rr += w * r * r;
                count++;
            }
        }
        if (!(rr > 0))
            return NAN;
        s = dot / rr;
        /* The next weights: residuals beyond 3x the mean absolute residual count less. */
        for (int64_t m = 0; m < M; m++) {
            if (x->poisoned_rows && x->poisoned_rows[m])
                continue;
            for (int64_t n = 0; n < N; n++) {
                const double o = out[m * N + n], r = ref[m * N + n];
                if (isfinite(o) && isfinite(r))
                    abs_res += fabs(o - s * r);
            }
        }
        delta = count ? 3 * abs_res / (double)count : INFINITY;
        if (!(delta > 0))
            break;
    }
    return s;
}

static void ratio_text(double s, char *buf, int cap)
{
    const double r = s >= 1 ? s : 1 / s;
    char num[32];
    snprintf(num, sizeof num, r >= 2 ? "%.1f" : "%.3f", r);
    if (s >= 1)
        snprintf(buf, (size_t)cap, "%sx", num);
    else
        snprintf(buf, (size_t)cap, "1/%s of", num);
}

int diag_try_magnitude(dctx_t *x)
{
    diag_tried(x, diag_hypothesis_name(DIAG_SCALE_POW2));
    diag_tried(x, diag_hypothesis_name(DIAG_SCALE_CONST));
    const double s = robust_scale(x);
    if (!(s > 0) || !isfinite(s))
        return 0;
    const double l2 = log2(s);
    const long k = lround(l2);
    const cmp_t fit = diag_compare_judged(x, x->d->ref, (float)s);
    if (k != 0 && labs(k) <= 16) {
        const cmp_t pow2 = diag_compare_judged(x, x->d->ref, ldexpf(1.0f, (int)k));
        /* 2^k is the answer when it is within rounding of the fit: as good a
         * residual, up to the noise the fit itself leaves. */
        if (diag_explains(x, pow2) && pow2.rel <= fit.rel * 1.25 + 1e-4)
            return diag_matched(x, DIAG_SCALE_POW2, pow2.rel,
                                "out = 2^%ld x %s (rel %.3g; fitted factor %.6g): a scale off "
                                "by 2^%ld: x_scale or block exponent bias",
                                k, diag_ref_name(x), pow2.rel, s, k);
    }
    /* A factor near 1 counts when it takes most of the error away (a scale
     * off by 0.8% fails a policy threshold of 0.5%); otherwise it is noise. */
    const cmp_t as_is = diag_compare_judged(x, x->d->ref, 1.0f);
    const int significant = fabs(s - 1) > 0.02 || (fit.rel < 0.5 * as_is.rel);
    if (significant && diag_explains(x, fit)) {
        char ratio[48];
        ratio_text(s, ratio, sizeof ratio);
        return diag_matched(x, DIAG_SCALE_CONST, fit.rel,
                            "|out| is %s %s (least squares c = %.6g, rel %.3g after scaling): a "
                            "scale off by a constant factor, not a power of 2 (like aiter's W4A4 "
                            "on N=5120 K=3072)",
                            ratio, diag_ref_name(x), s, fit.rel);
    }
    return 0;
}
