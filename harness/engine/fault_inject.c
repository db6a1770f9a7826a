#include "fault_inject.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats.h"
#include "kr_string.h"
#include "mxfp4_weight.h"
#include "quant_fp8.h"
#include "quant_mxfp4.h"

typedef struct {
    const char *name;
    int takes_param;        /* 0 none, 1 number, 2 variant name */
    double default_param;
    const char *what;
} fault_info_t;

static const fault_info_t fault_table[FAULT_COUNT] = {
    [FAULT_NONE] = {"none", 0, 0, "no fault"},
    [FAULT_WPERM_READ] = {"wperm", 0, 0,
                          "the kernel reads checkpoint-order weights as fragment order "
                          "(computes on unpermute_w(W))"},
    [FAULT_WPERM_INVERSE] = {"wperm-inverse", 0, 0,
                             "the kernel reads fragment-order weights as checkpoint order "
                             "(computes on permute_w(W))"},
    [FAULT_SCALE_LAYOUT] = {"scale-layout", 0, 0,
                            "the weight scales are read in the other layout "
                            "([N, K/32] <-> [K/32, N])"},
    [FAULT_SCALE_POW2] = {"scale-pow2", 1, 1, "every weight block exponent off by k"},
    [FAULT_SCALE_CONST] = {"scale-const", 1, 1.0 / 35.0, "the output multiplied by c"},
    [FAULT_SANITIZE] = {"sanitize", 0, 0, "the kernel quantizes nan_to_num(x): non-finite -> 0"},
    [FAULT_QUANT_VARIANT] = {"quant-variant", 2, 0,
                             "the kernel quantizes x with another variant "
                             "(default traced for fp8, ocp for mxfp4)"},
    [FAULT_TILE_UNWRITTEN] = {"tile-unwritten", 1, 32,
                              "the last N tile of width T never written (NaN 0xFFFF)"},
    [FAULT_TILE_ZEROS] = {"tile-zeros", 1, 32, "the last N tile of width T written as zeros"},
    [FAULT_ROWS_NAN] = {"rows-nan", 1, 1,
                        "output rows with non-finite input become NaN (else rows 0..r-1)"},
    [FAULT_ULP_NUDGE] = {"ulp-nudge", 1, 0.01,
                         "a fraction p of the outputs moved one bf16 ULP away from zero"},
    [FAULT_TILE_SCALE] = {"tile-scale", 1, 2.0, "one 16 x 32 output tile multiplied by c"},
};

const char *fault_name(fault_kind_t k)
{
    return (unsigned)k < FAULT_COUNT ? fault_table[k].name : NULL;
}

const char *fault_usage(void)
{
    return "  wperm              the kernel reads checkpoint-order weights as fragment order\n"
           "  wperm-inverse      the kernel reads fragment-order weights as checkpoint order\n"
           "  scale-layout       weight scales read as [K/32, N] instead of [N, K/32] (or back)\n"
           "  scale-pow2[:k]     every weight block exponent off by k (default 1)\n"
           "  scale-const[:c]    output multiplied by c (default 1/35)\n"
           "  sanitize           the kernel zeroes non-finite x before quantizing\n"
           "  quant-variant[:v]  x quantized with variant v (traced, pure, reciprocal, vllm,\n"
           "                     aiter-even, ocp, ceil; default traced / ocp)\n"
           "  tile-unwritten[:T] last N tile of width T (default 32) left as NaN poison\n"
           "  ulp-nudge[:p]      a fraction p (default 0.01) of outputs moved by one bf16 ULP\n"
           "  tile-scale[:c]     one 16 x 32 output tile multiplied by c (default 2)\n"
           "  tile-zeros[:T]     last N tile of width T written as zeros\n"
           "  rows-nan[:r]       rows with non-finite input become NaN (else rows 0..r-1)\n";
}

static int known_variant(const char *v)
{
    fp8_token_variant_t f;
    mxfp4_variant_t m;
    return fp8_token_variant_from_name(v, &f) == 0 || mxfp4_variant_from_name(v, &m) == 0;
}

int fault_parse(const char *spec, fault_t *f, kr_error_t *err)
{
    memset(f, 0, sizeof *f);
    if (!spec || !*spec)
        return kr_fail(err, "--inject: empty fault (known: wperm, wperm-inverse, scale-layout, "
                            "scale-pow2, scale-const, sanitize, quant-variant, tile-unwritten, "
                            "tile-zeros, rows-nan)");
    char name[64];
    const char *colon = strchr(spec, ':');
    size_t nlen = colon ? (size_t)(colon - spec) : strlen(spec);
    if (nlen >= sizeof name)
        nlen = sizeof name - 1;
    memcpy(name, spec, nlen);
    name[nlen] = '\0';
    const char *param = colon ? colon + 1 : NULL;
    for (int k = 1; k < FAULT_COUNT; k++) {
        const fault_info_t *fi = &fault_table[k];
        if (strcmp(name, fi->name) != 0)
            continue;
        f->kind = (fault_kind_t)k;
        f->param = fi->default_param;
        if (param && fi->takes_param == 0)
            return kr_fail(err, "--inject %s: this fault takes no parameter", spec);
        if (param && fi->takes_param == 2) {
            if (!known_variant(param))
                return kr_fail(err, "--inject %s: unknown quantizer variant '%s' (fp8: vllm, "
                                    "traced, pure, reciprocal; mxfp4: aiter-even, ocp, ceil)",
                               spec, param);
            kr_strlcpy(f->variant, param, sizeof f->variant);
        } else if (param) {
            char *end = NULL;
            double v = strtod(param, &end);
            if (!*param || *end || !isfinite(v))
                return kr_fail(err, "--inject %s: '%s' is not a number", spec, param);
            if (f->kind == FAULT_SCALE_POW2 && (v != floor(v) || fabs(v) > 64 || v == 0))
                return kr_fail(err, "--inject %s: k must be a nonzero integer in [-64, 64]", spec);
            if (f->kind == FAULT_SCALE_CONST && !(v > 0))
                return kr_fail(err, "--inject %s: c must be positive", spec);
            if ((f->kind == FAULT_TILE_UNWRITTEN || f->kind == FAULT_TILE_ZEROS ||
                 f->kind == FAULT_ROWS_NAN) &&
                (v != floor(v) || v < 1 || v > 65536))
                return kr_fail(err, "--inject %s: expected a positive integer", spec);
            if (f->kind == FAULT_ULP_NUDGE && !(v > 0 && v <= 1))
                return kr_fail(err, "--inject %s: p must be in (0, 1]", spec);
            if (f->kind == FAULT_TILE_SCALE && !(v > 0))
                return kr_fail(err, "--inject %s: c must be positive", spec);
            f->param = v;
        }
        return 0;
    }
    return kr_fail(err, "--inject %s: unknown fault '%s' (known: wperm, wperm-inverse, "
                        "scale-layout, scale-pow2[:k], scale-const[:c], sanitize, "
                        "quant-variant[:v], tile-unwritten[:T], tile-zeros[:T], rows-nan[:r], ulp-nudge[:p], "
                        "tile-scale[:c])",
                   spec, name);
}

void fault_describe(const fault_t *f, char *buf, int cap)
{
    const char *name = fault_name(f->kind);
    if (!name) {
        snprintf(buf, (size_t)cap, "unknown fault");
        return;
    }
    const fault_info_t *fi = &fault_table[f->kind];
    if (fi->takes_param == 1)
        snprintf(buf, (size_t)cap, "%s:%g (%s)", name, f->param, fi->what);
    else if (fi->takes_param == 2)
        snprintf(buf, (size_t)cap, "%s:%s (%s)", name, f->variant[0] ? f->variant : "default",
                 fi->what);
    else
        snprintf(buf, (size_t)cap, "%s (%s)", name, fi->what);
}

void fault_inputs_free(fault_inputs_t *fi)
{
    free(fi->weight_owned);
    free(fi->scales_owned);
    free(fi->x_owned);
    memset(fi, 0, sizeof *fi);
}

int fault_inputs_apply(const fault_t *f, const kernel_inputs_t *in, const kernel_options_t *opt,
                       fault_inputs_t *fi, kr_error_t *err)
{
    memset(fi, 0, sizeof *fi);
    fi->in = *in;
    fi->opt = *opt;
    const int64_t N = in->N, K = in->K;
    const size_t wbytes = (size_t)N * (size_t)(K / 2), sbytes = (size_t)N * (size_t)(K / 32);
    const int needs_weight = f->kind == FAULT_WPERM_READ || f->kind == FAULT_WPERM_INVERSE ||
                             f->kind == FAULT_SCALE_LAYOUT || f->kind == FAULT_SCALE_POW2;
    if (needs_weight && (!in->weight.packed || !in->weight.scales))
        return kr_fail(err, "fault %s needs an MXFP4 weight", fault_name(f->kind));
    switch (f->kind) {
    case FAULT_WPERM_READ:
    case FAULT_WPERM_INVERSE:
        if (N % 16 || K % 16)
            return kr_fail(err, "fault %s needs N and K divisible by 16 (N=%lld K=%lld)",
                           fault_name(f->kind), (long long)N, (long long)K);
        if (!(fi->weight_owned = malloc(wbytes)))
            return kr_fail(err, "out of memory injecting %s", fault_name(f->kind));
        if (f->kind == FAULT_WPERM_READ)
            wperm_unpermute(in->weight.packed, N, K, fi->weight_owned);
        else
            wperm_permute(in->weight.packed, N, K, fi->weight_owned);
        fi->in.weight.packed = fi->weight_owned;
        break;
    case FAULT_SCALE_LAYOUT:
        fi->in.weight.layout =
            in->weight.layout == SCALE_LAYOUT_NK ? SCALE_LAYOUT_KN : SCALE_LAYOUT_NK;
        break;
    case FAULT_SCALE_POW2: {
        if (!(fi->scales_owned = malloc(sbytes)))
            return kr_fail(err, "out of memory injecting %s", fault_name(f->kind));
        const int k = (int)f->param;
        for (size_t i = 0; i < sbytes; i++) {
            int e = in->weight.scales[i];
            if (e != 0xFF) {
                e += k;
                e = e < 0 ? 0 : (e > 254 ? 254 : e);
            }
            fi->scales_owned[i] = (uint8_t)e;
        }
        fi->in.weight.scales = fi->scales_owned;
        break;
    }
    case FAULT_SANITIZE: {
        if (!in->x)
            return kr_fail(err, "fault sanitize needs the source activations x");
        const size_t mk = (size_t)in->M * (size_t)K;
        if (!(fi->x_owned = malloc(mk * sizeof(float))))
            return kr_fail(err, "out of memory injecting sanitize");
        for (size_t i = 0; i < mk; i++)
            fi->x_owned[i] = isfinite(in->x[i]) ? in->x[i] : 0.0f;
        fi->in.x = fi->x_owned;
        fi->opt.act_source = ACT_SOURCE_QUANTIZE;
        fi->act_changed = 1;
        break;
    }
    case FAULT_QUANT_VARIANT: {
        if (!in->x)
            return kr_fail(err, "fault quant-variant needs the source activations x");
        fp8_token_variant_t fv;
        mxfp4_variant_t mv;
        if (!f->variant[0]) {
            fi->opt.fp8_variant = FP8_TOKEN_TRACED;
            fi->opt.mxfp4_variant = MXFP4_OCP;
        } else if (fp8_token_variant_from_name(f->variant, &fv) == 0) {
            fi->opt.fp8_variant = fv;
        } else if (mxfp4_variant_from_name(f->variant, &mv) == 0) {
            fi->opt.mxfp4_variant = mv;
        } else {
            return kr_fail(err, "fault quant-variant: unknown variant '%s'", f->variant);
        }
        fi->opt.act_source = ACT_SOURCE_QUANTIZE;
        fi->act_changed = 1;
        break;
    }
    default:
        break;
    }
    return 0;
}

/* Rows whose input is non-finite: from x, else the activations' values. */
static unsigned char *input_bad_rows(const kernel_inputs_t *in, const kernel_act_t *act,
                                     int64_t *count)
{
    const int64_t M = in->M, K = in->K;
    unsigned char *bad = calloc((size_t)M, 1);
    *count = 0;
    if (!bad)
        return NULL;
    for (int64_t m = 0; m < M; m++) {
        int hit = 0;
        if (in->x) {
            for (int64_t k = 0; k < K && !hit; k++)
                hit = !isfinite(in->x[m * K + k]);
        } else if (act && act->dequant) {
            for (int64_t k = 0; k < K && !hit; k++)
                hit = !isfinite(act->dequant[m * K + k]);
        }
        bad[m] = (unsigned char)hit;
        *count += hit;
    }
    return bad;
}

int fault_output_apply(const fault_t *f, const kernel_inputs_t *in, const kernel_act_t *act,
                       uint16_t *out, kr_error_t *err)
{
    const int64_t M = in->M, N = in->N;
    switch (f->kind) {
    case FAULT_SCALE_CONST: {
        const float c = (float)f->param;
        for (int64_t i = 0; i < M * N; i++)
            out[i] = bf16_encode(bf16_decode(out[i]) * c);
        break;
    }
    case FAULT_TILE_UNWRITTEN:
    case FAULT_TILE_ZEROS: {
        const int64_t T = (int64_t)f->param;
        int64_t width = N % T ? N % T : T;
        if (width > N)
            width = N;
        const uint16_t fill = f->kind == FAULT_TILE_UNWRITTEN ? 0xFFFF : 0x0000;
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = N - width; n < N; n++)
                out[m * N + n] = fill;
        break;
    }
    case FAULT_ROWS_NAN: {
        int64_t count;
        unsigned char *bad = input_bad_rows(in, act, &count);
        if (!bad)
            return kr_fail(err, "out of memory injecting rows-nan");
        if (count == 0)
            for (int64_t m = 0; m < M && m < (int64_t)f->param; m++)
                bad[m] = 1;
        for (int64_t m = 0; m < M; m++)
            if (bad[m])
                for (int64_t n = 0; n < N; n++)
                    out[m * N + n] = 0x7FC0;
        free(bad);
        break;
    }
    case FAULT_ULP_NUDGE: {
        /* A fixed multiplicative hash picks the same elements every run. */
        const uint64_t threshold = (uint64_t)(f->param * 4294967296.0);
        for (int64_t i = 0; i < M * N; i++) {
            uint64_t h = ((uint64_t)i * 0x9E3779B97F4A7C15ull) >> 32;
            uint16_t b = out[i];
            if (h < threshold && (b & 0x7F80) != 0x7F80 && (b & 0x7FFF) != 0x7F7F)
                out[i] = (uint16_t)(b + 1); /* magnitude + 1 ULP, sign kept */
        }
        break;
    }
    case FAULT_TILE_SCALE: {
        const float c = (float)f->param;
        for (int64_t m = 0; m < M && m < 16; m++)
            for (int64_t n = 0; n < N && n < 32; n++)
                out[m * N + n] = bf16_encode(bf16_decode(out[m * N + n]) * c);
        break;
    }
    default:
        break;
    }
    return 0;
}

int fault_run_kernel(const fault_t *f, const kernel_desc_t *k, const kernel_inputs_t *in,
                     const kernel_options_t *opt, const kernel_act_t *act, uint16_t *out,
                     kernel_run_info_t *info, kr_error_t *err)
{
    if (!k->run_cpu || !k->prepare_act)
        return kr_fail(err, "kernel %s has no CPU model to inject a fault into", k->name);
    fault_inputs_t fi;
    if (fault_inputs_apply(f, in, opt, &fi, err))
        return -1;
    kernel_act_t own;
    const kernel_act_t *use = act;
    int have_own = 0;
    if (fi.act_changed || !act) {
        if (k->prepare_act(k, &fi.in, &fi.opt, &own, err)) {
            fault_inputs_free(&fi);
            return -1;
        }
        use = &own;
        have_own = 1;
    }
    int rc = k->run_cpu(k, &fi.in, use, &fi.opt, out, info, err);
    if (rc == 0)
        rc = fault_output_apply(f, in, act ? act : use, out, err);
    if (rc == 0 && info) {
        char d[160];
        fault_describe(f, d, sizeof d);
        size_t len = strlen(info->note);
        if (len + 3 < sizeof info->note)
            snprintf(info->note + len, sizeof info->note - len, "%sinjected fault %s",
                     len ? "; " : "", d);
    }
    if (have_own)
        kernel_act_free(&own);
    fault_inputs_free(&fi);
    return rc;
}
