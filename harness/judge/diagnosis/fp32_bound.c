/* The fp32 summation bound of a kernel's outputs (fp32_bound.h): each
 * sampled output against the interval any fp32 summation order of its own
 * operands' exact products can round to. */
#include "fp32_bound.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diag_ctx.h"
#include "formats.h"
#include "mxfp4_weight.h"
#include "parallel.h"

typedef enum { B_W4A8, B_W4A4, B_BF16 } b_route_t;

typedef struct {
    const kernel_inputs_t *in;
    const kernel_act_t *act;
    b_route_t route;
    const uint16_t *out_bits;
    const float *out_f32;
    int bits;                   /* the output holds bf16 values */
    const int64_t *rows, *cols;
    int64_t sn;
    double gamma;               /* gamma~_{K+2}(lambda) */
    /* per sampled output: 1 outside, 0 inside, -1 not checked */
    signed char *outside;
    double *lo, *hi;
    int *row_ok;
} b_job_t;

/* x rounded to nearest even bf16 (from a double, in one rounding). */
static double bf16_rne_d(double x)
{
    if (!isfinite(x) || x == 0)
        return x;
    int e;
    frexp(fabs(x), &e);
    const int q = (e - 1 < -126 ? -126 : e - 1) - 7;
    const double r = ldexp(nearbyint(ldexp(x, -q)), q);
    return fabs(r) >= 0x1p128 ? copysign(INFINITY, x) : r;
}

static float act_value(const b_job_t *j, int64_t m, int64_t k)
{
    const kernel_act_t *act = j->act;
    const int64_t K = j->in->K;
    if (j->route == B_BF16)
        return act->dequant[m * K + k];
    const uint8_t c = act->codes[m * K + k];
    if (j->route == B_W4A4)
        return e2m1_decode(c) * e8m0_decode(act->block_scale[m * (K / 32) + k / 32], E8M0_SPEC);
    return act->fp8_format == FP8_E4M3FNUZ ? e4m3fnuz_decode(c) : e4m3fn_decode(c);
}

/* The folded path's reference exponent of weight row n. */
static int row_ref(const kernel_inputs_t *in, int64_t n)
{
    if (in->weight_ref && in->weight_ref_len == in->N)
        return in->weight_ref[n];
    int ref = 0;
    for (int64_t b = 0; b < in->K / 32; b++) {
        const int e = mxfp4_scale_at(in->weight.scales, in->weight.layout, in->N, in->K, n, b);
        ref = e > ref && e != 0xFF ? e : ref;
    }
    return ref;
}

static void bound_row(void *ctx, int64_t i)
{
    const b_job_t *j = ctx;
    const kernel_inputs_t *in = j->in;
    const int64_t K = in->K, N = in->N, m = j->rows[i];
    float *a = malloc((size_t)K * sizeof(float));
    j->row_ok[i] = a != NULL;
    if (!a)
        return;
    int finite = 1;
    for (int64_t k = 0; k < K; k++) {
        a[k] = act_value(j, m, k);
        finite &= isfinite(a[k]);
    }
    const double xs = j->route == B_W4A8 ? (double)j->act->token_scale[m] : 1.0;
    for (int64_t c = 0; c < j->sn; c++) {
        const int64_t n = j->cols[c], at = i * j->sn + c;
        j->outside[at] = -1;
        const float o = j->out_f32 ? j->out_f32[m * N + n] : bf16_decode(j->out_bits[m * N + n]);
        if (!finite || !isfinite(xs) || !isfinite(o))
            continue;
        double exact = 0, mag = 0, fold = 0;
        const int ref = j->route == B_W4A8 ? row_ref(in, n) : 0;
        for (int64_t b = 0; b < K / 32; b++) {
            double ws = 1.0;
            int e = 0;
            if (j->route != B_BF16) {
                e = mxfp4_scale_at(in->weight.scales, in->weight.layout, N, K, n, b);
                ws = e8m0_decode((uint8_t)e, in->weight.e8m0_mode);
            }
            for (int64_t k = 32 * b; k < 32 * b + 32; k++) {
                const double w = j->route == B_BF16 ? (double)bf16_decode(in->weight_bf16[n * K + k])
                                                    : (double)e2m1_decode(mxfp4_code_at(in->weight.packed, K, n, k));
                const double p = (double)a[k] * w * ws;
                exact += p;
                mag += fabs(p);
                if (j->route == B_W4A8 && ref - e > 8)
                    fold += fabs((double)a[k]) * ldexp(1.0, ref - 137);
            }
        }
        if (!isfinite(exact))
            continue;
        /* A block sum scaled into fp32's subnormal range, or x_scale applied
         * there, rounds to a multiple of 2^-149: at most one such step a
         * block and a product. */
        const double width = (j->gamma * mag + fold + (double)(K + K / 32) * 0x1p-149) * fabs(xs) + 0x1p-149,
                     s = exact * xs;
        double lo = s - width, hi = s + width;
        if (j->bits) {
            lo = bf16_rne_d(lo);
            hi = bf16_rne_d(hi);
        } else {    /* an fp32 output: its own rounding */
            lo -= fabs(lo) * 0x1p-24;
            hi += fabs(hi) * 0x1p-24;
        }
        j->outside[at] = (double)o < lo || (double)o > hi;
        j->lo[at] = lo;
        j->hi[at] = hi;
    }
    free(a);
}

static int route_of(const kernel_inputs_t *in, const kernel_act_t *act, weight_kind_t weight, b_route_t *route)
{
    if (!in || !act || in->K <= 0)
        return 0;
    const int mx = weight == WEIGHT_KIND_MXFP4 && in->weight.packed && in->weight.scales && in->K % 32 == 0;
    if (act->codes && act->kind == ACT_FP8_PER_TOKEN && act->token_scale && mx)
        *route = B_W4A8;
    else if (act->codes && act->kind == ACT_MXFP4_PER_BLOCK && act->block_scale && mx)
        *route = B_W4A4;
    else if (weight == WEIGHT_KIND_BF16 && !act->codes && act->dequant && in->weight_bf16 && in->K % 32 == 0)
        *route = B_BF16;
    else
        return 0;
    return 1;
}

int fp32_bound_measure(const kernel_inputs_t *in, const kernel_act_t *act, weight_kind_t weight,
                       const uint16_t *out_bits, const float *out_f32, const unsigned char *skip_rows,
                       acc_fit_t *fit, kr_error_t *err)
{
    fit->bound_checked = fit->bound_outside = 0;
    fit->bound_row = fit->bound_col = -1;
    fit->bound_out = fit->bound_lo = fit->bound_hi = NAN;
    b_job_t j = {.in = in, .act = act, .out_bits = out_bits, .out_f32 = out_f32};
    if ((!out_bits && !out_f32) || !route_of(in, act, weight, &j.route))
        return 0;
    if (j.route == B_BF16)      /* the operands must be bf16 values, or products are not exact */
        for (int64_t i = 0; i < in->M * in->K; i += 97)
            if (isfinite(act->dequant[i]) && bf16_decode(bf16_encode(act->dequant[i])) != act->dequant[i])
                return 0;
    const int64_t M = in->M, N = in->N;
    /* gamma~_n(lambda) = exp(lambda sqrt(n) u + n u^2 / (1 - u)) - 1 (fp32_bound.h) */
    const double u = 0x1p-24, n = (double)in->K + 2;
    j.gamma = expm1(FP32_BOUND_LAMBDA * sqrt(n) * u + n * u * u / (1 - u));
    int64_t *rows = malloc((size_t)M * sizeof(int64_t)), *cols = malloc((size_t)N * sizeof(int64_t));
    const size_t pts = (size_t)FP32_BOUND_ROWS * FP32_BOUND_COLS;
    j.outside = malloc(pts);
    j.lo = malloc(pts * sizeof(double));
    j.hi = malloc(pts * sizeof(double));
    j.row_ok = malloc(FP32_BOUND_ROWS * sizeof(int));
    int status = 0;
    if (!rows || !cols || !j.outside || !j.lo || !j.hi || !j.row_ok) {
        status = kr_fail(err, "out of memory in the fp32 summation bound");
        goto done;
    }
    const int64_t sm = diag_sample(M, FP32_BOUND_ROWS, skip_rows, rows);
    j.sn = diag_sample(N, FP32_BOUND_COLS, NULL, cols);
    j.rows = rows;
    j.cols = cols;
    j.bits = 1;
    for (int64_t i = 0; i < sm && out_f32 && j.bits; i++)
        for (int64_t c = 0; c < j.sn && j.bits; c++) {
            const float v = out_f32[rows[i] * N + cols[c]];
            j.bits = isnan(v) || bf16_decode(bf16_encode(v)) == v;
        }
    parallel_for_cost(sm, 0, 2.0 * (double)in->K * (double)j.sn, bound_row, &j);
    for (int64_t i = 0; i < sm; i++) {
        if (!j.row_ok[i]) {
            status = kr_fail(err, "out of memory in the fp32 summation bound");
            goto done;
        }
        for (int64_t c = 0; c < j.sn; c++) {
            const int64_t at = i * j.sn + c;
            if (j.outside[at] < 0)
                continue;
            fit->bound_checked++;
            if (j.outside[at] && fit->bound_outside++ == 0) {
                fit->bound_row = rows[i];
                fit->bound_col = cols[c];
                fit->bound_out = j.out_f32 ? j.out_f32[rows[i] * N + cols[c]] : bf16_decode(out_bits[rows[i] * N + cols[c]]);
                fit->bound_lo = j.lo[at];
                fit->bound_hi = j.hi[at];
            }
        }
    }
done:
    free(rows), free(cols), free(j.outside), free(j.lo), free(j.hi), free(j.row_ok);
    return status;
}

int fp32_bound_exceeded(const acc_fit_t *fit)
{
    return fit->bound_checked > 0 && fit->bound_outside >= FP32_BOUND_MIN_OUTSIDE &&
           (double)fit->bound_outside >= FP32_BOUND_MIN_SHARE * (double)fit->bound_checked;
}

void fp32_bound_describe(const acc_fit_t *fit, int lost, char *buf, int cap)
{
    snprintf(buf, (size_t)cap,
             "%s%lld of %lld sampled outputs lie outside what any fp32 summation order of "
             "the kernel's own operands gives (the first, row %lld column %lld: %.6g, not in [%.6g, %.6g])",
             lost ? "lost precision: " : "fp32 bound: ", (long long)fit->bound_outside, (long long)fit->bound_checked, (long long)fit->bound_row,
             (long long)fit->bound_col, fit->bound_out, fit->bound_lo, fit->bound_hi);
}
