#include "diagnose.h"

#include "diagnosis/diag_ctx.h"
#include "kr_string.h"

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

int diag_wanted(verdict_t v)
{
    return v == VERDICT_WRONG || v == VERDICT_MAGNITUDE || v == VERDICT_NONFINITE_OUT ||
           v == VERDICT_POISONED_INPUT;
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
    /* The kernel's own operands where the reference is built from them: x may
     * hold NaN its quantizer mapped to finite codes (those rows are judged). */
    const float *src = !x->is_source && x->d->act && x->d->act->dequant ? x->d->act->dequant
                       : in->x ? in->x : (x->d->act ? x->d->act->dequant : NULL);
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

/* Where the input's poison is, as `inspect` names it: " (x: rows 0-16 x
 * columns 128-255 (17 x 128 = 2176 NaN))", the first block and how many
 * more; "" when x is absent or the map cannot be made. */
static void poison_blocks(const dctx_t *x, char *buf, int cap)
{
    buf[0] = '\0';
    const float *src = x->d->in->x;
    if (!src)
        return;
    input_map_t map;
    kr_error_t err = {{0}};
    if (input_map_compute(src, x->M, x->K, &map, &err))
        return;
    if (map.blocks_stored > 0 && map.blocks) {
        char block[128];
        nf_block_describe(&map.blocks[0], block, sizeof block);
        if (map.block_count > 1)
            snprintf(buf, (size_t)cap, " (x: %s and %lld more blocks)", block,
                     (long long)(map.block_count - 1));
        else
            snprintf(buf, (size_t)cap, " (x: %s)", block);
    }
    input_map_free(&map);
}

/* A row that agrees with its reference on a poisoned case: where the poison
 * is, and that the output and the reference are non-finite on exactly the
 * poisoned rows.  Matches only then (a diagnosis that blames no one). */
static int try_poison_agreed(dctx_t *x)
{
    const int64_t M = x->M, N = x->N;
    unsigned char *in_bad = malloc((size_t)M), *both = calloc((size_t)M, 1);
    if (!in_bad || !both) {
        free(in_bad);
        free(both);
        return kr_fail(x->err, "out of memory in diagnose");
    }
    int nan_only, result = 0;
    const int64_t n_in = input_bad_rows(x, in_bad, &nan_only);
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N && !both[m]; n++)
            both[m] = !isfinite(x->d->out[m * N + n]) && !isfinite(x->d->ref[m * N + n]);
    if (n_in > 0 && n_in < M && memcmp(both, in_bad, (size_t)M) == 0) {
        char rows[128], where[192];
        index_ranges_format_from(in_bad, M, x->d->row_offset, 6, rows, sizeof rows);
        poison_blocks(x, where, sizeof where);
        const cmp_t rest = diag_compare(x->d->out, x->d->ref, M, N, 1.0f, in_bad, NULL);
        result = diag_matched(x, DIAG_ROWS_POISONED, rest.rel,
                              "not the kernel: rows %s%s have %s input, and the output and %s "
                              "are non-finite on exactly those rows (the quantizer propagates "
                              "it); the finite rows match %s (rel %.3g)",
                              rows, where, nan_only ? "NaN" : "non-finite", diag_ref_name(x),
                              diag_ref_name(x), rest.rel);
    }
    free(in_bad);
    free(both);
    return result;
}

/* Whether the kernel's own operands carry the poison: a non-finite x_scale
 * on one of the rows in mask. */
static int handed_nonfinite_scale(const dctx_t *x, const unsigned char *mask)
{
    for (int64_t m = 0; m < x->M; m++)
        if (mask[m] && !isfinite(x->d->act->token_scale[m]))
            return 1;
    return 0;
}

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
        diag_tried(x, diag_hypothesis_name(DIAG_ROWS_POISONED));
    const int out_rows_match = n_out > 0 && memcmp(out_bad, in_bad, (size_t)M) == 0;
    const int ref_rows_match = !out_rows_match && n_out == 0 && n_ref > 0 &&
                               memcmp(ref_bad, in_bad, (size_t)M) == 0;
    if (n_in > 0 && (out_rows_match || ref_rows_match)) {
        char rows[128], rest[96] = "", extra[256] = "", where[192];
        index_ranges_format_from(in_bad, M, x->d->row_offset, 6, rows, sizeof rows);
        poison_blocks(x, where, sizeof where);
        cmp_t others = diag_compare(out, ref, M, N, 1.0f, in_bad, NULL);
        double rel = others.rel;
        if (others.finite > 0)
            snprintf(rest, sizeof rest, "; the other rows %s %s (rel %.3g)",
                     diag_good(x, others) ? "match" : "do NOT match", diag_ref_name(x), others.rel);
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
                    (g = diag_alt_gemm(x, deq, &x->d->in->weight)) == 0) {
                    cmp_t c = diag_compare(out, x->alt, M, N, 1.0f, NULL, NULL);
                    if (diag_good(x, c)) {
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
            if (others.finite == 0 || diag_good(x, others))
                result = diag_matched(x, DIAG_ROWS_POISONED, rel,
                                      "%s rows %s of the output are exactly the rows with %s "
                                      "input: %s%s%s; the poison%s",
                                      out_nan_only ? "NaN" : "non-finite", rows, in_kind, how,
                                      rest, extra, where[0] ? where : " is in x");
            else    /* the poisoned part is explained; the finite part is diagnosed on its own */
                if (snprintf(x->prefix, sizeof x->prefix,
                             "rows %s: %s input%s, %s output (propagated); on the finite rows: ",
                             rows, in_kind, where, out_nan_only ? "NaN" : "non-finite") < 0)
                    x->prefix[0] = '\0';
        } else if (others.finite > 0 && !diag_good(x, others)) {
            snprintf(x->prefix, sizeof x->prefix,
                     "rows %s: %s input, finite output (the quantizer mapped it to finite "
                     "codes); on the finite rows: ",
                     rows, in_kind);
        } else if (!x->is_source && act) {
            /* The reference is built from the kernel's own operands: they give
             * the poison, and the kernel wrote finite values in its place. */
            char content[160];
            int64_t r0 = 0;
            while (r0 < M && !in_bad[r0])
                r0++;
            int64_t r1 = r0;
            while (r1 + 1 < M && in_bad[r1 + 1])
                r1++;
            diag_region_content(x, r0, r1, 0, N - 1, content, sizeof content);
            if (strncmp(content, "rel ", 4) == 0)
                snprintf(content, sizeof content, "finite");
            const int scale_bad = act->kind == ACT_FP8_PER_TOKEN && act->token_scale &&
                                  handed_nonfinite_scale(x, in_bad);
            result = diag_matched(x, DIAG_REF_ROWS_POISONED, rel,
                                  "rows %s%s: the operands give %s (%s: %s), the kernel wrote finite "
                                  "values there (%s) where %s is non-finite: poison masked%s",
                                  rows, where, in_kind, act->origin,
                                  scale_bad ? "non-finite x_scale" : "non-finite operands", content,
                                  diag_ref_name(x), rest);
        } else {
            result = diag_matched(x, DIAG_REF_ROWS_POISONED, rel,
                             "%s is non-finite on rows %s, exactly the rows with %s input (the fp32 "
                             "GEMM propagates it), while the output is finite there: the kernel's "
                             "activations (%s) hold finite codes on those rows%s",
                             diag_ref_name(x), rows, in_kind,
                             act ? act->origin : "not recorded", rest);
        }
    }
    if (result == 0 && n_in > 0 && n_in < M && !x->prefix[0]) {
        char rows[96];
        index_ranges_format_from(in_bad, M, x->d->row_offset, 6, rows, sizeof rows);
        snprintf(x->prefix, sizeof x->prefix, "rows %s: %s input, judged apart; on the finite rows: ",
                 rows, in_nan_only ? "NaN" : "non-finite");
    }
done:
    /* Rows with non-finite input are left out of every hypothesis about the kernel. */
    if (result == 0 && n_in > 0 && n_in < M) {
        x->poisoned_rows = in_bad;
        x->poisoned_count = n_in;
        in_bad = NULL;
    }
    free(in_bad);
    free(out_bad);
    free(ref_bad);
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
    if (!weight_usable(x) || x->N % 16 || x->K % 16 || diag_gemm_too_big(x))
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
        int g = diag_alt_gemm(x, x->A, &alt_w);
        if (g < 0)
            result = -1;
        if (g)
            break;
        diag_tried(x, diag_hypothesis_name(h));
        cmp_t cm = diag_compare(x->d->out, x->alt, x->M, x->N, 1.0f, NULL, NULL);
        if (!diag_explains(x, cm))
            continue;
        /* [pass][case_side]: the kernel misread its weight, or the case is mislabelled. */
        static const char *const what[2][2] = {
            {"with WPERM undone", "on unpermute_w(W)"}, {"on permute_w(W)", "on permute_w(W)"}};
        static const char *const why[2][2] = {
            {"the kernel read checkpoint-order weights as fragment order (WPERM flag mismatch)",
             "the case's weight is in fragment order but not marked so; the reference read "
             "permuted weights"},
            {"the kernel read fragment-order weights as checkpoint order (WPERM flag mismatch)",
             "the case's weight is marked fragment order but is in checkpoint order; the "
             "reference unpermuted a weight that was never permuted"}};
        const int case_side =
            recorded || (pass == 0 ? c && c->weight_order == WEIGHT_ORDER_CHECKPOINT &&
                                         env_has(c, "RADIANCE_MXFP4_WPERM=1")
                                   : c && c->weight_order == WEIGHT_ORDER_FRAGMENT);
        result = diag_matched(x, h, cm.rel, "matches %s %s: %s (rel %.3g)", diag_ref_name(x),
                              what[pass][case_side ? 0 : 1], why[pass][case_side], cm.rel);
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
    int g = diag_alt_gemm(x, x->A, &alt_w);
    if (g)
        return g < 0 ? -1 : 0;
    diag_tried(x, diag_hypothesis_name(DIAG_SCALE_LAYOUT));
    cmp_t cm = diag_compare(x->d->out, x->alt, x->M, x->N, 1.0f, NULL, NULL);
    if (!diag_explains(x, cm))
        return 0;
    return diag_matched(x, DIAG_SCALE_LAYOUT, cm.rel,
                   "matches %s with the scales read as %s instead of %s: a scale layout "
                   "mismatch (rel %.3g)",
                   diag_ref_name(x), stored == SCALE_LAYOUT_NK ? "[K/32, N]" : "[N, K/32]",
                   stored == SCALE_LAYOUT_NK ? "[N, K/32]" : "[K/32, N]", cm.rel);
}

/* One side of e: the reference GEMM on operand A, tried as h (whose name is
 * the x that A came from), recorded with why when it explains the output.
 * 1 when that decides e (*result set: a match, an error, or nothing to
 * compare), 0 to go on. */
static int try_sanitize_side(dctx_t *x, const float *A, diag_hypothesis_t h, const char *why, int *result)
{
    const int g = diag_alt_gemm(x, A, &x->d->in->weight);
    if (g != 0) {
        *result = g < 0 ? -1 : 0;
        return 1;
    }
    diag_tried(x, diag_hypothesis_name(h));
    cmp_t cm = diag_compare(x->d->out, x->alt, x->M, x->N, 1.0f, NULL, NULL);
    if (!diag_explains(x, cm))
        return 0;
    *result = diag_matched(x, h, cm.rel, "matches %s on %s x: %s (rel %.3g)", diag_ref_name(x),
                           diag_hypothesis_name(h), why, cm.rel);
    return 1;
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
    int result = 0, same = 0;
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
    if (!same && try_sanitize_side(x, A, DIAG_SANITIZED,
                                   "the kernel zeroed non-finite inputs (nan_to_num, "
                                   "RADIANCE_MXFP4_SANITIZE) before quantizing",
                                   &result))
        goto done;
    /* The converse: the kernel quantized the raw x, the reference's operand was sanitized. */
    if (!x->is_source) {
        if (quantize_like(x, xs, variant, deq, &same)) {
            result = -1;
            goto done;
        }
        if (!same)
            try_sanitize_side(x, deq, DIAG_UNSANITIZED,
                              "the reference's activations were sanitized (non-finite zeroed), the "
                              "kernel's were not",
                              &result);
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
        int g = diag_alt_gemm(x, deq, &x->d->in->weight);
        if (g) {
            result = g < 0 ? -1 : 0;
            break;
        }
        diag_tried(x, diag_hypothesis_name(DIAG_QUANT_VARIANT));
        cmp_t cm = diag_compare(x->d->out, x->alt, x->M, x->N, 1.0f, NULL, NULL);
        if (diag_explains(x, cm)) {
            char refq[64];
            reference_quantizer(x, refq, sizeof refq);
            const char *name = fp8 ? fp8_token_variant_name((fp8_token_variant_t)order[i])
                                   : mxfp4_variant_name((mxfp4_variant_t)order[i]);
            result = diag_matched(x, DIAG_QUANT_VARIANT, cm.rel,
                             "activations were quantized with '%s', not %s: the output matches %s "
                             "built from x quantized '%s' (rel %.3g)",
                             name, refq, diag_ref_name(x), name, cm.rel);
        }
    }
    free(deq);
    return result;
}

/* A row whose output is within the threshold of its reference: what its
 * poisoned rows did, a reduced-precision accumulation, a composition of the
 * grammar (its fine ones: roundings), a place (a worst row under a passing
 * whole); when the row failed (another rule: the fp32 bound, a rounding
 * bias, the worst row, identical or max_ulp) and none of those reproduces
 * it, what is known for certain; else nothing is needed. */
static int diagnose_close(dctx_t *x)
{
    diag_result_t *r = x->r;
    int (*const close_order[])(dctx_t *) = {try_poison_agreed, diag_try_acc_precision, diag_try_grammar,
                                             diag_try_localise_any};
    const size_t count = x->d->failed ? sizeof close_order / sizeof close_order[0] : 2;
    for (size_t i = 0; i < count && !r->matched; i++)
        if (close_order[i](x) < 0)
            return -1;
    if (r->matched) {
        r->verdict_hint = r->hypothesis == DIAG_ROWS_POISONED ? VERDICT_COUNT : diag_verdict_hint(r);
        return 0;
    }
    if (x->d->failed) {
        r->checked = 0;
        return diag_facts(x, r->line, sizeof r->line);
    }
    r->hypothesis = DIAG_CLEAN;
    snprintf(r->line, sizeof r->line, "no hypothesis needed: rel %.3g <= %.3g against %s", x->base.rel, x->thr,
             diag_ref_name(x));
    return 0;
}

int diagnose(const diag_input_t *d, diag_result_t *r, kr_error_t *err)
{
    memset(r, 0, sizeof *r);
    r->hypothesis = DIAG_NONE;
    r->verdict_hint = VERDICT_COUNT;
    const kernel_inputs_t *in = d->in;
    if (!in || !d->out || !d->ref)
        return kr_fail(err, "diagnose: missing inputs, output or reference");
    dctx_t x = {.d = d, .r = r, .err = err, .M = in->M, .N = in->N, .K = in->K,
                .thr = d->threshold};
    x.base = diag_compare(d->out, d->ref, x.M, x.N, 1.0f, NULL, NULL);
    r->base_rel = x.base.rel;
    r->base_nonfinite_mismatch = x.base.nf_mismatch;
    r->rel = x.base.rel;
    x.is_source = d->ref_name && strcmp(d->ref_name, "R_source") == 0;
    x.A = x.is_source ? in->x : (d->act ? d->act->dequant : NULL);
    /* Every family writes its alternative output here, the ones a row close
     * to its reference tries too (places among them). */
    x.alt = malloc((size_t)x.M * (size_t)x.N * sizeof(float));
    if (!x.alt)
        return kr_fail(err, "out of memory in diagnose");
    if (diag_good(&x, x.base)) {
        const int close = diagnose_close(&x);
        free(x.alt);
        return close;
    }

    int status = try_rows_poisoned(&x) < 0 ? -1 : 0;
    int finite_part_clean = 0;
    if (status == 0 && !r->matched && x.poisoned_rows) {
        const cmp_t judged = diag_compare_judged(&x, d->ref, 1.0f);
        finite_part_clean = diag_good(&x, judged);
        if (!finite_part_clean)
            x.base = judged;
    }
    /* Cheap, exact hypotheses first (a factor, a place with a telling content,
     * a K block), then the operand misreads on a sample, the ones that cost a
     * GEMM each, and last a place whose content says nothing more than "wrong".
     * When only the poisoned rows disagree, only the hypotheses about what
     * was done to the poisoned input are left. */
    int (*const order[])(dctx_t *) = {
        diag_try_magnitude, diag_try_acc_precision, diag_try_localise, diag_try_k_blocks,
        try_wperm, try_scale_layout, diag_try_grammar, try_sanitize, try_quant_variants,
        diag_try_localise_any,
    };
    int (*const poisoned_order[])(dctx_t *) = {try_wperm, try_scale_layout, try_sanitize,
                                               try_quant_variants};
    /* A reference that is not built from the kernel's operands (R_sanitized,
     * a recorded one) is only a bound on a poisoned case, not a model of the
     * kernel: what the poisoned rows did is all that is said against it. */
    const int rebuildable = !d->ref_name || strcmp(d->ref_name, "R_exact") == 0 ||
                            strcmp(d->ref_name, "R_source") == 0;
    int (*const *families)(dctx_t *) = order;
    size_t count = sizeof order / sizeof order[0];
    if (!rebuildable) {
        count = 0;
    } else if (finite_part_clean) {
        families = poisoned_order;
        count = sizeof poisoned_order / sizeof poisoned_order[0];
    }
    diag_result_t place = {0}, k_fit = {0};
    for (size_t i = 0; i < count && status == 0 && !r->matched; i++) {
        status = families[i](&x) < 0 ? -1 : 0;
        /* A place (rows, columns, tiles) says where, not why: when a later
         * hypothesis explains every element, it wins.  A least-squares fit
         * of K blocks says which blocks, to a residual: a composition of the
         * grammar that reproduces the output bit for bit says it better, so
         * the fit waits for the grammar (and outranks a place). */
        if (status == 0 && r->matched && r->hypothesis == DIAG_K_BLOCKS && !k_fit.matched) {
            k_fit = *r;
            r->matched = 0;
            r->hypothesis = DIAG_NONE;
        } else if (status == 0 && r->matched && !place.matched &&
                   (r->hypothesis == DIAG_ROWS || r->hypothesis == DIAG_COLUMNS ||
                    (r->hypothesis == DIAG_TILES && !strstr(r->line, "transposed")))) {
            place = *r;
            x.place_checked = r->checked;
            r->matched = 0;
            r->hypothesis = DIAG_NONE;
        }
        if (k_fit.matched && families[i] == diag_try_grammar)
            break;
    }
    if (status == 0 && !r->matched && (k_fit.matched || place.matched)) {
        const int gemms = r->gemms;
        *r = k_fit.matched ? k_fit : place;
        r->gemms = gemms;
    }
    if (finite_part_clean && !r->matched)
        snprintf(x.prefix, sizeof x.prefix, "the finite rows match %s; the rows with non-finite "
                 "input do not: ", diag_ref_name(&x));
    free(x.alt);
    if (status == 0 && !r->matched) {
        r->checked = 0;
        status = diag_facts(&x, r->line, sizeof r->line);
    }
    free(x.poisoned_rows);
    if (status < 0)
        return -1;
    if (x.budget_hit && !r->checked) {
        const size_t len = strlen(r->line);
        snprintf(r->line + len, sizeof r->line - len, "; GEMM budget of %d spent", d->max_gemms);
    }
    if (r->matched && x.prefix[0]) {
        char line[sizeof r->line];
        kr_strlcpy(line, x.prefix, sizeof line);
        const size_t len = strlen(line);
        kr_strlcpy(line + len, r->line, sizeof line - len);
        memcpy(r->line, line, sizeof line);
    }
    r->verdict_hint = diag_verdict_hint(r);
    return 0;
}

void diag_no_output_line(verdict_t v, char *buf, int cap)
{
    const char *what = NULL;
    switch (v) {
    case VERDICT_CRASHED: what = "no output to test a hypothesis on: the kernel crashed (the note says how)"; break;
    case VERDICT_TIMEOUT: what = "no output to test a hypothesis on: the kernel did not finish in time"; break;
    case VERDICT_OOB_WRITE:
        what = "the kernel wrote outside its output (the note says where)";
        break;
    case VERDICT_NONDETERMINISTIC:
        what = "reruns on the same operands differ (the note says where): the output is not a function of "
               "the operands";
        break;
    case VERDICT_ERROR: what = "no output to test a hypothesis on: the kernel failed (the note says why)"; break;
    default: break;
    }
    snprintf(buf, (size_t)cap, "%s", what && verdict_is_failure(v) ? what : "");
}

verdict_t diag_verdict_hint(const diag_result_t *r)
{
    if (!r->matched)
        return VERDICT_COUNT;
    /* A factor explains the row: the verdict is MAGNITUDE whatever |out|/|ref|
     * came out as; an explanation that is not a factor is WRONG. */
    if (r->hypothesis == DIAG_SCALE_POW2 || r->hypothesis == DIAG_SCALE_CONST)
        return VERDICT_MAGNITUDE;
    if (r->hypothesis == DIAG_MISREAD || r->hypothesis == DIAG_K_BLOCKS || r->hypothesis == DIAG_GRAMMAR ||
        r->hypothesis == DIAG_WPERM_UNDONE || r->hypothesis == DIAG_WPERM_APPLIED ||
        r->hypothesis == DIAG_SCALE_LAYOUT || r->hypothesis == DIAG_ACC_PRECISION)
        return VERDICT_WRONG;
    return VERDICT_COUNT;
}

verdict_t diag_refine_verdict(const diag_result_t *r, verdict_t v)
{
    if ((v == VERDICT_WRONG || v == VERDICT_MAGNITUDE) && r->verdict_hint != VERDICT_COUNT)
        return r->verdict_hint;
    return v;
}
