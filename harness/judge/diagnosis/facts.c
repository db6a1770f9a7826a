/* What is known for certain about a failing row no hypothesis reproduces:
 * where the output is wrong (rows, columns, 16x16 tiles, as measured), how
 * much, and whether its error exceeds what any fp32 summation order of the
 * kernel's own operands can give (fp32_bound.h) -- no guessed cause. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diag_ctx.h"
#include "fp32_bound.h"
#include "input_health.h"

typedef struct {
    unsigned char *rows, *cols;     /* wrong lines: own relative error over 4x the threshold, or a
                                       non-finite mismatch */
    int64_t n_rows, n_cols, judged_rows;
    int64_t tiles_bad, tiles;       /* 16x16 tiles */
    int64_t over, finite;           /* elements off by more than the threshold x their row's RMS */
    int64_t nf_out, nf_ref;         /* non-finite on one side only */
    double max_abs;
    int64_t max_m, max_n;
} facts_t;

/* The per-line and per-tile error maps, one pass over the judged rows. */
static int measure(const dctx_t *x, facts_t *f)
{
    const int64_t M = x->M, N = x->N, TN = (N + 15) / 16, TM = (M + 15) / 16;
    double *rn = calloc((size_t)M, sizeof(double)), *rd = calloc((size_t)M, sizeof(double)),
           *cn = calloc((size_t)N, sizeof(double)), *cd = calloc((size_t)N, sizeof(double)),
           *tn = calloc((size_t)(TM * TN), sizeof(double)), *td = calloc((size_t)(TM * TN), sizeof(double));
    f->rows = calloc((size_t)M, 1);
    f->cols = calloc((size_t)N, 1);
    unsigned char *tbad = calloc((size_t)(TM * TN), 1);
    int status = rn && rd && cn && cd && tn && td && f->rows && f->cols && tbad ? 0 : -1;
    for (int64_t m = 0; m < M && status == 0; m++) {
        if (x->poisoned_rows && x->poisoned_rows[m])
            continue;
        f->judged_rows++;
        for (int64_t n = 0; n < N; n++) {
            const float o = x->d->out[m * N + n], r = x->d->ref[m * N + n];
            const int64_t t = (m / 16) * TN + n / 16;
            if (isfinite(o) != isfinite(r)) {
                f->rows[m] = f->cols[n] = tbad[t] = 1;
                f->nf_out += !isfinite(o);
                f->nf_ref += !isfinite(r);
                continue;
            }
            if (!isfinite(o))
                continue;
            const double e = ((double)o - r) * ((double)o - r), rr = (double)r * r;
            rn[m] += e, rd[m] += rr, cn[n] += e, cd[n] += rr, tn[t] += e, td[t] += rr;
            if (fabs((double)o - r) > f->max_abs) {
                f->max_abs = fabs((double)o - r);
                f->max_m = m;
                f->max_n = n;
            }
        }
    }
    const double t4 = 16 * x->thr * x->thr;
    for (int64_t m = 0; m < M && status == 0; m++) {
        f->rows[m] |= rn[m] > t4 * rd[m] && rn[m] > 0;
        f->n_rows += f->rows[m];
    }
    for (int64_t n = 0; n < N && status == 0; n++) {
        f->cols[n] |= cn[n] > t4 * cd[n] && cn[n] > 0;
        f->n_cols += f->cols[n];
    }
    for (int64_t m = 0; m < M && status == 0; m++) {
        if (x->poisoned_rows && x->poisoned_rows[m])
            continue;
        const double rms = sqrt(rd[m] / (double)N);
        for (int64_t n = 0; n < N; n++) {
            const float o = x->d->out[m * N + n], r = x->d->ref[m * N + n];
            if (isfinite(o) && isfinite(r)) {
                f->finite++;
                f->over += fabs((double)o - r) > x->thr * (fabs((double)r) > rms ? fabs((double)r) : rms);
            }
        }
    }
    for (int64_t t = 0; t < TM * TN && status == 0; t++) {
        tbad[t] |= tn[t] > t4 * td[t] && tn[t] > 0;
        f->tiles_bad += tbad[t];
    }
    f->tiles = TM * TN;
    free(rn), free(rd), free(cn), free(cd), free(tn), free(td), free(tbad);
    return status;
}

static void lines_text(const unsigned char *bad, int64_t count, int64_t len, int64_t offset, const char *noun,
                       char *buf, int cap)
{
    if (count == len) {
        snprintf(buf, (size_t)cap, "every %s", noun);
        return;
    }
    char ranges[96];
    index_ranges_format_from(bad, len, offset, 4, ranges, sizeof ranges);
    snprintf(buf, (size_t)cap, "%ss %s", noun, ranges);
}

int diag_facts(dctx_t *x, char *buf, int cap)
{
    facts_t f;
    memset(&f, 0, sizeof f);
    if (measure(x, &f)) {
        free(f.rows), free(f.cols);
        return kr_fail(x->err, "out of memory in diagnose");
    }
    char rows[128], cols[128], where[300], bound[320] = "";
    lines_text(f.rows, f.n_rows, x->M, x->d->row_offset, "row", rows, sizeof rows);
    lines_text(f.cols, f.n_cols, x->N, 0, "column", cols, sizeof cols);
    if (f.n_rows == 0 && f.n_cols == 0)
        snprintf(where, sizeof where, "no row or column off by more than 4x the threshold");
    else
        snprintf(where, sizeof where, "%s x %s (%lld of %lld 16x16 tiles)", rows, cols,
                 (long long)f.tiles_bad, (long long)f.tiles);
    acc_fit_t fit;
    const acc_fit_t *fp = x->d->fit;
    if (!fp || fp->bound_checked == 0) {
        const weight_kind_t wk = x->d->act && !x->d->act->codes && x->d->in->weight_bf16 ? WEIGHT_KIND_BF16
                                                                                          : WEIGHT_KIND_MXFP4;
        memset(&fit, 0, sizeof fit);
        if (fp32_bound_measure(x->d->in, x->d->act, wk, NULL, x->d->out, x->poisoned_rows, &fit, x->err)) {
            free(f.rows), free(f.cols);
            return -1;
        }
        fp = &fit;
    }
    /* Outside the bound with an error under the threshold: precision was
     * lost, and that is proven (no fp32 summation gives these outputs).  A
     * larger error is outside it too, and says nothing more. */
    const int lost = fp->bound_checked > 0 && fp32_bound_exceeded(fp) && x->base.rel <= x->thr &&
                     x->base.nf_mismatch == 0;
    if (fp->bound_checked > 0 && fp->bound_outside > 0) {
        fp32_bound_describe(fp, lost, bound, sizeof bound);
        x->r->checked = lost;
    } else if (fp->bound_checked > 0) {
        snprintf(bound, sizeof bound, "fp32 bound: all %lld sampled outputs within what an fp32 summation "
                 "order of the kernel's operands gives", (long long)fp->bound_checked);
    }
    char much[480], tried[96] = "";
    if (f.finite)
        snprintf(much, sizeof much, "rel %.3g (threshold %.3g), %.3g%% of outputs off by more than it, max |err| "
                 "%.3g at (%lld, %lld)", x->base.rel, x->thr, 100.0 * (double)f.over / (double)f.finite,
                 f.max_abs, (long long)(f.max_m + x->d->row_offset), (long long)f.max_n);
    else    /* no output to measure an error on: say so, not "rel 0" */
        snprintf(much, sizeof much, "no finite output to measure an error on");
    if (f.nf_out || f.nf_ref) {
        const size_t len = strlen(much);
        snprintf(much + len, sizeof much - len, ", %lld non-finite where %s is finite", (long long)f.nf_out,
                 diag_ref_name(x));
    }
    if (x->nearest[0]) {
        const size_t len = strlen(much);
        snprintf(much + len, sizeof much - len, "; %s", x->nearest);
    }
    if (x->grammar_prims)
        snprintf(tried, sizeof tried, " (%lld compositions of %d grammar primitives)", (long long)x->grammar_tried,
                 x->grammar_prims);
    snprintf(buf, (size_t)cap, "%sno hypothesis reproduces the output%s; %s%swhere: %s; how much: %s%s%s", x->prefix,
             tried, lost ? bound : "", lost ? "; " : "", where, much, !lost && bound[0] ? "; " : "",
             lost ? "" : bound);
    free(f.rows), free(f.cols);
    return 0;
}
