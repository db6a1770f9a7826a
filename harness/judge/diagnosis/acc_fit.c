/* The accumulation-precision test (acc_fit.h): the output against models
 * that round partial sums, on a sample of the kernel's own operands. */
#include "acc_fit.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acc_round.h"
#include "diag_ctx.h"
#include "fp32_bound.h"
#include "formats.h"
#include "kr_string.h"
#include "mxfp4_weight.h"
#include "parallel.h"

typedef enum { ACC_BF16 = 0, ACC_FP16, ACC_FP32 } acc_format_t;

/* One way a kernel can keep its sums in reduced precision.  every: the
 * running sum is rounded after this many K elements (1 = every element; a
 * multiple of 32 = after each K block, the block's own partial summed in
 * fp32); splits > 0 instead: K cut into that many equal parts, each part's
 * fp32 partial scaled by x_scale and stored rounded (a split-K workspace of
 * the output type), the stored partials added in fp32.  xs_inside: the
 * running sum is of products already scaled by x_scale (activations
 * dequantized before the GEMM), not scaled once at the end. */
typedef struct {
    const char *name;
    acc_format_t format;
    int every;
    int splits;
    int xs_inside;
    const char *meaning;
} acc_model_t;

#define XS_IN ", x_scale applied to each product"
static const acc_model_t acc_models[] = {
    {"bf16-elem", ACC_BF16, 1, 0, 0, "running sum rounded to bf16 after every element"},
    {"bf16-k32", ACC_BF16, 32, 0, 0, "running sum rounded to bf16 every 32-K block"},
    {"bf16-k64", ACC_BF16, 64, 0, 0, "running sum rounded to bf16 every 64-K block"},
    {"bf16-k128", ACC_BF16, 128, 0, 0, "running sum rounded to bf16 every 128-K block"},
    {"fp16-elem", ACC_FP16, 1, 0, 0, "running sum rounded to fp16 after every element"},
    {"fp16-k32", ACC_FP16, 32, 0, 0, "running sum rounded to fp16 every 32-K block"},
    {"fp16-k64", ACC_FP16, 64, 0, 0, "running sum rounded to fp16 every 64-K block"},
    {"fp16-k128", ACC_FP16, 128, 0, 0, "running sum rounded to fp16 every 128-K block"},
    {"bf16-elem-xs", ACC_BF16, 1, 0, 1, "running sum rounded to bf16 after every element" XS_IN},
    {"bf16-k32-xs", ACC_BF16, 32, 0, 1, "running sum rounded to bf16 every 32-K block" XS_IN},
    {"bf16-k64-xs", ACC_BF16, 64, 0, 1, "running sum rounded to bf16 every 64-K block" XS_IN},
    {"bf16-k128-xs", ACC_BF16, 128, 0, 1, "running sum rounded to bf16 every 128-K block" XS_IN},
    {"fp16-elem-xs", ACC_FP16, 1, 0, 1, "running sum rounded to fp16 after every element" XS_IN},
    {"fp16-k32-xs", ACC_FP16, 32, 0, 1, "running sum rounded to fp16 every 32-K block" XS_IN},
    {"fp16-k64-xs", ACC_FP16, 64, 0, 1, "running sum rounded to fp16 every 64-K block" XS_IN},
    {"fp16-k128-xs", ACC_FP16, 128, 0, 1, "running sum rounded to fp16 every 128-K block" XS_IN},
    {"bf16-splitk2", ACC_BF16, 0, 2, 1, "split-K in 2 parts, each partial stored as bf16 before "
                                        "the reduction"},
    {"bf16-splitk4", ACC_BF16, 0, 4, 1, "split-K in 4 parts, each partial stored as bf16 before "
                                        "the reduction"},
    {"fp16-splitk2", ACC_FP16, 0, 2, 1, "split-K in 2 parts, each partial stored as fp16 before "
                                        "the reduction"},
    {"fp16-splitk4", ACC_FP16, 0, 4, 1, "split-K in 4 parts, each partial stored as fp16 before "
                                        "the reduction"},
};
#define ACC_MODEL_COUNT ((int)(sizeof acc_models / sizeof acc_models[0]))

/* The sample: up to this many rows x columns. */
#define ACC_SAMPLE_ROWS 16
#define ACC_SAMPLE_COLS 64

static inline float round_to(acc_format_t f, float x)
{
    if (f == ACC_FP32)
        return x;
    return f == ACC_BF16 ? acc_bf16_round(x) : acc_fp16_round(x);
}

/* One sampled output's operands: the 32-block partials of its dot product
 * (fp32, k ascending, times the block's scales), the products themselves
 * for the per-element models, and the row's x_scale. */
typedef struct {
    int64_t K, nb;
    float *prod;        /* [K] a_k * w_k * block scale (exact: few significand bits, 2^e scales) */
    float *part;        /* [K/32] fp32 sum of the block's prod */
    double exact;       /* sum of prod in fp64 */
    double xs;
} acc_elem_t;

/* The value of model md for e; fp32: the same structure (order, where
 * x_scale applies, split-K) with no rounding beyond fp32's. */
static double model_value(const acc_model_t *md, const acc_elem_t *e, int fp32)
{
    const acc_format_t f = fp32 ? ACC_FP32 : md->format;
    if (md->splits > 0) {
        const int64_t per = e->nb / md->splits;
        float total = 0.0f;
        for (int s = 0; s < md->splits; s++) {
            float p = 0.0f;
            for (int64_t b = s * per; b < (s + 1) * per; b++)
                p += e->part[b];
            total += round_to(f, (float)(p * e->xs));
        }
        return total;
    }
    /* x_scale inside: every term scaled (in fp32) before it joins the sum. */
    const float in = md->xs_inside ? (float)e->xs : 1.0f;
    float acc = 0.0f;
    if (md->every == 1) {
        for (int64_t k = 0; k < e->K; k++)
            acc = round_to(f, acc + e->prod[k] * in);
    } else {
        const int64_t per = md->every / 32;
        for (int64_t b = 0; b < e->nb; b += per) {
            float t = 0.0f;
            for (int64_t j = b; j < b + per && j < e->nb; j++)
                t += e->part[j] * in;
            acc = round_to(f, acc + t);
        }
    }
    return md->xs_inside ? (double)acc : (double)acc * e->xs;
}

/* What one sampled output contributes: its value, the exact sum and each
 * applicable model's value, rounded and plain (fp32). */
typedef struct {
    double o, exact;
    double model[ACC_MODEL_COUNT][2];
} acc_point_t;

/* model_value of every per-element model (every == 1), rounded and plain, in
 * one pass over K: each model's running sum is a serial chain whose adds and
 * roundings wait on each other, so one chain at a time left the core mostly
 * idle; side by side the chains overlap.  Every chain does exactly
 * model_value's operations in its order, so the values are the same. */
#define ACC_PER_ELEMENT_MAX 8

/* The per-element models' indices in acc_models (at most
 * ACC_PER_ELEMENT_MAX); returns how many. */
static int per_element_indices(int idx[ACC_PER_ELEMENT_MAX])
{
    int n = 0;
    for (int h = 0; h < ACC_MODEL_COUNT && n < ACC_PER_ELEMENT_MAX; h++)
        if (acc_models[h].every == 1 && acc_models[h].splits == 0)
            idx[n++] = h;
    return n;
}

static void per_element_models(const acc_elem_t *e, acc_point_t *p)
{
    int idx[ACC_PER_ELEMENT_MAX];
    const int n = per_element_indices(idx);
    float in[ACC_PER_ELEMENT_MAX], rounded[ACC_PER_ELEMENT_MAX], plain[ACC_PER_ELEMENT_MAX];
    acc_format_t f[ACC_PER_ELEMENT_MAX];
    for (int i = 0; i < n; i++) {
        in[i] = acc_models[idx[i]].xs_inside ? (float)e->xs : 1.0f;
        f[i] = acc_models[idx[i]].format;
        rounded[i] = plain[i] = 0.0f;
    }
    for (int64_t k = 0; k < e->K; k++) {
        const float pk = e->prod[k];
        for (int i = 0; i < n; i++) {
            const float t = pk * in[i];
            rounded[i] = round_to(f[i], rounded[i] + t);
            plain[i] = plain[i] + t;
        }
    }
    for (int i = 0; i < n; i++) {
        const int xs_inside = acc_models[idx[i]].xs_inside;
        p->model[idx[i]][0] = xs_inside ? (double)rounded[i] : (double)rounded[i] * e->xs;
        p->model[idx[i]][1] = xs_inside ? (double)plain[i] : (double)plain[i] * e->xs;
    }
}

/* per_element_models for 8 sampled outputs at once, one in each lane:
 * prod8[k * 8 + l] is output l's product k.  Every lane does
 * per_element_models' operations in its order (acc_round.h rounds lane by
 * lane as round_to does), so the values are the same. */
static void per_element_models_x8(const float *prod8, int64_t K, const acc_elem_t *const e[ACC_LANES],
                                  acc_point_t *const p[ACC_LANES])
{
    int idx[ACC_PER_ELEMENT_MAX];
    const int n = per_element_indices(idx);
    acc_f32x8 in[ACC_PER_ELEMENT_MAX], rounded[ACC_PER_ELEMENT_MAX], plain[ACC_PER_ELEMENT_MAX];
    int fp16[ACC_PER_ELEMENT_MAX];
    for (int i = 0; i < n; i++) {
        for (int l = 0; l < ACC_LANES; l++)
            in[i][l] = acc_models[idx[i]].xs_inside ? (float)e[l]->xs : 1.0f;
        fp16[i] = acc_models[idx[i]].format == ACC_FP16;
        rounded[i] = plain[i] = (acc_f32x8){0};
    }
    for (int64_t k = 0; k < K; k++) {
        acc_f32x8 pk;
        memcpy(&pk, prod8 + k * ACC_LANES, sizeof pk);
        for (int i = 0; i < n; i++) {
            const acc_f32x8 t = pk * in[i];
            rounded[i] = rounded[i] + t;
            if (fp16[i])
                acc_fp16_round_x8(&rounded[i]);
            else
                acc_bf16_round_x8(&rounded[i]);
            plain[i] = plain[i] + t;
        }
    }
    for (int i = 0; i < n; i++) {
        const int xs_inside = acc_models[idx[i]].xs_inside;
        for (int l = 0; l < ACC_LANES; l++) {
            p[l]->model[idx[i]][0] = xs_inside ? (double)rounded[i][l] : (double)rounded[i][l] * e[l]->xs;
            p[l]->model[idx[i]][1] = xs_inside ? (double)plain[i][l] : (double)plain[i][l] * e[l]->xs;
        }
    }
}

static int applicable(const acc_model_t *md, int64_t nb)
{
    if (md->splits > 0)
        return nb % md->splits == 0 && nb / md->splits >= 1 && md->splits < nb;
    return md->every == 1 || md->every / 32 < nb;
}

typedef struct {
    double num, den;
    int64_t finite, mismatch;
} acc_sum_t;

static void acc_add(acc_sum_t *s, double model, double o, int bits)
{
    const double m = bits ? (double)bf16_decode(bf16_encode((float)model)) : model;
    if (isfinite(m) != isfinite(o)) {
        s->mismatch++;
    } else if (isfinite(m)) {
        s->finite++;
        s->num += (o - m) * (o - m);
        s->den += m * m;
    }
}

static double acc_rel(const acc_sum_t *s)
{
    return s->den > 0 ? sqrt(s->num / s->den) : (s->num > 0 ? INFINITY : 0.0);
}

/* The activation operand (m, k) and its per-block scale, as the kernel reads
 * them; 0 when act is not one this test models. */
static int act_usable(const kernel_act_t *act)
{
    if (!act || !act->codes)
        return 0;
    return (act->kind == ACT_FP8_PER_TOKEN && act->token_scale) ||
           (act->kind == ACT_MXFP4_PER_BLOCK && act->block_scale);
}

static float act_code_value(const kernel_act_t *act, uint8_t code)
{
    if (act->kind == ACT_MXFP4_PER_BLOCK)
        return e2m1_decode(code);
    return act->fp8_format == FP8_E4M3FNUZ ? e4m3fnuz_decode(code) : e4m3fn_decode(code);
}

/* Row m's activation values as the kernel read them (a[K]) and its block
 * scales (as[K/32]; 1 for fp8): the same for every sampled column, so read
 * once a row.  0 when they do not give the kernel's dequantized activations
 * back (then the codes are not what R_exact used). */
static int row_fill(const kernel_act_t *act, int64_t m, int64_t K, float *a, float *as)
{
    const int64_t nb = K / 32;
    const int fp8 = act->kind == ACT_FP8_PER_TOKEN;
    for (int64_t b = 0; b < nb; b++) {
        as[b] = fp8 ? 1.0f : e8m0_decode(act->block_scale[m * nb + b], E8M0_SPEC);
        for (int64_t k = 32 * b; k < 32 * b + 32; k++) {
            a[k] = act_code_value(act, act->codes[m * K + k]);
            if (act->dequant) {
                const float back = fp8 ? (float)(a[k] * act->token_scale[m]) : a[k] * as[b];
                if (!(back == act->dequant[m * K + k]) && !(isnan(back) && isnan(act->dequant[m * K + k])))
                    return 0;
            }
        }
    }
    return 1;
}

/* Fills e for output (m, n) from row m's a and as (row_fill). */
static void elem_fill(const kernel_inputs_t *in, const kernel_act_t *act, const float *a,
                      const float *as, int64_t m, int64_t n, acc_elem_t *e)
{
    const mxfp4_weight_t *w = &in->weight;
    const int64_t K = e->K, N = in->N;
    e->xs = act->kind == ACT_FP8_PER_TOKEN ? act->token_scale[m] : 1.0;
    e->exact = 0;
    for (int64_t b = 0; b < e->nb; b++) {
        const float ws = e8m0_decode(mxfp4_scale_at(w->scales, w->layout, N, K, n, b), w->e8m0_mode);
        float s = 0.0f;
        for (int64_t k = 32 * b; k < 32 * b + 32; k++) {
            const float wk = e2m1_decode(mxfp4_code_at(w->packed, K, n, k));
            const float p = a[k] * wk * ws * as[b];
            e->prod[k] = p;
            s += a[k] * wk;
            e->exact += (double)p;
        }
        e->part[b] = s * ws * as[b];
    }
}

/* elem_fill for ACC_LANES outputs of row m at once (columns n[l]), one in
 * each lane: every lane does elem_fill's operations in its order, so each
 * value is the same, and the serial chains (the block sums and the fp64
 * exact sum) of the lanes overlap instead of running one after another.
 * The products go out interleaved, prod8[k * ACC_LANES + l], as
 * per_element_models_x8 reads them (e[l]->prod is not written). */
typedef double acc_f64x8 __attribute__((vector_size(8 * ACC_LANES)));
static void elem_fill_x8(const kernel_inputs_t *in, const kernel_act_t *act, const float *a,
                         const float *as, int64_t m, const int64_t n[ACC_LANES],
                         acc_elem_t *const e[ACC_LANES], float *prod8)
{
    const mxfp4_weight_t *w = &in->weight;
    const int64_t K = e[0]->K, N = in->N, nb = K / 32;
    const double xs = act->kind == ACT_FP8_PER_TOKEN ? act->token_scale[m] : 1.0;
    float e2m1[16];     /* e2m1_decode of each code, looked up per element */
    for (int c = 0; c < 16; c++)
        e2m1[c] = e2m1_decode((uint8_t)c);
    acc_f64x8 exact = {0};
    for (int64_t b = 0; b < nb; b++) {
        acc_f32x8 ws, s = {0};
        float wblk[32][ACC_LANES];
        for (int l = 0; l < ACC_LANES; l++) {
            ws[l] = e8m0_decode(mxfp4_scale_at(w->scales, w->layout, N, K, n[l], b), w->e8m0_mode);
            /* Codes 2j and 2j + 1 of the block in byte j: low nibble first
             * (mxfp4_code_at's order). */
            const uint8_t *bytes = w->packed + n[l] * (K / 2) + 16 * b;
            for (int j = 0; j < 16; j++) {
                wblk[2 * j][l] = e2m1[bytes[j] & 0x0F];
                wblk[2 * j + 1][l] = e2m1[bytes[j] >> 4];
            }
        }
        acc_f32x8 asb;
        for (int l = 0; l < ACC_LANES; l++)
            asb[l] = as[b];
        for (int kk = 0; kk < 32; kk++) {
            const int64_t k = 32 * b + kk;
            acc_f32x8 wk, ak;
            memcpy(&wk, wblk[kk], sizeof wk);
            for (int l = 0; l < ACC_LANES; l++)
                ak[l] = a[k];
            const acc_f32x8 aw = ak * wk;
            const acc_f32x8 p = aw * ws * asb;
            memcpy(prod8 + k * ACC_LANES, &p, sizeof p);
            s = s + aw;
            exact = exact + __builtin_convertvector(p, acc_f64x8);
        }
        const acc_f32x8 part = s * ws * asb;
        for (int l = 0; l < ACC_LANES; l++)
            e[l]->part[b] = part[l];
    }
    for (int l = 0; l < ACC_LANES; l++) {
        e[l]->exact = exact[l];
        e[l]->xs = xs;
    }
}

/* The sample's points, filled in parallel (a few hundred million rounded
 * additions) and summed afterwards in sample order, so the residuals do not
 * depend on the thread count. */
typedef struct {
    const kernel_inputs_t *in;
    const kernel_act_t *act;
    const uint16_t *out_bits;
    const float *out_f32;
    const int64_t *rows, *cols;
    int64_t sn;
    acc_point_t *points;
    int *row_ok;        /* [sample row]: every output's operands were R_exact's */
} acc_job_t;

/* Sample row i: its outputs 8 at a time (the per-element chains side by
 * side), the rest one at a time. */
static void acc_sample_row(void *ctx, int64_t i)
{
    const acc_job_t *j = ctx;
    const int64_t K = j->in->K, N = j->in->N;
    acc_elem_t elem[ACC_LANES];
    const acc_elem_t *lane_elem[ACC_LANES];
    acc_point_t *lane_point[ACC_LANES];
    float *prod8 = malloc((size_t)K * ACC_LANES * sizeof(float));
    float *a = malloc((size_t)K * sizeof(float)), *as = malloc((size_t)(K / 32) * sizeof(float));
    int ok = prod8 && a && as;
    for (int l = 0; l < ACC_LANES; l++) {
        elem[l] = (acc_elem_t){.K = K, .nb = K / 32};
        elem[l].prod = malloc((size_t)K * sizeof(float));
        elem[l].part = malloc((size_t)elem[l].nb * sizeof(float));
        ok &= elem[l].prod && elem[l].part;
        lane_elem[l] = &elem[l];
    }
    j->row_ok[i] = ok ? 1 : -1;
    if (ok && !row_fill(j->act, j->rows[i], K, a, as))
        j->row_ok[i] = 0;
    acc_elem_t *lane_fill[ACC_LANES];
    for (int l = 0; l < ACC_LANES; l++)
        lane_fill[l] = &elem[l];
    for (int64_t c0 = 0; c0 < j->sn && j->row_ok[i] == 1; c0 += ACC_LANES) {
        const int lanes = j->sn - c0 < ACC_LANES ? (int)(j->sn - c0) : ACC_LANES;
        if (lanes == ACC_LANES)
            elem_fill_x8(j->in, j->act, a, as, j->rows[i], j->cols + c0, lane_fill, prod8);
        for (int l = 0; l < lanes; l++) {
            const int64_t m = j->rows[i], n = j->cols[c0 + l];
            acc_elem_t *e = &elem[l];
            acc_point_t *p = lane_point[l] = &j->points[i * j->sn + c0 + l];
            if (lanes < ACC_LANES)
                elem_fill(j->in, j->act, a, as, m, n, e);
            p->o = j->out_f32 ? (double)j->out_f32[m * N + n] : (double)bf16_decode(j->out_bits[m * N + n]);
            p->exact = e->exact * e->xs;
            for (int h = 0; h < ACC_MODEL_COUNT; h++)
                if (applicable(&acc_models[h], e->nb) && acc_models[h].every != 1) {
                    p->model[h][0] = model_value(&acc_models[h], e, 0);
                    p->model[h][1] = model_value(&acc_models[h], e, 1);
                }
        }
        if (lanes == ACC_LANES) {
            per_element_models_x8(prod8, K, lane_elem, lane_point);
        } else {
            for (int l = 0; l < lanes; l++)
                per_element_models(&elem[l], lane_point[l]);
        }
    }
    for (int l = 0; l < ACC_LANES; l++) {
        free(elem[l].prod);
        free(elem[l].part);
    }
    free(prod8);
    free(a);
    free(as);
}

int acc_fit_measure(const kernel_inputs_t *in, const kernel_act_t *act, weight_kind_t weight,
                    const uint16_t *out_bits, const float *out_f32, const unsigned char *skip_rows,
                    acc_fit_t *fit, kr_error_t *err)
{
    memset(fit, 0, sizeof *fit);
    if (fp32_bound_measure(in, act, weight, out_bits, out_f32, skip_rows, fit, err))
        return -1;
    if (!in || weight != WEIGHT_KIND_MXFP4 || !act_usable(act) || !in->weight.packed || !in->weight.scales || in->K % 32 ||
        in->K < 64 || (!out_bits && !out_f32))
        return 0;
    const int64_t M = in->M, N = in->N, K = in->K, nb = K / 32;
    int64_t *rows = malloc((size_t)M * sizeof(int64_t)), *cols = malloc((size_t)N * sizeof(int64_t));
    acc_point_t *points = malloc((size_t)ACC_SAMPLE_ROWS * ACC_SAMPLE_COLS * sizeof *points);
    int row_ok[ACC_SAMPLE_ROWS];
    acc_sum_t sums[ACC_MODEL_COUNT + 1], plain[ACC_MODEL_COUNT];
    memset(sums, 0, sizeof sums);
    memset(plain, 0, sizeof plain);
    int status = 0;
    if (!rows || !cols || !points) {
        status = kr_fail(err, "out of memory in the accumulation-precision test");
        goto done;
    }
    const int64_t sm = diag_sample(M, ACC_SAMPLE_ROWS, skip_rows, rows);
    const int64_t sn = diag_sample(N, ACC_SAMPLE_COLS, NULL, cols);
    /* The models are rounded to bf16 like the output, unless the output holds
     * values bf16 cannot (an fp32 output). */
    int bits = 1;
    for (int64_t i = 0; i < sm && out_f32 && bits; i++)
        for (int64_t j = 0; j < sn && bits; j++) {
            const float v = out_f32[rows[i] * N + cols[j]];
            bits = isnan(v) || bf16_decode(bf16_encode(v)) == v;
        }
    acc_job_t job = {.in = in, .act = act, .out_bits = out_bits, .out_f32 = out_f32, .rows = rows,
                     .cols = cols, .sn = sn, .points = points, .row_ok = row_ok};
    /* Some 8 K-long rounded sums per output, a few ns each. */
    parallel_for_cost(sm, 0, 3.0 * 8.0 * (double)K * (double)sn, acc_sample_row, &job);
    for (int64_t i = 0; i < sm; i++) {
        if (row_ok[i] < 0) {
            status = kr_fail(err, "out of memory in the accumulation-precision test");
            goto done;
        }
        if (row_ok[i] == 0)
            goto done;      /* not the operands R_exact was built from: nothing to say */
    }
    int64_t used = 0;
    for (int64_t i = 0; i < sm; i++) {
        for (int64_t j = 0; j < sn; j++) {
            const acc_point_t *p = &points[i * sn + j];
            acc_add(&sums[ACC_MODEL_COUNT], p->exact, p->o, bits);
            for (int h = 0; h < ACC_MODEL_COUNT; h++)
                if (applicable(&acc_models[h], nb)) {
                    acc_add(&sums[h], p->model[h][0], p->o, bits);
                    acc_add(&plain[h], p->model[h][1], p->o, bits);
                }
            used++;
        }
    }
    if (used == 0)
        goto done;
    /* Rank: fewer non-finite mismatches first, then the smaller residual. */
    int best = -1, second = -1;
    for (int h = 0; h < ACC_MODEL_COUNT; h++) {
        if (!applicable(&acc_models[h], nb))
            continue;
        const int beats_best = best < 0 || sums[h].mismatch < sums[best].mismatch ||
                               (sums[h].mismatch == sums[best].mismatch && acc_rel(&sums[h]) < acc_rel(&sums[best]));
        if (beats_best) {
            second = best;
            best = h;
        } else if (second < 0 || sums[h].mismatch < sums[second].mismatch ||
                   (sums[h].mismatch == sums[second].mismatch && acc_rel(&sums[h]) < acc_rel(&sums[second]))) {
            second = h;
        }
    }
    if (best < 0)
        goto done;
    fit->sampled = used;
    /* Residuals over the outputs finite on both sides (a non-finite tile is
     * another fault, the localisation's); a model that disagrees on more of
     * them than fp32 does cannot be the kernel's. */
    /* fp32 accumulation is the exact sum or any of the models' structures
     * kept in fp32 (x_scale applied per product or per split, partials
     * added in another order): a correct kernel's own order is among them,
     * so only the rounding of partial sums can make a model fit better. */
    fit->resid_fp32 = acc_rel(&sums[ACC_MODEL_COUNT]);
    for (int h = 0; h < ACC_MODEL_COUNT; h++)
        if (applicable(&acc_models[h], nb) && plain[h].mismatch <= sums[ACC_MODEL_COUNT].mismatch &&
            acc_rel(&plain[h]) < fit->resid_fp32)
            fit->resid_fp32 = acc_rel(&plain[h]);
    kr_strlcpy(fit->model, acc_models[best].name, sizeof fit->model);
    fit->resid_best = sums[best].mismatch > sums[ACC_MODEL_COUNT].mismatch ? INFINITY : acc_rel(&sums[best]);
    if (second >= 0) {
        kr_strlcpy(fit->runner_up, acc_models[second].name, sizeof fit->runner_up);
        fit->resid_runner_up = sums[second].mismatch > sums[ACC_MODEL_COUNT].mismatch
                                   ? INFINITY : acc_rel(&sums[second]);
    }
done:
    free(rows);
    free(cols);
    free(points);
    return status;
}

int acc_fit_reduced(const acc_fit_t *fit)
{
    return fit->sampled >= ACC_FIT_MIN_SAMPLES && fit->model[0] && isfinite(fit->resid_best) &&
           fit->resid_fp32 > ACC_FIT_FLOOR && fit->resid_best * ACC_FIT_RATIO <= fit->resid_fp32;
}

static const acc_model_t *model_named(const char *name)
{
    for (int h = 0; h < ACC_MODEL_COUNT; h++)
        if (!strcmp(acc_models[h].name, name))
            return &acc_models[h];
    return NULL;
}

void acc_fit_describe(const acc_fit_t *fit, char *buf, int cap)
{
    const acc_model_t *best = model_named(fit->model), *second = model_named(fit->runner_up);
    int len = snprintf(buf, (size_t)cap,
                       "%s: residual %.3g vs fp32 accumulation %.3g (%lld sampled outputs, fit when "
                       "%g x smaller and fp32 over %g)",
                       best ? best->meaning : fit->model, fit->resid_best, fit->resid_fp32,
                       (long long)fit->sampled, ACC_FIT_RATIO, ACC_FIT_FLOOR);
    /* The runner-up is named when it is close: the data does not tell them apart. */
    if (second && len > 0 && len < cap && isfinite(fit->resid_runner_up) &&
        fit->resid_runner_up <= 2 * fit->resid_best + 1e-12)
        snprintf(buf + len, (size_t)(cap - len), "; runner-up %s (residual %.3g)", second->meaning,
                 fit->resid_runner_up);
}

int diag_try_acc_precision(dctx_t *x)
{
    acc_fit_t fit;
    const weight_kind_t wk = x->d->act && !x->d->act->codes && x->d->in->weight_bf16 ? WEIGHT_KIND_BF16
                                                                                        : WEIGHT_KIND_MXFP4;
    if (acc_fit_measure(x->d->in, x->d->act, wk, NULL, x->d->out, x->poisoned_rows, &fit, x->err))
        return -1;
    if (fit.sampled == 0)
        return 0;
    diag_tried(x, diag_hypothesis_name(DIAG_ACC_PRECISION));
    if (!acc_fit_reduced(&fit))
        return 0;
    char line[320];
    acc_fit_describe(&fit, line, sizeof line);
    return diag_matched(x, DIAG_ACC_PRECISION, fit.resid_best, "reduced-precision accumulation: %s", line);
}
