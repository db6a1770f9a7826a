#include "diagnose.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats.h"
#include "gemm_ref.h"
#include "input_health.h"
#include "mxfp4_weight.h"
#include "quant_fp8.h"
#include "quant_mxfp4.h"

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
};

const char *diag_hypothesis_name(diag_hypothesis_t h)
{
    return (unsigned)h < DIAG_COUNT ? hypothesis_names[h] : "?";
}

int diag_wanted(verdict_t v)
{
    return v == VERDICT_WRONG || v == VERDICT_MAGNITUDE || v == VERDICT_NONFINITE_OUT ||
           v == VERDICT_POISONED_INPUT;
}

/* ---- comparison ---- */

/* out against an alternative: rel_fro over elements finite on both sides
 * (denominator: the alternative's norm), and how many elements are
 * non-finite on exactly one side. */
typedef struct {
    double rel;
    int64_t nf_mismatch;
    int64_t finite;
} cmp_t;

/* skip_rows / skip_cols (may be NULL): elements of those rows / columns are left out. */
static cmp_t compare_region(const float *out, const float *alt, int64_t M, int64_t N, float scale,
                            const unsigned char *skip_rows, const unsigned char *skip_cols)
{
    cmp_t c = {0, 0, 0};
    double num = 0, den = 0;
    for (int64_t m = 0; m < M; m++) {
        if (skip_rows && skip_rows[m])
            continue;
        for (int64_t n = 0; n < N; n++) {
            if (skip_cols && skip_cols[n])
                continue;
            const double o = out[m * N + n], a = (double)alt[m * N + n] * scale;
            const int fo = isfinite(o), fa = isfinite(a);
            if (fo != fa) {
                c.nf_mismatch++;
            } else if (fo) {
                c.finite++;
                num += (o - a) * (o - a);
                den += a * a;
            }
        }
    }
    c.rel = den > 0 ? sqrt(num / den) : (num > 0 ? INFINITY : 0.0);
    return c;
}

typedef struct {
    const diag_input_t *d;
    diag_result_t *r;
    kr_error_t *err;
    int64_t M, N, K;
    double thr;
    cmp_t base;
    int is_source;              /* the reference is R_source: its operand is x */
    const float *A;             /* the reference's own operand, or NULL */
    float *alt;                 /* [M, N] scratch for alternatives */
    char tried[256];
    int budget_hit;
} dctx_t;

static int good(const dctx_t *x, cmp_t c)
{
    return c.nf_mismatch == 0 && c.finite > 0 && c.rel <= x->thr;
}

/* An alternative explains the row: the output agrees with it, and clearly
 * better than with the reference. */
static int explains(const dctx_t *x, cmp_t c)
{
    if (!good(x, c))
        return 0;
    const cmp_t b = x->base;
    return b.nf_mismatch > 0 || c.rel * 10 <= b.rel || (b.rel > x->thr && c.rel * 2 <= b.rel);
}

static void tried(dctx_t *x, diag_hypothesis_t h)
{
    size_t len = strlen(x->tried);
    if (len + 24 < sizeof x->tried)
        snprintf(x->tried + len, sizeof x->tried - len, "%s%s", len ? ", " : "",
                 diag_hypothesis_name(h));
}

static int matched(dctx_t *x, diag_hypothesis_t h, double rel, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int matched(dctx_t *x, diag_hypothesis_t h, double rel, const char *fmt, ...)
{
    x->r->matched = 1;
    x->r->hypothesis = h;
    x->r->rel = rel;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(x->r->line, sizeof x->r->line, fmt, ap);
    va_end(ap);
    return 1;
}

/* alt = R(A, W).  Returns 0, 1 when the GEMM budget is spent, -1 on error. */
static int alt_gemm(dctx_t *x, const float *A, const mxfp4_weight_t *W)
{
    if (x->d->max_gemms > 0 && x->r->gemms >= x->d->max_gemms) {
        x->budget_hit = 1;
        return 1;
    }
    x->r->gemms++;
    return gemm_ref_f32(A, x->M, W, 0, x->alt, x->err) ? -1 : 0;
}

static const char *ref_name(const dctx_t *x)
{
    return x->d->ref_name ? x->d->ref_name : "the reference";
}

/* ---- quantizing x the kernel's way ---- */

static act_kind_t act_kind(const dctx_t *x)
{
    return x->d->act ? x->d->act->kind : ACT_FP8_PER_TOKEN;
}

static fp8_format_t fp8_format(const dctx_t *x)
{
    return x->d->act ? x->d->act->fp8_format : FP8_E4M3FN;
}

static fp8_token_variant_t kernel_fp8_variant(const dctx_t *x)
{
    return x->d->kopt ? x->d->kopt->fp8_variant : FP8_TOKEN_VLLM;
}

static mxfp4_variant_t kernel_mxfp4_variant(const dctx_t *x)
{
    return x->d->kopt ? x->d->kopt->mxfp4_variant : MXFP4_AITER_EVEN;
}

/* Operands of src quantized with variant v of the act's kind into `deq`
 * [M, K].  *same: the codes and scales equal the reference's act (so the
 * alternative would be the reference itself).  Returns 0 or -1. */
static int quantize_like(dctx_t *x, const float *src, int variant, float *deq, int *same)
{
    const int64_t M = x->M, K = x->K;
    const kernel_act_t *act = x->d->act;
    uint8_t *codes = malloc((size_t)M * (size_t)K);
    if (!codes)
        return kr_fail(x->err, "out of memory in diagnose");
    *same = 0;
    if (act_kind(x) == ACT_FP8_PER_TOKEN) {
        float *scale = malloc((size_t)M * sizeof(float));
        if (!scale) {
            free(codes);
            return kr_fail(x->err, "out of memory in diagnose");
        }
        fp8_token_quant(src, M, K, (fp8_token_variant_t)variant, fp8_format(x), codes, scale);
        if (act && act->kind == ACT_FP8_PER_TOKEN && act->codes && act->token_scale)
            *same = memcmp(codes, act->codes, (size_t)M * (size_t)K) == 0 &&
                    memcmp(scale, act->token_scale, (size_t)M * sizeof(float)) == 0;
        fp8_token_dequant(codes, scale, M, K, fp8_format(x), deq);
        free(scale);
    } else {
        uint8_t *scales = malloc((size_t)M * (size_t)(K / 32));
        if (!scales) {
            free(codes);
            return kr_fail(x->err, "out of memory in diagnose");
        }
        mxfp4_quant(src, M, K, (mxfp4_variant_t)variant, codes, scales);
        if (act && act->kind == ACT_MXFP4_PER_BLOCK && act->codes && act->block_scale)
            *same = memcmp(codes, act->codes, (size_t)M * (size_t)K) == 0 &&
                    memcmp(scales, act->block_scale, (size_t)M * (size_t)(K / 32)) == 0;
        mxfp4_act_dequant(codes, scales, M, K, deq);
        free(scales);
    }
    free(codes);
    return 0;
}

/* The name of the quantizer the reference's activations came from. */
static void reference_quantizer(const dctx_t *x, char *buf, int cap)
{
    const kernel_act_t *act = x->d->act;
    if (act && strncmp(act->origin, "recorded", 8) == 0)
        snprintf(buf, (size_t)cap, "the recorded x_fp8/x_scale");
    else if (act_kind(x) == ACT_FP8_PER_TOKEN)
        snprintf(buf, (size_t)cap, "'%s'", fp8_token_variant_name(kernel_fp8_variant(x)));
    else
        snprintf(buf, (size_t)cap, "'%s'", mxfp4_variant_name(kernel_mxfp4_variant(x)));
}

/* ---- rows with non-finite input ---- */

/* mask[m] = row m of the input is non-finite.  kinds: NaN-only -> 1. */
static int64_t input_bad_rows(const dctx_t *x, unsigned char *mask, int *nan_only)
{
    const kernel_inputs_t *in = x->d->in;
    const int64_t M = x->M, K = x->K;
    const float *src = in->x ? in->x : (x->d->act ? x->d->act->dequant : NULL);
    int64_t count = 0;
    *nan_only = 1;
    memset(mask, 0, (size_t)M);
    if (!src)
        return 0;
    for (int64_t m = 0; m < M; m++) {
        for (int64_t k = 0; k < K; k++) {
            const float v = src[m * K + k];
            if (!isfinite(v)) {
                mask[m] = 1;
                if (!isnan(v))
                    *nan_only = 0;
            }
        }
        count += mask[m];
    }
    return count;
}

/* ---- hypotheses ---- */

/* g: non-finite output rows = rows with non-finite input (or the converse for the reference). */
static int try_rows_poisoned(dctx_t *x)
{
    const int64_t M = x->M, N = x->N;
    const float *out = x->d->out, *ref = x->d->ref;
    unsigned char *in_bad = malloc((size_t)M), *out_bad = calloc((size_t)M, 1),
                  *ref_bad = calloc((size_t)M, 1);
    if (!in_bad || !out_bad || !ref_bad) {
        free(in_bad);
        free(out_bad);
        free(ref_bad);
        return kr_fail(x->err, "out of memory in diagnose");
    }
    int in_nan_only, out_nan_only = 1, result = 0;
    int64_t n_in = input_bad_rows(x, in_bad, &in_nan_only), n_out = 0, n_ref = 0;
    for (int64_t m = 0; m < M; m++) {
        for (int64_t n = 0; n < N; n++) {
            const float o = out[m * N + n], r = ref[m * N + n];
            if (!isfinite(o) && isfinite(r)) {
                out_bad[m] = 1;
                if (!isnan(o))
                    out_nan_only = 0;
            }
            if (!isfinite(r) && isfinite(o))
                ref_bad[m] = 1;
        }
        n_out += out_bad[m];
        n_ref += ref_bad[m];
    }
    if (n_out > 0 || n_ref > 0)
        tried(x, DIAG_ROWS_POISONED);
    const int out_rows_match = n_out > 0 && memcmp(out_bad, in_bad, (size_t)M) == 0;
    const int ref_rows_match = !out_rows_match && n_out == 0 && n_ref > 0 &&
                               memcmp(ref_bad, in_bad, (size_t)M) == 0;
    if (n_in > 0 && (out_rows_match || ref_rows_match)) {
        char rows[160], rest[96] = "", extra[256] = "";
        index_ranges_format_from(in_bad, M, x->d->row_offset, 6, rows, sizeof rows);
        cmp_t others = compare_region(out, ref, M, N, 1.0f, in_bad, NULL);
        double rel = others.rel;
        if (others.finite > 0)
            snprintf(rest, sizeof rest, "; the other rows %s %s (rel %.3g)",
                     good(x, others) ? "match" : "do NOT match", ref_name(x), others.rel);
        const char *in_kind = in_nan_only ? "NaN" : "non-finite";
        const kernel_act_t *act = x->d->act;
        if (out_rows_match) {
            const char *how = "poisoned input, propagated by the kernel";
            if (act && act->kind == ACT_FP8_PER_TOKEN) {
                int scale_bad = 0;
                for (int64_t m = 0; m < M; m++)
                    scale_bad |= in_bad[m] && act->token_scale && !isfinite(act->token_scale[m]);
                how = scale_bad ? "poisoned input, propagated by per-token fp8 (the rows' x_scale is "
                                  "non-finite: one NaN makes the row's scale NaN)"
                                : "poisoned input, propagated by per-token fp8 (one NaN makes the "
                                  "row's scale NaN)";
            } else if (act && act->kind == ACT_MXFP4_PER_BLOCK) {
                how = "poisoned input, propagated by the kernel (its MXFP4 quantizer gives NaN "
                      "blocks a NaN scale, or it does not quantize the aiter-even way)";
            }
            /* Does the NaN-propagating 'traced' quantizer account for the rows? */
            if (act && act->kind == ACT_FP8_PER_TOKEN && x->d->in->x && !x->is_source) {
                float *deq = malloc((size_t)M * (size_t)x->K * sizeof(float));
                int same = 0, g = 1;
                if (!deq) {
                    result = kr_fail(x->err, "out of memory in diagnose");
                    goto done;
                }
                if (quantize_like(x, x->d->in->x, FP8_TOKEN_TRACED, deq, &same) == 0 && !same &&
                    (g = alt_gemm(x, deq, &x->d->in->weight)) == 0) {
                    cmp_t c = compare_region(out, x->alt, M, N, 1.0f, NULL, NULL);
                    if (good(x, c)) {
                        char refq[64];
                        reference_quantizer(x, refq, sizeof refq);
                        snprintf(extra, sizeof extra,
                                 "; consistent with 'traced' quantization (NaN-propagating "
                                 "amax), not %s (rel %.3g)",
                                 refq, c.rel);
                        rel = c.rel;
                    }
                }
                free(deq);
                if (g < 0) {
                    result = -1;
                    goto done;
                }
            }
            result = matched(x, DIAG_ROWS_POISONED, rel,
                             "%s rows %s of the output are exactly the rows with %s input: %s%s%s",
                             out_nan_only ? "NaN" : "non-finite", rows, in_kind, how, rest, extra);
        } else {
            const char *how = "";
            if (act && act->kind == ACT_FP8_PER_TOKEN)
                how = " (per-token fp8 vllm: NaN -> +448)";
            else if (act && act->kind == ACT_MXFP4_PER_BLOCK)
                how = " (MXFP4 aiter-even: NaN -> a finite code)";
            result = matched(x, DIAG_REF_ROWS_POISONED, rel,
                             "%s is non-finite on rows %s, exactly the rows with %s input (the fp32 "
                             "GEMM propagates it), while the output is finite there: the kernel's "
                             "quantizer mapped them to finite codes%s%s",
                             ref_name(x), rows, in_kind, how, rest);
        }
    }
done:
    free(in_bad);
    free(out_bad);
    free(ref_bad);
    return result;
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

/* c and d: out ~= s * ref. */
static int try_scale(dctx_t *x)
{
    const int64_t MN = x->M * x->N;
    const float *out = x->d->out, *ref = x->d->ref;
    double dot = 0, rr = 0;
    for (int64_t i = 0; i < MN; i++) {
        if (isfinite(out[i]) && isfinite(ref[i])) {
            dot += (double)out[i] * ref[i];
            rr += (double)ref[i] * ref[i];
        }
    }
    tried(x, DIAG_SCALE_POW2);
    tried(x, DIAG_SCALE_CONST);
    if (!(rr > 0))
        return 0;
    const double s = dot / rr;
    if (!(s > 0) || !isfinite(s))
        return 0;
    const double l2 = log2(s);
    const long k = lround(l2);
    if (k != 0 && labs(k) <= 16 && fabs(l2 - (double)k) < 0.01) {
        cmp_t c = compare_region(out, ref, x->M, x->N, ldexpf(1.0f, (int)k), NULL, NULL);
        if (explains(x, c))
            return matched(x, DIAG_SCALE_POW2, c.rel,
                           "out = 2^%ld x %s (rel %.3g): a scale off by 2^%ld: x_scale or block "
                           "exponent bias",
                           k, ref_name(x), c.rel, k);
    }
    if (fabs(l2 - (double)k) >= 0.01) {
        cmp_t c = compare_region(out, ref, x->M, x->N, (float)s, NULL, NULL);
        if (explains(x, c)) {
            char ratio[48];
            ratio_text(s, ratio, sizeof ratio);
            return matched(x, DIAG_SCALE_CONST, c.rel,
                           "|out| is %s %s (least squares c = %.6g, rel %.3g after scaling): a scale "
                           "off by a constant factor, not a power of 2 (like aiter's W4A4 on N=5120 "
                           "K=3072)",
                           ratio, ref_name(x), s, c.rel);
        }
    }
    return 0;
}

/* A run [i0, i1] of bad indices in mask[0..n): 1 if exactly one, else 0. */
static int single_run(const unsigned char *mask, int64_t n, int64_t *i0, int64_t *i1)
{
    int64_t first = -1, last = -1, count = 0;
    for (int64_t i = 0; i < n; i++) {
        if (mask[i]) {
            if (first < 0)
                first = i;
            last = i;
            count++;
        }
    }
    if (count == 0 || count == n || last - first + 1 != count)
        return 0;
    *i0 = first;
    *i1 = last;
    return 1;
}

/* What the output holds in a region: "all NaN", "all zero" or its rel. */
static void region_content(const dctx_t *x, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                           char *buf, int cap)
{
    const float *out = x->d->out, *ref = x->d->ref;
    int64_t nan = 0, zero = 0, total = 0;
    double num = 0, den = 0;
    for (int64_t m = r0; m <= r1; m++)
        for (int64_t n = c0; n <= c1; n++) {
            const float o = out[m * x->N + n], r = ref[m * x->N + n];
            total++;
            nan += isnan(o) ? 1 : 0;
            zero += o == 0.0f ? 1 : 0;
            if (isfinite(o) && isfinite(r)) {
                num += ((double)o - r) * ((double)o - r);
                den += (double)r * r;
            }
        }
    if (nan == total)
        snprintf(buf, (size_t)cap, "all NaN: never written, the poison is still there");
    else if (zero == total)
        snprintf(buf, (size_t)cap, "all zero: never written, or masked to zero");
    else
        snprintf(buf, (size_t)cap, "rel %.3g there%s", den > 0 ? sqrt(num / den) : INFINITY,
                 nan ? ", some NaN" : "");
}

/* Per-line (row or column) badness: non-finite mismatch, or rel over 4x the threshold. */
static void line_badness(const dctx_t *x, int by_column, unsigned char *bad)
{
    const int64_t M = x->M, N = x->N, L = by_column ? N : M;
    double *num = calloc((size_t)L, sizeof(double)), *den = calloc((size_t)L, sizeof(double));
    memset(bad, 0, (size_t)L);
    if (!num || !den) {
        free(num);
        free(den);
        return;
    }
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            const int64_t l = by_column ? n : m;
            const float o = x->d->out[m * N + n], r = x->d->ref[m * N + n];
            if (isfinite(o) != isfinite(r)) {
                bad[l] = 1;
            } else if (isfinite(o)) {
                num[l] += ((double)o - r) * ((double)o - r);
                den[l] += (double)r * r;
            }
        }
    const double t = 4 * x->thr;
    for (int64_t l = 0; l < L; l++)
        if (!bad[l])
            bad[l] = den[l] > 0 ? num[l] > t * t * den[l] : num[l] > 0;
    free(num);
    free(den);
}

/* h: a block of columns (16-aligned, or trailing) is wrong, the rest matches. */
static int try_columns(dctx_t *x)
{
    const int64_t N = x->N;
    unsigned char *bad = malloc((size_t)N);
    if (!bad)
        return kr_fail(x->err, "out of memory in diagnose");
    tried(x, DIAG_COLUMNS);
    line_badness(x, 1, bad);
    int64_t c0, c1;
    int result = 0;
    if (single_run(bad, N, &c0, &c1) && c0 % 16 == 0 && ((c1 + 1) % 16 == 0 || c1 == N - 1)) {
        cmp_t rest = compare_region(x->d->out, x->d->ref, x->M, N, 1.0f, NULL, bad);
        if (good(x, rest)) {
            char what[96], content[96];
            if (c1 == N - 1 && N % 64 != 0)
                snprintf(what, sizeof what, "the partial N tile: N=%lld is not a multiple of 64",
                         (long long)N);
            else if (c1 == N - 1)
                snprintf(what, sizeof what, "the last N tile");
            else
                snprintf(what, sizeof what, "a %lld-column block", (long long)(c1 - c0 + 1));
            region_content(x, 0, x->M - 1, c0, c1, content, sizeof content);
            result = matched(x, DIAG_COLUMNS, rest.rel,
                             "columns %lld-%lld (%s) are wrong: unwritten or masked incorrectly "
                             "(%s); the other columns match %s (rel %.3g)",
                             (long long)c0, (long long)c1, what, content, ref_name(x), rest.rel);
        }
    }
    free(bad);
    return result;
}

/* h, rows: a contiguous block of rows is wrong, the rest matches. */
static int try_rows(dctx_t *x)
{
    const int64_t M = x->M;
    unsigned char *bad = malloc((size_t)M);
    if (!bad)
        return kr_fail(x->err, "out of memory in diagnose");
    tried(x, DIAG_ROWS);
    line_badness(x, 0, bad);
    int64_t r0, r1;
    int result = 0;
    if (single_run(bad, M, &r0, &r1)) {
        cmp_t rest = compare_region(x->d->out, x->d->ref, M, x->N, 1.0f, bad, NULL);
        if (good(x, rest)) {
            char content[96];
            region_content(x, r0, r1, 0, x->N - 1, content, sizeof content);
            result = matched(x, DIAG_ROWS, rest.rel,
                             "rows %lld-%lld are wrong (%s); the other rows match %s (rel %.3g): "
                             "an M tile unwritten or masked incorrectly, or those rows' inputs",
                             (long long)(r0 + x->d->row_offset), (long long)(r1 + x->d->row_offset),
                             content, ref_name(x), rest.rel);
        }
    }
    free(bad);
    return result;
}

static int weight_usable(const dctx_t *x)
{
    const mxfp4_weight_t *w = &x->d->in->weight;
    return w->packed && w->scales && x->A;
}

static int env_has(const case_t *c, const char *flag)
{
    return c && c->env_flags && strstr(c->env_flags, flag);
}

/* a: the weight read in the other order. */
static int try_wperm(dctx_t *x)
{
    if (!weight_usable(x) || x->N % 16 || x->K % 16)
        return 0;
    const mxfp4_weight_t *w = &x->d->in->weight;
    const size_t bytes = (size_t)x->N * (size_t)(x->K / 2);
    uint8_t *perm = malloc(bytes);
    if (!perm)
        return kr_fail(x->err, "out of memory in diagnose");
    mxfp4_weight_t alt_w = *w;
    alt_w.packed = perm;
    const int recorded = x->d->kernel && strncmp(x->d->kernel, "recorded.", 9) == 0;
    const case_t *c = x->d->c;
    int result = 0;
    for (int pass = 0; pass < 2 && result == 0; pass++) {
        const diag_hypothesis_t h = pass == 0 ? DIAG_WPERM_UNDONE : DIAG_WPERM_APPLIED;
        if (pass == 0)
            wperm_unpermute(w->packed, x->N, x->K, perm);
        else
            wperm_permute(w->packed, x->N, x->K, perm);
        int g = alt_gemm(x, x->A, &alt_w);
        if (g < 0)
            result = -1;
        if (g)
            break;
        tried(x, h);
        cmp_t cm = compare_region(x->d->out, x->alt, x->M, x->N, 1.0f, NULL, NULL);
        if (!explains(x, cm))
            continue;
        if (pass == 0) {
            const int case_side =
                recorded || (c && c->weight_order == WEIGHT_ORDER_CHECKPOINT &&
                             env_has(c, "RADIANCE_MXFP4_WPERM=1"));
            if (case_side)
                result = matched(x, h, cm.rel,
                                 "matches %s with WPERM undone: the case's weight is in fragment "
                                 "order but not marked so; the reference read permuted weights "
                                 "(rel %.3g)",
                                 ref_name(x), cm.rel);
            else
                result = matched(x, h, cm.rel,
                                 "matches %s on unpermute_w(W): the kernel read checkpoint-order "
                                 "weights as fragment order (WPERM flag mismatch) (rel %.3g)",
                                 ref_name(x), cm.rel);
        } else {
            const int case_side = recorded || (c && c->weight_order == WEIGHT_ORDER_FRAGMENT);
            if (case_side)
                result = matched(x, h, cm.rel,
                                 "matches %s on permute_w(W): the case's weight is marked fragment "
                                 "order but is in checkpoint order; the reference unpermuted a "
                                 "weight that was never permuted (rel %.3g)",
                                 ref_name(x), cm.rel);
            else
                result = matched(x, h, cm.rel,
                                 "matches %s on permute_w(W): the kernel read fragment-order "
                                 "weights as checkpoint order (WPERM flag mismatch) (rel %.3g)",
                                 ref_name(x), cm.rel);
        }
    }
    free(perm);
    return result;
}

/* b: the scale bytes read in the other layout. */
static int try_scale_layout(dctx_t *x)
{
    if (!weight_usable(x))
        return 0;
    mxfp4_weight_t alt_w = x->d->in->weight;
    const scale_layout_t stored = alt_w.layout;
    alt_w.layout = stored == SCALE_LAYOUT_NK ? SCALE_LAYOUT_KN : SCALE_LAYOUT_NK;
    int g = alt_gemm(x, x->A, &alt_w);
    if (g)
        return g < 0 ? -1 : 0;
    tried(x, DIAG_SCALE_LAYOUT);
    cmp_t cm = compare_region(x->d->out, x->alt, x->M, x->N, 1.0f, NULL, NULL);
    if (!explains(x, cm))
        return 0;
    return matched(x, DIAG_SCALE_LAYOUT, cm.rel,
                   "matches %s with the scales read as %s instead of %s: a scale layout "
                   "mismatch (rel %.3g)",
                   ref_name(x), stored == SCALE_LAYOUT_NK ? "[K/32, N]" : "[N, K/32]",
                   stored == SCALE_LAYOUT_NK ? "[N, K/32]" : "[K/32, N]", cm.rel);
}

/* e: sanitized input (and the converse). */
static int try_sanitize(dctx_t *x)
{
    const float *xs = x->d->in->x;
    const int64_t MK = x->M * x->K;
    if (!xs || !x->d->in->weight.packed)
        return 0;
    int64_t bad = 0;
    for (int64_t i = 0; i < MK; i++)
        bad += isfinite(xs[i]) ? 0 : 1;
    if (bad == 0 || (!x->is_source && !x->d->act))
        return 0;
    float *clean = malloc((size_t)MK * sizeof(float)), *deq = NULL;
    if (!clean)
        return kr_fail(x->err, "out of memory in diagnose");
    for (int64_t i = 0; i < MK; i++)
        clean[i] = isfinite(xs[i]) ? xs[i] : 0.0f;
    int result = 0, same = 0, g;
    const int variant = act_kind(x) == ACT_FP8_PER_TOKEN ? (int)kernel_fp8_variant(x)
                                                         : (int)kernel_mxfp4_variant(x);
    const float *A = clean;
    if (!x->is_source) {
        if (!(deq = malloc((size_t)MK * sizeof(float)))) {
            free(clean);
            return kr_fail(x->err, "out of memory in diagnose");
        }
        if (quantize_like(x, clean, variant, deq, &same)) {
            result = -1;
            goto done;
        }
        A = deq;
    }
    if (!same) {
        if ((g = alt_gemm(x, A, &x->d->in->weight)) != 0) {
            result = g < 0 ? -1 : 0;
            goto done;
        }
        tried(x, DIAG_SANITIZED);
        cmp_t cm = compare_region(x->d->out, x->alt, x->M, x->N, 1.0f, NULL, NULL);
        if (explains(x, cm)) {
            result = matched(x, DIAG_SANITIZED, cm.rel,
                             "matches %s on sanitized x: the kernel zeroed non-finite inputs "
                             "(nan_to_num, RADIANCE_MXFP4_SANITIZE) before quantizing (rel %.3g)",
                             ref_name(x), cm.rel);
            goto done;
        }
    }
    /* The converse: the kernel quantized the raw x, the reference's operand was sanitized. */
    if (!x->is_source) {
        if (quantize_like(x, xs, variant, deq, &same)) {
            result = -1;
            goto done;
        }
        if (!same) {
            if ((g = alt_gemm(x, deq, &x->d->in->weight)) != 0) {
                result = g < 0 ? -1 : 0;
                goto done;
            }
            tried(x, DIAG_UNSANITIZED);
            cmp_t cm = compare_region(x->d->out, x->alt, x->M, x->N, 1.0f, NULL, NULL);
            if (explains(x, cm))
                result = matched(x, DIAG_UNSANITIZED, cm.rel,
                                 "matches %s on unsanitized x: the reference's activations were "
                                 "sanitized (non-finite zeroed), the kernel's were not (rel %.3g)",
                                 ref_name(x), cm.rel);
        }
    }
done:
    free(clean);
    free(deq);
    return result;
}

/* f: another activation quantizer. */
static int try_quant_variants(dctx_t *x)
{
    if (x->is_source || !x->d->act || !x->d->in->x || !x->d->in->weight.packed)
        return 0;
    const int64_t MK = x->M * x->K;
    float *deq = malloc((size_t)MK * sizeof(float));
    if (!deq)
        return kr_fail(x->err, "out of memory in diagnose");
    const int fp8 = act_kind(x) == ACT_FP8_PER_TOKEN;
    static const int fp8_order[] = {FP8_TOKEN_TRACED, FP8_TOKEN_PURE, FP8_TOKEN_RECIPROCAL,
                                    FP8_TOKEN_VLLM};
    static const int mx_order[] = {MXFP4_AITER_EVEN, MXFP4_OCP, MXFP4_CEIL};
    const int *order = fp8 ? fp8_order : mx_order;
    const int count = fp8 ? 4 : 3;
    int result = 0;
    for (int i = 0; i < count && result == 0; i++) {
        int same = 0;
        if (quantize_like(x, x->d->in->x, order[i], deq, &same)) {
            result = -1;
            break;
        }
        if (same)
            continue;       /* that is the reference's own quantizer */
        int g = alt_gemm(x, deq, &x->d->in->weight);
        if (g) {
            result = g < 0 ? -1 : 0;
            break;
        }
        tried(x, DIAG_QUANT_VARIANT);
        cmp_t cm = compare_region(x->d->out, x->alt, x->M, x->N, 1.0f, NULL, NULL);
        if (explains(x, cm)) {
            char refq[64];
            reference_quantizer(x, refq, sizeof refq);
            const char *name = fp8 ? fp8_token_variant_name((fp8_token_variant_t)order[i])
                                   : mxfp4_variant_name((mxfp4_variant_t)order[i]);
            result = matched(x, DIAG_QUANT_VARIANT, cm.rel,
                             "activations were quantized with '%s', not %s: the output matches %s "
                             "built from x quantized '%s' (rel %.3g)",
                             name, refq, ref_name(x), name, cm.rel);
        }
    }
    free(deq);
    return result;
}

int diagnose(const diag_input_t *d, diag_result_t *r, kr_error_t *err)
{
    memset(r, 0, sizeof *r);
    r->hypothesis = DIAG_NONE;
    const kernel_inputs_t *in = d->in;
    if (!in || !d->out || !d->ref)
        return kr_fail(err, "diagnose: missing inputs, output or reference");
    dctx_t x = {.d = d, .r = r, .err = err, .M = in->M, .N = in->N, .K = in->K,
                .thr = d->threshold};
    x.base = compare_region(d->out, d->ref, x.M, x.N, 1.0f, NULL, NULL);
    r->base_rel = x.base.rel;
    r->base_nonfinite_mismatch = x.base.nf_mismatch;
    r->rel = x.base.rel;
    if (good(&x, x.base)) {
        r->hypothesis = DIAG_CLEAN;
        snprintf(r->line, sizeof r->line, "no hypothesis needed: rel %.3g <= %.3g against %s",
                 x.base.rel, x.thr, ref_name(&x));
        return 0;
    }
    x.is_source = d->ref_name && strcmp(d->ref_name, "R_source") == 0;
    x.A = x.is_source ? in->x : (d->act ? d->act->dequant : NULL);
    x.alt = malloc((size_t)x.M * (size_t)x.N * sizeof(float));
    if (!x.alt)
        return kr_fail(err, "out of memory in diagnose");

    int (*const order[])(dctx_t *) = {
        try_rows_poisoned, try_scale, try_columns, try_wperm, try_scale_layout,
        try_sanitize, try_quant_variants, try_rows,
    };
    int status = 0;
    for (size_t i = 0; i < sizeof order / sizeof order[0] && status == 0; i++)
        status = order[i](&x);
    free(x.alt);
    if (status < 0)
        return -1;
    if (!r->matched) {
        int len = snprintf(r->line, sizeof r->line,
                           "no hypothesis matches (rel %.3g, %lld non-finite mismatches against %s; "
                           "tried %s)",
                           x.base.rel, (long long)x.base.nf_mismatch, ref_name(&x),
                           x.tried[0] ? x.tried : "nothing");
        if (x.budget_hit && len > 0 && len < (int)sizeof r->line)
            snprintf(r->line + len, sizeof r->line - (size_t)len, "; GEMM budget of %d spent",
                     d->max_gemms);
    }
    return 0;
}
