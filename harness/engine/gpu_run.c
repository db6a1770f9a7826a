#include "gpu_run.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats.h"
#include "gpu_backend_info.h"
#include "kr_gpu.h"
#include "kr_string.h"

#define GPU_POISON_BF16 0x7FC1u
#define GPU_POISON_BYTE 0xFF
#define GPU_CANARY_BYTE 0xA5
#define GPU_DECODE_DEFAULT_SPLITS 4

void gpu_run_options_default(gpu_run_options_t *o)
{
    memset(o, 0, sizeof *o);
    o->reruns = 3;
    o->timed_runs = 5;
    o->canary_bytes = 4096;
    o->variant = GPU_VARIANT_SIMT;
}

int gpu_available(char *why, size_t cap)
{
    if (strcmp(kr_gpu_backend(), "none") == 0) {
        snprintf(why, cap, "no GPU support built (KREPLAY_GPU=OFF, or neither hipcc nor nvcc found)");
        return 0;
    }
    int n = 0;
    if (kr_gpu_device_count(&n) != KR_GPU_OK || n <= 0) {
        /* "no ROCm device" / "no CUDA device": which runtime found nothing. */
        snprintf(why, cap, "no %s device (%s)", gpu_backend_platform(), kr_gpu_last_error());
        return 0;
    }
    return 1;
}

typedef enum {
    GK_NONE = 0,
    GK_PERBLOCK,
    GK_FOLDED,
    GK_DECODE,
    GK_W4A4,
    GK_SKINNY,
    GK_QUANT_FP8,
    GK_QUANT_MXFP4,
} gpu_kind_t;

static gpu_kind_t gpu_kind(const char *name)
{
    static const struct { const char *name; gpu_kind_t kind; } table[] = {
        {"w4a8.perblock", GK_PERBLOCK}, {"w4a8.folded", GK_FOLDED},   {"w4a8.decode", GK_DECODE},
        {"w4a4.aiter", GK_W4A4},        {"bf16.skinny", GK_SKINNY},   {"bf16.sequential", GK_SKINNY},
        {"quant.fp8_token", GK_QUANT_FP8}, {"quant.mxfp4", GK_QUANT_MXFP4},
    };
    for (size_t i = 0; name && i < sizeof table / sizeof table[0]; i++)
        if (strcmp(name, table[i].name) == 0)
            return table[i].kind;
    return GK_NONE;
}

int gpu_kernel_supported(const char *name, gpu_variant_t variant)
{
    gpu_kind_t g = gpu_kind(name);
    if (variant == GPU_VARIANT_MATRIX)
        return g == GK_FOLDED;
    return g != GK_NONE;
}

/* Everything one run holds on the device, freed in one place. */
typedef struct {
    void *ptr[24];
    int count;
    kr_gpu_stream_t stream;
    kr_gpu_event_t ev0, ev1;
} gpu_ctx_t;

static int ctx_alloc(gpu_ctx_t *c, void **p, size_t bytes)
{
    *p = NULL;
    if (c->count >= (int)(sizeof c->ptr / sizeof c->ptr[0]))
        return KR_GPU_ERR_ARG;
    int st = kr_gpu_malloc(p, bytes);
    if (st == KR_GPU_OK)
        c->ptr[c->count++] = *p;
    return st;
}

static int ctx_upload(gpu_ctx_t *c, void **p, const void *host, size_t bytes)
{
    int st = ctx_alloc(c, p, bytes);
    return st ? st : kr_gpu_memcpy_h2d(*p, host, bytes);
}

static void ctx_free(gpu_ctx_t *c)
{
    for (int i = 0; i < c->count; i++)
        kr_gpu_free(c->ptr[i]);
    kr_gpu_event_destroy(c->ev0);
    kr_gpu_event_destroy(c->ev1);
    kr_gpu_stream_destroy(c->stream);
    memset(c, 0, sizeof *c);
}

/* The device operands and outputs of one run. */
typedef struct {
    gpu_kind_t kind;
    gpu_variant_t variant;
    const char *fault;
    int64_t M, N, K;
    /* activations */
    const uint8_t *x;
    const float *xs;
    int x_fmt;
    const uint8_t *a_scales;
    const float *xf;
    const uint16_t *x_bf16;
    /* weights */
    kr_gpu_mxfp4_t w;
    const uint8_t *ref;
    const uint8_t *w8;
    const uint8_t *wdec;        /* w4a8.decode: the weight in its warp-contiguous order */
    const uint16_t *w_bf16;
    int splits;
    float *scratch;
    size_t scratch_bytes;
    int *counters;
    int64_t n_counters;
    /* outputs (inside the canaried block) */
    uint8_t *block;             /* canary | output | canary */
    size_t canary, out_bytes;
    uint8_t *out;               /* block + canary */
    void *scale_out;            /* quantizers' second output (not canaried) */
    size_t scale_out_bytes;
} gpu_job_t;

static int job_launch(const gpu_job_t *j, kr_gpu_stream_t s)
{
    if (j->fault)
        return kr_gpu_fault_launch(j->fault, j->x, j->x_fmt, j->xs, j->M, &j->w, j->ref, j->scratch,
                                   j->scratch_bytes, (uint16_t *)j->out, s);
    switch (j->kind) {
    case GK_PERBLOCK:
        return kr_gpu_w4a8_perblock(j->x, j->x_fmt, j->xs, j->M, &j->w, (uint16_t *)j->out, s);
    case GK_FOLDED:
        if (j->variant == GPU_VARIANT_MATRIX) {
            if (strcmp(kr_gpu_backend(), "hip") == 0)
                return kr_gpu_w4a8_wmma_gfx12(j->x, j->xs, j->M, j->w8, j->ref, j->w.e8m0_zero_is_zero,
                                              j->N, j->K, (uint16_t *)j->out, s);
            return kr_gpu_w4a8_mma(j->x, j->xs, j->M, j->w8, j->ref, j->w.e8m0_zero_is_zero, j->N,
                                   j->K, (uint16_t *)j->out, s);
        }
        return kr_gpu_w4a8_folded(j->x, j->x_fmt, j->xs, j->M, &j->w, j->ref, (uint16_t *)j->out, s);
    case GK_DECODE:
        return kr_gpu_w4a8_decode(j->x, j->x_fmt, j->xs, j->M, &j->w, j->wdec, j->ref, j->splits, j->scratch,
                                  j->scratch_bytes, j->counters, j->n_counters, (uint16_t *)j->out, s);
    case GK_W4A4:
        return kr_gpu_w4a4_aiter(j->x, j->a_scales, j->M, &j->w, (uint16_t *)j->out, s);
    case GK_SKINNY:
        return kr_gpu_bf16_skinny(j->x_bf16, j->w_bf16, j->M, j->N, j->K, j->splits,
                                  (uint16_t *)j->out, s);
    case GK_QUANT_FP8:
        return kr_gpu_quant_fp8_token(j->xf, j->M, j->K, j->out, (float *)j->scale_out, s);
    case GK_QUANT_MXFP4:
        return kr_gpu_quant_mxfp4(j->xf, j->M, j->K, j->out, (uint8_t *)j->scale_out, s);
    case GK_NONE:
        break;
    }
    return KR_GPU_ERR_UNSUPPORTED;
}

static int job_poison(const gpu_job_t *j, kr_gpu_stream_t s)
{
    int st;
    if (j->kind == GK_QUANT_FP8 || j->kind == GK_QUANT_MXFP4) {
        st = kr_gpu_memset(j->out, GPU_POISON_BYTE, j->out_bytes, s);
        if (st == KR_GPU_OK)
            st = kr_gpu_memset(j->scale_out, GPU_POISON_BYTE, j->scale_out_bytes, s);
        return st;
    }
    return kr_gpu_fill_u16((uint16_t *)j->out, GPU_POISON_BF16, j->out_bytes / 2, s);
}

/* bf16.skinny's split-K: the skinny dispatch's measured table, as
 * kernels/cpu/bf16_gemm.c models it (keep the two in step), or the
 * decode_splits override.  bf16.sequential is one split.  0: declined. */
static int skinny_splits(const char *name, int64_t N, int64_t K, const kernel_options_t *kopt)
{
    static const struct { int64_t n, k; int sk; } table[] = {
        {256, 2048, 16}, {48, 5120, 8}, {96, 5120, 8}, {1280, 5120, 8}, {256, 5120, 8},
    };
    if (strcmp(name, "bf16.sequential") == 0)
        return 1;
    if (kopt && kopt->decode_splits > 0)
        return K % (16 * (int64_t)kopt->decode_splits) == 0 ? kopt->decode_splits : 0;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (table[i].n == N && table[i].k == K)
            return table[i].sk;
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int fail_row(gpu_run_result_t *res, verdict_t v, kr_error_t *err, const char *what, int st)
{
    res->verdict = v;
    snprintf(res->note, sizeof res->note, "%s: %s%s%s", what, kr_gpu_status_name(st),
             kr_gpu_last_error()[0] ? ": " : "", kr_gpu_last_error());
    return kr_fail(err, "%s", res->note);
}

#define GPU_TRY(expr, what)                                                                  \
    do {                                                                                     \
        int st_ = (expr);                                                                    \
        if (st_ != KR_GPU_OK) {                                                              \
            status = fail_row(res, st_ == KR_GPU_ERR_UNSUPPORTED ? VERDICT_UNSUPPORTED       \
                                                                 : VERDICT_ERROR,            \
                              err, what, st_);                                               \
            goto done;                                                                       \
        }                                                                                    \
    } while (0)

/* Uploads the MXFP4 weight and builds the per-row reference exponents. */
static int upload_weight(gpu_ctx_t *c, const kernel_inputs_t *in, gpu_job_t *j, int need_ref)
{
    const mxfp4_weight_t *w = &in->weight;
    const size_t N = (size_t)in->N, K = (size_t)in->K;
    void *packed, *scales;
    int st = ctx_upload(c, &packed, w->packed, N * K / 2);
    if (st == KR_GPU_OK)
        st = ctx_upload(c, &scales, w->scales, N * K / 32);
    if (st)
        return st;
    j->w = (kr_gpu_mxfp4_t){.packed = packed, .scales = scales,
                            .scale_layout = w->layout == SCALE_LAYOUT_KN ? 1 : 0,
                            .e8m0_zero_is_zero = w->e8m0_mode == E8M0_ZERO_IS_ZERO,
                            .N = in->N, .K = in->K};
    if (!need_ref)
        return KR_GPU_OK;
    void *ref, *case_ref = NULL;
    st = ctx_alloc(c, &ref, N);
    if (st == KR_GPU_OK && in->weight_ref && in->weight_ref_len == in->N)
        st = ctx_upload(c, &case_ref, in->weight_ref, N);
    if (st == KR_GPU_OK)
        st = kr_gpu_w4a8_row_ref(&j->w, case_ref, ref, c->stream);
    j->ref = ref;
    return st;
}

int gpu_run_kernel(const kernel_desc_t *k, const kernel_inputs_t *in, const kernel_act_t *act,
                   const kernel_options_t *kopt, const gpu_run_options_t *opt_in,
                   gpu_run_result_t *res, kr_error_t *err)
{
    gpu_run_options_t opt;
    if (opt_in)
        opt = *opt_in;
    else
        gpu_run_options_default(&opt);
    if (opt.reruns < 1)
        opt.reruns = 1;
    memset(res, 0, sizeof *res);
    res->M = in->M;
    res->N = in->N;
    res->K = in->K;
    res->first_unwritten = -1;
    res->ms_median = res->ms_min = NAN;
    res->tflops = res->gbps = NAN;
    res->verdict = VERDICT_PASS;
    snprintf(res->kernel, sizeof res->kernel, "%s%s%s%s", k ? k->name : "?",
             opt.variant == GPU_VARIANT_MATRIX ? (strcmp(kr_gpu_backend(), "hip") == 0 ? "+wmma" : "+mma") : "",
             opt.fault ? "+fault:" : "", opt.fault ? opt.fault : "");

    gpu_ctx_t c;
    memset(&c, 0, sizeof c);
    gpu_job_t j;
    memset(&j, 0, sizeof j);
    uint8_t *host_block = NULL, *first = NULL, *now = NULL, *first_scale = NULL, *now_scale = NULL;
    double *times = NULL;
    int status = 0;
    char why[256];

    j.kind = gpu_kind(k ? k->name : NULL);
    j.variant = opt.variant;
    j.fault = opt.fault;
    j.M = in->M;
    j.N = in->N;
    j.K = in->K;
    if (j.kind == GK_NONE || !gpu_kernel_supported(k->name, opt.variant) ||
        (opt.fault && j.kind != GK_FOLDED)) {
        res->verdict = VERDICT_UNSUPPORTED;
        snprintf(res->note, sizeof res->note, "no GPU kernel for %s%s", res->kernel,
                 opt.fault ? " (faults run on w4a8.folded)" : "");
        return kr_fail(err, "%s", res->note);
    }
    if (!gpu_available(why, sizeof why)) {
        res->verdict = VERDICT_UNSUPPORTED;
        kr_strlcpy(res->note, why, sizeof res->note);
        return kr_fail(err, "%s", why);
    }
    GPU_TRY(kr_gpu_set_device(opt.device), "set device");
    if (kr_gpu_device_name(opt.device, res->device, sizeof res->device) != KR_GPU_OK)
        kr_strlcpy(res->device, "?", sizeof res->device);
    GPU_TRY(kr_gpu_stream_create(&c.stream), "stream");
    GPU_TRY(kr_gpu_event_create(&c.ev0), "event");
    GPU_TRY(kr_gpu_event_create(&c.ev1), "event");

    const int64_t M = in->M, N = in->N, K = in->K;
    const int is_quant = j.kind == GK_QUANT_FP8 || j.kind == GK_QUANT_MXFP4;
    const int is_w4a8 = j.kind == GK_PERBLOCK || j.kind == GK_FOLDED || j.kind == GK_DECODE;
    void *p;

    /* ---- operands ---- */
    if (is_w4a8 || j.kind == GK_W4A4) {
        if (!act || !act->codes || !in->weight.packed || !in->weight.scales) {
            res->verdict = VERDICT_UNSUPPORTED;
            snprintf(res->note, sizeof res->note, "%s: needs prepared activations and an MXFP4 weight",
                     res->kernel);
            status = kr_fail(err, "%s", res->note);
            goto done;
        }
        GPU_TRY(ctx_upload(&c, &p, act->codes, (size_t)M * (size_t)K), "upload activations");
        j.x = p;
        if (is_w4a8) {
            GPU_TRY(ctx_upload(&c, &p, act->token_scale, (size_t)M * sizeof(float)), "upload x_scale");
            j.xs = p;
            j.x_fmt = act->fp8_format == FP8_E4M3FNUZ ? 1 : 0;
        } else {
            GPU_TRY(ctx_upload(&c, &p, act->block_scale, (size_t)M * (size_t)(K / 32)), "upload scales");
            j.a_scales = p;
        }
        GPU_TRY(upload_weight(&c, in, &j, is_w4a8), "upload weight");
        res->flops = 2.0 * (double)M * (double)N * (double)K;
        res->bytes = (double)M * (double)K + (double)N * (double)K / 2 + (double)N * (double)K / 32 +
                     2.0 * (double)M * (double)N + (is_w4a8 ? 4.0 * (double)M : (double)M * (double)K / 32);
        if (j.kind == GK_FOLDED && opt.variant == GPU_VARIANT_MATRIX) {
            if (j.x_fmt != 0) {
                res->verdict = VERDICT_UNSUPPORTED;
                snprintf(res->note, sizeof res->note, "%s: the matrix units take e4m3fn activations only",
                         res->kernel);
                status = kr_fail(err, "%s", res->note);
                goto done;
            }
            GPU_TRY(ctx_alloc(&c, &p, (size_t)N * (size_t)K), "alloc w8");
            GPU_TRY(kr_gpu_w4a8_preshift(&j.w, j.ref, p, c.stream), "preshift");
            j.w8 = p;
            /* the MMA reads the pre-shifted e4m3 weight: one byte per element */
            res->bytes += (double)N * (double)K / 2 - (double)N * (double)K / 32;
        }
        if (j.kind == GK_DECODE) {
            j.splits = kopt && kopt->decode_splits > 0 ? kopt->decode_splits : GPU_DECODE_DEFAULT_SPLITS;
            j.scratch_bytes = kr_gpu_w4a8_decode_scratch_bytes(M, N, j.splits);
            j.n_counters = kr_gpu_w4a8_decode_counters(N);
            GPU_TRY(ctx_alloc(&c, &p, j.scratch_bytes), "alloc split-K scratch");
            j.scratch = p;
            GPU_TRY(ctx_alloc(&c, &p, (size_t)j.n_counters * sizeof(int)), "alloc block counters");
            j.counters = p;
            GPU_TRY(kr_gpu_memset(j.counters, 0, (size_t)j.n_counters * sizeof(int), c.stream),
                    "zero block counters");
            /* the load-time permutation (WPERM-like) the decode kernel reads */
            GPU_TRY(ctx_alloc(&c, &p, kr_gpu_w4a8_decode_layout_bytes(N, K)), "alloc decode layout");
            GPU_TRY(kr_gpu_w4a8_decode_layout(&j.w, p, c.stream), "decode layout");
            j.wdec = p;
        }
        if (opt.fault && strcmp(opt.fault, "race") == 0) {
            j.scratch_bytes = (size_t)M * (size_t)N * sizeof(float);
            GPU_TRY(ctx_alloc(&c, &p, j.scratch_bytes), "alloc race scratch");
            j.scratch = p;
        }
    } else if (j.kind == GK_SKINNY) {
        j.splits = skinny_splits(k->name, N, K, kopt);
        if (!act || !act->dequant || !in->weight_bf16 || j.splits <= 0 || K % j.splits) {
            res->verdict = VERDICT_UNSUPPORTED;
            snprintf(res->note, sizeof res->note,
                     "%s: needs bf16 activations, weight_bf16 and a split-K config for %lldx%lld",
                     k->name, (long long)N, (long long)K);
            status = kr_fail(err, "%s", res->note);
            goto done;
        }
        uint16_t *xb = malloc((size_t)M * (size_t)K * sizeof(uint16_t));
        if (!xb) {
            status = kr_fail(err, "out of memory");
            res->verdict = VERDICT_ERROR;
            goto done;
        }
        for (int64_t i = 0; i < M * K; i++)
            xb[i] = bf16_encode(act->dequant[i]);   /* already bf16 values: exact */
        int st = ctx_upload(&c, &p, xb, (size_t)M * (size_t)K * 2);
        free(xb);
        GPU_TRY(st, "upload x (bf16)");
        j.x_bf16 = p;
        GPU_TRY(ctx_upload(&c, &p, in->weight_bf16, (size_t)N * (size_t)K * 2), "upload weight_bf16");
        j.w_bf16 = p;
        res->flops = 2.0 * (double)M * (double)N * (double)K;
        res->bytes = 2.0 * ((double)M * (double)K + (double)N * (double)K + (double)M * (double)N);
    } else if (is_quant) {
        if (!in->x) {
            res->verdict = VERDICT_UNSUPPORTED;
            snprintf(res->note, sizeof res->note, "%s: the case has no source activations x", res->kernel);
            status = kr_fail(err, "%s", res->note);
            goto done;
        }
        GPU_TRY(ctx_upload(&c, &p, in->x, (size_t)M * (size_t)K * sizeof(float)), "upload x");
        j.xf = p;
        j.scale_out_bytes = j.kind == GK_QUANT_FP8 ? (size_t)M * sizeof(float) : (size_t)M * (size_t)(K / 32);
        GPU_TRY(ctx_alloc(&c, &j.scale_out, j.scale_out_bytes), "alloc scales");
        res->flops = 0;
        res->bytes = 5.0 * (double)M * (double)K + (double)j.scale_out_bytes;
    }

    /* ---- the output between its canaries ---- */
    j.canary = opt.canary_bytes;
    j.out_bytes = is_quant ? (size_t)M * (size_t)K : (size_t)M * (size_t)N * sizeof(uint16_t);
    const size_t block_bytes = 2 * j.canary + j.out_bytes;
    GPU_TRY(ctx_alloc(&c, &p, block_bytes), "alloc output");
    j.block = p;
    j.out = j.block + j.canary;
    host_block = malloc(block_bytes);
    first = malloc(j.out_bytes);
    now = malloc(j.out_bytes);
    first_scale = malloc(j.scale_out_bytes + 1);
    now_scale = malloc(j.scale_out_bytes + 1);
    times = malloc(sizeof(double) * (size_t)(opt.timed_runs > 0 ? opt.timed_runs : 1));
    if (!host_block || !first || !now || !first_scale || !now_scale || !times) {
        res->verdict = VERDICT_ERROR;
        status = kr_fail(err, "out of memory for the GPU run's host buffers");
        goto done;
    }

    /* ---- reruns, compared bit for bit ---- */
    for (int r = 0; r < opt.reruns; r++) {
        GPU_TRY(kr_gpu_memset(j.block, GPU_CANARY_BYTE, block_bytes, c.stream), "canary fill");
        GPU_TRY(job_poison(&j, c.stream), "poison");
        GPU_TRY(job_launch(&j, c.stream), res->kernel);
        GPU_TRY(kr_gpu_stream_synchronize(c.stream), "kernel execution");
        GPU_TRY(kr_gpu_memcpy_d2h(host_block, j.block, block_bytes), "download output");
        if (j.scale_out_bytes)
            GPU_TRY(kr_gpu_memcpy_d2h(now_scale, j.scale_out, j.scale_out_bytes), "download scales");
        res->reruns++;
        for (size_t b = 0; b < j.canary; b++) {
            res->canary_bad += host_block[b] != GPU_CANARY_BYTE;
            if (host_block[j.canary + j.out_bytes + b] != GPU_CANARY_BYTE) {
                res->canary_bad++;
                res->canary_bad_after++;
            }
        }
        memcpy(now, host_block + j.canary, j.out_bytes);
        if (is_quant) {
            for (size_t i = 0; i < j.out_bytes; i++)
                if (now[i] == GPU_POISON_BYTE && j.kind == GK_QUANT_MXFP4) {
                    res->unwritten++;
                    if (res->first_unwritten < 0)
                        res->first_unwritten = (int64_t)i;
                }
        } else {
            const uint16_t *o = (const uint16_t *)now;
            for (size_t i = 0; i < j.out_bytes / 2; i++)
                if (o[i] == GPU_POISON_BF16) {
                    res->unwritten++;
                    if (res->first_unwritten < 0)
                        res->first_unwritten = (int64_t)i;
                }
        }
        if (r == 0) {
            memcpy(first, now, j.out_bytes);
            memcpy(first_scale, now_scale, j.scale_out_bytes);
            continue;
        }
        if (is_quant) {
            for (size_t i = 0; i < j.out_bytes; i++)
                res->rerun_diff += first[i] != now[i];
            for (size_t i = 0; i < j.scale_out_bytes; i++)
                res->rerun_diff += first_scale[i] != now_scale[i];
        } else {
            const uint16_t *a = (const uint16_t *)first, *b = (const uint16_t *)now;
            for (size_t i = 0; i < j.out_bytes / 2; i++) {
                if (a[i] == b[i])
                    continue;
                const uint64_t d = bf16_ulp_distance(a[i], b[i]);
                if (d == UINT64_MAX && isnan(bf16_decode(a[i])) && isnan(bf16_decode(b[i])))
                    continue;
                res->rerun_diff++;
                if (d != UINT64_MAX && d > res->rerun_max_ulp)
                    res->rerun_max_ulp = d;
            }
        }
    }

    /* ---- timing: warm launches, events around each ---- */
    for (int t = 0; t < opt.timed_runs; t++) {
        float ms = 0;
        GPU_TRY(kr_gpu_event_record(c.ev0, c.stream), "event record");
        GPU_TRY(job_launch(&j, c.stream), res->kernel);
        GPU_TRY(kr_gpu_event_record(c.ev1, c.stream), "event record");
        GPU_TRY(kr_gpu_event_elapsed_ms(c.ev0, c.ev1, &ms), "event elapsed");
        times[t] = ms;
    }
    if (opt.timed_runs > 0) {
        qsort(times, (size_t)opt.timed_runs, sizeof(double), cmp_double);
        res->ms_min = times[0];
        res->ms_median = opt.timed_runs % 2 ? times[opt.timed_runs / 2]
                                            : 0.5 * (times[opt.timed_runs / 2 - 1] + times[opt.timed_runs / 2]);
        if (res->ms_median > 0) {
            res->tflops = res->flops / (res->ms_median * 1e-3) / 1e12;
            res->gbps = res->bytes / (res->ms_median * 1e-3) / 1e9;
        }
    }

    /* ---- results ---- */
    if (is_quant) {
        res->q_codes = malloc(j.out_bytes);
        if (res->q_codes)
            memcpy(res->q_codes, first, j.out_bytes);
        if (j.kind == GK_QUANT_FP8) {
            res->q_token_scale = malloc(j.scale_out_bytes);
            if (res->q_token_scale)
                memcpy(res->q_token_scale, first_scale, j.scale_out_bytes);
        } else {
            res->q_block_scale = malloc(j.scale_out_bytes);
            if (res->q_block_scale)
                memcpy(res->q_block_scale, first_scale, j.scale_out_bytes);
        }
    } else {
        res->out = malloc(j.out_bytes);
        if (res->out)
            memcpy(res->out, first, j.out_bytes);
    }
    if (res->canary_bad) {
        res->verdict = VERDICT_OOB_WRITE;
        snprintf(res->note, sizeof res->note,
                 "guard canaries changed: %lld byte(s) (%lld after the output's end) over %d launch(es)",
                 (long long)res->canary_bad, (long long)res->canary_bad_after, res->reruns);
    } else if (res->rerun_diff) {
        res->verdict = VERDICT_NONDETERMINISTIC;
        snprintf(res->note, sizeof res->note,
                 "reruns differ: %lld element(s) changed across %d launches on the same inputs (max %llu ULP)",
                 (long long)res->rerun_diff, res->reruns, (unsigned long long)res->rerun_max_ulp);
    } else if (res->unwritten) {
        res->verdict = VERDICT_WRONG;
        if (is_quant)
            snprintf(res->note, sizeof res->note,
                     "unwritten: %lld code(s) kept the poison byte, first at [%lld, %lld]",
                     (long long)res->unwritten, (long long)(res->first_unwritten / K),
                     (long long)(res->first_unwritten % K));
        else
            snprintf(res->note, sizeof res->note,
                     "unwritten: %lld element(s) kept the poison 0x7FC1, first at [m=%lld, n=%lld] "
                     "(partial N tile unwritten?)",
                     (long long)res->unwritten, (long long)(res->first_unwritten / N),
                     (long long)(res->first_unwritten % N));
    } else {
        snprintf(res->note, sizeof res->note, "%d launches bit-identical, canaries intact, every element written",
                 res->reruns);
    }
    if (res->out || res->q_codes)
        status = 0;
    else
        status = kr_fail(err, "out of memory copying the GPU output");

done:
    ctx_free(&c);
    free(host_block);
    free(first);
    free(now);
    free(first_scale);
    free(now_scale);
    free(times);
    return status;
}

void gpu_run_check_model(gpu_run_result_t *res, const uint16_t *model, uint64_t max_ulp)
{
    if (!res->out || !model)
        return;
    const int64_t n = res->M * res->N;
    ulp_stats_bf16(res->out, model, n, &res->model);
    res->model_checked = 1;
    const int64_t differ = res->model.count - res->model.identical;
    const int bad = max_ulp == 0 ? differ > 0
                                 : (res->model.max_ulp > max_ulp || res->model.bins[ULP_BIN_NONFINITE] > 0);
    if (!bad || res->verdict != VERDICT_PASS)
        return;
    res->verdict = VERDICT_MODEL_MISMATCH;
    snprintf(res->note, sizeof res->note,
             "differs from its CPU model in %lld of %lld elements (max %llu ULP, %lld non-finite mismatches)",
             (long long)differ, (long long)n, (unsigned long long)res->model.max_ulp,
             (long long)res->model.bins[ULP_BIN_NONFINITE]);
}

void gpu_run_result_free(gpu_run_result_t *res)
{
    free(res->out);
    free(res->q_codes);
    free(res->q_token_scale);
    free(res->q_block_scale);
    res->out = NULL;
    res->q_codes = NULL;
    res->q_token_scale = NULL;
    res->q_block_scale = NULL;
}
