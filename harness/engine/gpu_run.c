#include "gpu_run.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats.h"
#include "gpu_backend_info.h"
#include "kr_gpu.h"
#include "kr_gpu_entry.h"
#include "kr_string.h"

#define GPU_POISON_BF16 0x7FC1u
#define GPU_POISON_BYTE 0xFF
#define GPU_CANARY_BYTE 0xA5

static const gpu_run_options_t GPU_RUN_DEFAULTS = {
    .reruns = 3,
    .timed_runs = 5,
    .canary_bytes = 4096,
    .variant = GPU_VARIANT_SIMT,
};

void gpu_run_options_default(gpu_run_options_t *o)
{
    *o = GPU_RUN_DEFAULTS;
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

/* The registry kernel whose GPU twin the fault kernels borrow operands from. */
static const kernel_desc_t *fault_host(void)
{
    const kernel_gpu_entry_t host = kr_gpu_entry_fault_host();
    for (int i = 0; host != KERNEL_GPU_NONE && i < kernel_count(); i++)
        if (kernel_at(i)->gpu_entry == host)
            return kernel_at(i);
    return NULL;
}

int gpu_kernel_runs(const kernel_desc_t *k, gpu_variant_t variant)
{
    if (!k || k->gpu_entry == KERNEL_GPU_NONE)
        return 0;
    return variant == GPU_VARIANT_MATRIX ? k->gpu_matrix : 1;
}

int gpu_kernel_supported(const char *name, gpu_variant_t variant)
{
    return name && gpu_kernel_runs(kernel_find(name), variant);
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

/* ctx_alloc as kr_gpu_prepare_t.alloc. */
static int ctx_alloc_for_entry(void *owner, void **p, size_t bytes)
{
    return ctx_alloc(owner, p, bytes);
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

/* One run: the twin, its device operands, and the canaried output block. */
typedef struct {
    const kr_gpu_entry_t *gpu;  /* the descriptor's gpu_entry, NULL if none is built */
    gpu_variant_t variant;
    const char *fault;
    kr_gpu_operands_t op;       /* op.out: the output, inside the canaried block */
    uint8_t *block;             /* canary | output | canary */
    size_t canary, out_bytes;
    int quant;                  /* a quantizer: byte codes and a second (scales) output */
    int mxfp4_codes;            /* its codes are e2m1 (0xFF is no code: the poison shows) */
    size_t scale_out_bytes;     /* quantizers' second output (op.scale_out, not canaried) */
} gpu_job_t;

static int job_launch(const gpu_job_t *j, kr_gpu_stream_t s)
{
    const kr_gpu_operands_t *o = &j->op;
    if (j->fault)
        return kr_gpu_fault_launch(j->fault, o->x, o->x_fmt, o->xs, o->M, &o->w, o->ref, o->scratch,
                                   o->scratch_bytes, o->out, s);
    if (!j->gpu)
        return KR_GPU_ERR_UNSUPPORTED;
    if (j->variant == GPU_VARIANT_MATRIX)
        return j->gpu->launch_matrix ? j->gpu->launch_matrix(o, s) : KR_GPU_ERR_UNSUPPORTED;
    return j->gpu->launch(o, s);
}

static int job_poison(const gpu_job_t *j, kr_gpu_stream_t s)
{
    int st;
    if (j->quant) {
        st = kr_gpu_memset(j->op.out, GPU_POISON_BYTE, j->out_bytes, s);
        if (st == KR_GPU_OK)
            st = kr_gpu_memset(j->op.scale_out, GPU_POISON_BYTE, j->scale_out_bytes, s);
        return st;
    }
    return kr_gpu_fill_u16((uint16_t *)j->op.out, GPU_POISON_BF16, j->out_bytes / 2, s);
}

/* The split-K count of the twin: the descriptor's (shared with its CPU
 * model), 0 when it declines the shape. */
static int job_splits(const kernel_desc_t *k, const kernel_inputs_t *in, const kernel_options_t *kopt)
{
    kernel_options_t defaults;
    if (!kopt) {
        kernel_options_default(&defaults);
        kopt = &defaults;
    }
    kr_error_t ignored = {{0}};
    if (!k->split_k)
        return 1;
    const int sk = k->split_k(k, in->dispatch_M > 0 ? in->dispatch_M : in->M, in->N, in->K, kopt, &ignored);
    return sk > 0 ? sk : 0;
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
    j->op.w = (kr_gpu_mxfp4_t){.packed = packed, .scales = scales,
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
        st = kr_gpu_w4a8_row_ref(&j->op.w, case_ref, ref, c->stream);
    j->op.ref = ref;
    return st;
}

/* What one run holds on the host, freed in one place. */
typedef struct {
    uint8_t *block, *first, *now, *first_scale, *now_scale;
    double *times;
} gpu_host_t;

static void host_free(gpu_host_t *h)
{
    void *owned[] = {h->block, h->first, h->now, h->first_scale, h->now_scale, h->times};
    for (size_t i = 0; i < sizeof owned / sizeof owned[0]; i++)
        free(owned[i]);
    memset(h, 0, sizeof *h);
}

/* A run that cannot happen: the row is UNSUPPORTED and says why. */
static int decline(gpu_run_result_t *res, kr_error_t *err)
{
    res->verdict = VERDICT_UNSUPPORTED;
    return kr_fail(err, "%s", res->note);
}

/* fp8 per-token or MXFP4 activations against the MXFP4 weight. */
static int upload_mxfp4_gemm(gpu_ctx_t *c, const kernel_desc_t *k, const kernel_inputs_t *in,
                             const kernel_act_t *act, const kernel_options_t *kopt, gpu_job_t *j,
                             gpu_run_result_t *res, kr_error_t *err)
{
    const int64_t M = in->M, N = in->N, K = in->K;
    const int fp8_act = kernel_is_w4a8(k);
    int status = 0;
    void *p;
    if (!act || !act->codes || !in->weight.packed || !in->weight.scales) {
        snprintf(res->note, sizeof res->note, "%s: needs prepared activations and an MXFP4 weight",
                 res->kernel);
        return decline(res, err);
    }
    GPU_TRY(ctx_upload(c, &p, act->codes, (size_t)M * (size_t)K), "upload activations");
    j->op.x = p;
    if (fp8_act) {
        GPU_TRY(ctx_upload(c, &p, act->token_scale, (size_t)M * sizeof(float)), "upload x_scale");
        j->op.xs = p;
        j->op.x_fmt = act->fp8_format == FP8_E4M3FNUZ ? 1 : 0;
    } else {
        GPU_TRY(ctx_upload(c, &p, act->block_scale, (size_t)M * (size_t)(K / 32)), "upload scales");
        j->op.a_scales = p;
    }
    GPU_TRY(upload_weight(c, in, j, fp8_act), "upload weight");
    res->flops = 2.0 * (double)M * (double)N * (double)K;
    res->bytes = (double)M * (double)K + (double)N * (double)K / 2 + (double)N * (double)K / 32 +
                 2.0 * (double)M * (double)N + (fp8_act ? 4.0 * (double)M : (double)M * (double)K / 32);
    if (j->gpu && j->gpu->uses_splits) {
        j->op.splits = job_splits(k, in, kopt);
        if (j->op.splits <= 0) {
            snprintf(res->note, sizeof res->note, "%s: no split-K config for %lldx%lld", res->kernel,
                     (long long)N, (long long)K);
            return decline(res, err);
        }
    }
    if (j->gpu && j->gpu->prepare) {
        kr_gpu_prepare_t prep = {.owner = c, .alloc = ctx_alloc_for_entry, .stream = c->stream,
                                 .matrix = j->variant == GPU_VARIANT_MATRIX};
        const int st = j->gpu->prepare(&j->op, &prep);
        if (prep.decline) {
            snprintf(res->note, sizeof res->note, "%s: %s", res->kernel, prep.decline);
            return decline(res, err);
        }
        GPU_TRY(st, prep.step);
        res->bytes += prep.extra_bytes;
    }
    if (j->fault && strcmp(j->fault, "race") == 0) {
        j->op.scratch_bytes = (size_t)M * (size_t)N * sizeof(float);
        GPU_TRY(ctx_alloc(c, &p, j->op.scratch_bytes), "alloc race scratch");
        j->op.scratch = p;
    }
done:
    return status;
}

/* bf16 activations against the bf16 weight, with the descriptor's split-K. */
static int upload_bf16_gemm(gpu_ctx_t *c, const kernel_desc_t *k, const kernel_inputs_t *in,
                            const kernel_act_t *act, const kernel_options_t *kopt, gpu_job_t *j,
                            gpu_run_result_t *res, kr_error_t *err)
{
    const int64_t M = in->M, N = in->N, K = in->K;
    int status = 0;
    void *p;
    j->op.splits = job_splits(k, in, kopt);
    if (!act || !act->dequant || !in->weight_bf16 || j->op.splits <= 0 || K % j->op.splits) {
        snprintf(res->note, sizeof res->note,
                 "%s: needs bf16 activations, weight_bf16 and a split-K config for %lldx%lld", k->name,
                 (long long)N, (long long)K);
        return decline(res, err);
    }
    uint16_t *xb = malloc((size_t)M * (size_t)K * sizeof(uint16_t));
    if (!xb) {
        res->verdict = VERDICT_ERROR;
        return kr_fail(err, "out of memory");
    }
    for (int64_t i = 0; i < M * K; i++)
        xb[i] = bf16_encode(act->dequant[i]);   /* already bf16 values: exact */
    int st = ctx_upload(c, &p, xb, (size_t)M * (size_t)K * 2);
    free(xb);
    GPU_TRY(st, "upload x (bf16)");
    j->op.x_bf16 = p;
    GPU_TRY(ctx_upload(c, &p, in->weight_bf16, (size_t)N * (size_t)K * 2), "upload weight_bf16");
    j->op.w_bf16 = p;
    res->flops = 2.0 * (double)M * (double)N * (double)K;
    res->bytes = 2.0 * ((double)M * (double)K + (double)N * (double)K + (double)M * (double)N);
done:
    return status;
}

/* A quantizer's source x; its second output holds the scales. */
static int upload_quant(gpu_ctx_t *c, const kernel_desc_t *k, const kernel_inputs_t *in, gpu_job_t *j,
                        gpu_run_result_t *res, kr_error_t *err)
{
    const int64_t M = in->M, K = in->K;
    int status = 0;
    void *p;
    if (!in->x) {
        snprintf(res->note, sizeof res->note, "%s: the case has no source activations x", res->kernel);
        return decline(res, err);
    }
    GPU_TRY(ctx_upload(c, &p, in->x, (size_t)M * (size_t)K * sizeof(float)), "upload x");
    j->op.xf = p;
    j->scale_out_bytes = k->act.scale == SCALE_PER_TOKEN ? (size_t)M * sizeof(float)
                                                         : (size_t)M * (size_t)(K / k->act.block);
    GPU_TRY(ctx_alloc(c, &j->op.scale_out, j->scale_out_bytes), "alloc scales");
    res->flops = 0;
    res->bytes = 5.0 * (double)M * (double)K + (double)j->scale_out_bytes;
done:
    return status;
}

/* The operands as the descriptor's formats say the twin consumes them. */
static int upload_operands(gpu_ctx_t *c, const kernel_desc_t *k, const kernel_inputs_t *in,
                           const kernel_act_t *act, const kernel_options_t *kopt, gpu_job_t *j,
                           gpu_run_result_t *res, kr_error_t *err)
{
    if (j->quant)
        return upload_quant(c, k, in, j, res, err);
    if (k->act.elem == ELEM_BF16)
        return upload_bf16_gemm(c, k, in, act, kopt, j, res, err);
    return upload_mxfp4_gemm(c, k, in, act, kopt, j, res, err);
}

/* The output between its canaries, and the host copies of each launch's. */
static int alloc_output(gpu_ctx_t *c, gpu_job_t *j, const gpu_run_options_t *opt, gpu_host_t *h,
                        gpu_run_result_t *res, kr_error_t *err)
{
    int status = 0;
    void *p;
    j->canary = opt->canary_bytes;
    j->out_bytes = j->quant ? (size_t)j->op.M * (size_t)j->op.K
                            : (size_t)j->op.M * (size_t)j->op.N * sizeof(uint16_t);
    const size_t block_bytes = 2 * j->canary + j->out_bytes;
    GPU_TRY(ctx_alloc(c, &p, block_bytes), "alloc output");
    j->block = p;
    j->op.out = j->block + j->canary;
    h->block = malloc(block_bytes);
    h->first = malloc(j->out_bytes);
    h->now = malloc(j->out_bytes);
    h->first_scale = malloc(j->scale_out_bytes + 1);
    h->now_scale = malloc(j->scale_out_bytes + 1);
    h->times = malloc(sizeof(double) * (size_t)(opt->timed_runs > 0 ? opt->timed_runs : 1));
    if (!h->block || !h->first || !h->now || !h->first_scale || !h->now_scale || !h->times) {
        res->verdict = VERDICT_ERROR;
        return kr_fail(err, "out of memory for the GPU run's host buffers");
    }
done:
    return status;
}

/* Canaries changed and elements that kept the poison, in the launch just downloaded. */
static void check_launch(const gpu_job_t *j, const gpu_host_t *h, gpu_run_result_t *res)
{
    for (size_t b = 0; b < j->canary; b++) {
        res->canary_bad += h->block[b] != GPU_CANARY_BYTE;
        if (h->block[j->canary + j->out_bytes + b] != GPU_CANARY_BYTE) {
            res->canary_bad++;
            res->canary_bad_after++;
        }
    }
    if (j->quant) {
        for (size_t i = 0; j->mxfp4_codes && i < j->out_bytes; i++)
            if (h->now[i] == GPU_POISON_BYTE) {
                res->unwritten++;
                if (res->first_unwritten < 0)
                    res->first_unwritten = (int64_t)i;
            }
        return;
    }
    const uint16_t *o = (const uint16_t *)h->now;
    for (size_t i = 0; i < j->out_bytes / 2; i++)
        if (o[i] == GPU_POISON_BF16) {
            res->unwritten++;
            if (res->first_unwritten < 0)
                res->first_unwritten = (int64_t)i;
        }
}

/* A rerun's output against the first launch's (NaN == NaN for bf16). */
static void compare_rerun(const gpu_job_t *j, const gpu_host_t *h, gpu_run_result_t *res)
{
    if (j->quant) {
        for (size_t i = 0; i < j->out_bytes; i++)
            res->rerun_diff += h->first[i] != h->now[i];
        for (size_t i = 0; i < j->scale_out_bytes; i++)
            res->rerun_diff += h->first_scale[i] != h->now_scale[i];
        return;
    }
    const uint16_t *a = (const uint16_t *)h->first, *b = (const uint16_t *)h->now;
    for (size_t i = 0; i < j->out_bytes / 2; i++) {
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

/* `reruns` launches on the same inputs, each checked and compared bit for bit. */
static int run_reruns(gpu_ctx_t *c, const gpu_job_t *j, int reruns, gpu_host_t *h, gpu_run_result_t *res,
                      kr_error_t *err)
{
    int status = 0;
    const size_t block_bytes = 2 * j->canary + j->out_bytes;
    for (int r = 0; r < reruns; r++) {
        GPU_TRY(kr_gpu_memset(j->block, GPU_CANARY_BYTE, block_bytes, c->stream), "canary fill");
        GPU_TRY(job_poison(j, c->stream), "poison");
        GPU_TRY(job_launch(j, c->stream), res->kernel);
        GPU_TRY(kr_gpu_stream_synchronize(c->stream), "kernel execution");
        GPU_TRY(kr_gpu_memcpy_d2h(h->block, j->block, block_bytes), "download output");
        if (j->scale_out_bytes)
            GPU_TRY(kr_gpu_memcpy_d2h(h->now_scale, j->op.scale_out, j->scale_out_bytes), "download scales");
        res->reruns++;
        memcpy(h->now, h->block + j->canary, j->out_bytes);
        check_launch(j, h, res);
        if (r == 0) {
            memcpy(h->first, h->now, j->out_bytes);
            memcpy(h->first_scale, h->now_scale, j->scale_out_bytes);
            continue;
        }
        compare_rerun(j, h, res);
    }
done:
    return status;
}

/* Warm launches, events around each: median and min, TFLOP/s and GB/s. */
static int run_timed(gpu_ctx_t *c, const gpu_job_t *j, int timed_runs, gpu_host_t *h, gpu_run_result_t *res,
                     kr_error_t *err)
{
    int status = 0;
    for (int t = 0; t < timed_runs; t++) {
        float ms = 0;
        GPU_TRY(kr_gpu_event_record(c->ev0, c->stream), "event record");
        GPU_TRY(job_launch(j, c->stream), res->kernel);
        GPU_TRY(kr_gpu_event_record(c->ev1, c->stream), "event record");
        GPU_TRY(kr_gpu_event_elapsed_ms(c->ev0, c->ev1, &ms), "event elapsed");
        h->times[t] = ms;
    }
    if (timed_runs > 0) {
        qsort(h->times, (size_t)timed_runs, sizeof(double), cmp_double);
        res->ms_min = h->times[0];
        res->ms_median = timed_runs % 2 ? h->times[timed_runs / 2]
                                        : 0.5 * (h->times[timed_runs / 2 - 1] + h->times[timed_runs / 2]);
        if (res->ms_median > 0) {
            res->tflops = res->flops / (res->ms_median * 1e-3) / 1e12;
            res->gbps = res->bytes / (res->ms_median * 1e-3) / 1e9;
        }
    }
done:
    return status;
}

/* The first launch's output into res, and the verdict the checks give. */
static int finish_result(const gpu_job_t *j, const gpu_host_t *h, gpu_run_result_t *res, kr_error_t *err)
{
    if (j->quant) {
        res->q_codes = malloc(j->out_bytes);
        if (res->q_codes)
            memcpy(res->q_codes, h->first, j->out_bytes);
        void *scales = malloc(j->scale_out_bytes);
        if (scales)
            memcpy(scales, h->first_scale, j->scale_out_bytes);
        if (j->mxfp4_codes)
            res->q_block_scale = scales;
        else
            res->q_token_scale = scales;
    } else {
        res->out = malloc(j->out_bytes);
        if (res->out)
            memcpy(res->out, h->first, j->out_bytes);
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
    } else if (res->unwritten && j->quant) {
        res->verdict = VERDICT_WRONG;
        snprintf(res->note, sizeof res->note, "unwritten: %lld code(s) kept the poison byte, first at [%lld, %lld]",
                 (long long)res->unwritten, (long long)(res->first_unwritten / j->op.K),
                 (long long)(res->first_unwritten % j->op.K));
    } else if (res->unwritten) {
        res->verdict = VERDICT_WRONG;
        snprintf(res->note, sizeof res->note,
                 "unwritten: %lld element(s) kept the poison 0x7FC1, first at [m=%lld, n=%lld] "
                 "(partial N tile unwritten?)",
                 (long long)res->unwritten, (long long)(res->first_unwritten / j->op.N),
                 (long long)(res->first_unwritten % j->op.N));
    } else {
        snprintf(res->note, sizeof res->note, "%d launches bit-identical, canaries intact, every element written",
                 res->reruns);
    }
    if (res->out || res->q_codes)
        return 0;
    return kr_fail(err, "out of memory copying the GPU output");
}

/* res before the run: the kernel's label, nothing measured yet. */
static void result_init(gpu_run_result_t *res, const kernel_desc_t *k, const kernel_inputs_t *in,
                        const gpu_run_options_t *opt)
{
    memset(res, 0, sizeof *res);
    res->M = in->M;
    res->N = in->N;
    res->K = in->K;
    res->first_unwritten = -1;
    res->ms_median = res->ms_min = NAN;
    res->tflops = res->gbps = NAN;
    res->verdict = VERDICT_PASS;
    snprintf(res->kernel, sizeof res->kernel, "%s%s%s%s", k ? k->name : "?",
             opt->variant == GPU_VARIANT_MATRIX ? (strcmp(kr_gpu_backend(), "hip") == 0 ? "+wmma" : "+mma") : "",
             opt->fault ? "+fault:" : "", opt->fault ? opt->fault : "");
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
    result_init(res, k, in, &opt);

    gpu_ctx_t c;
    memset(&c, 0, sizeof c);
    gpu_host_t h;
    memset(&h, 0, sizeof h);
    gpu_job_t j;
    memset(&j, 0, sizeof j);
    int status = 0;
    char why[256];

    j.gpu = k ? kr_gpu_entry_find(k->gpu_entry) : NULL;
    j.variant = opt.variant;
    j.fault = opt.fault;
    j.op.M = in->M;
    j.op.N = in->N;
    j.op.K = in->K;
    if (!gpu_kernel_runs(k, opt.variant) || (opt.fault && k->gpu_entry != kr_gpu_entry_fault_host())) {
        const kernel_desc_t *host = fault_host();
        char faults[96] = "";
        if (opt.fault)
            snprintf(faults, sizeof faults, " (faults run on %s)", host ? host->name : "no kernel");
        snprintf(res->note, sizeof res->note, "no GPU kernel for %s%s", res->kernel, faults);
        return decline(res, err);
    }
    j.quant = k->op == KERNEL_OP_QUANT;
    j.mxfp4_codes = j.quant && k->act.elem == ELEM_E2M1;
    if (!gpu_available(why, sizeof why)) {
        kr_strlcpy(res->note, why, sizeof res->note);
        return decline(res, err);
    }
    GPU_TRY(kr_gpu_set_device(opt.device), "set device");
    if (kr_gpu_device_name(opt.device, res->device, sizeof res->device) != KR_GPU_OK)
        kr_strlcpy(res->device, "?", sizeof res->device);
    GPU_TRY(kr_gpu_stream_create(&c.stream), "stream");
    GPU_TRY(kr_gpu_event_create(&c.ev0), "event");
    GPU_TRY(kr_gpu_event_create(&c.ev1), "event");

    if ((status = upload_operands(&c, k, in, act, kopt, &j, res, err)) != 0 ||
        (status = alloc_output(&c, &j, &opt, &h, res, err)) != 0 ||
        (status = run_reruns(&c, &j, opt.reruns, &h, res, err)) != 0 ||
        (status = run_timed(&c, &j, opt.timed_runs, &h, res, err)) != 0)
        goto done;
    status = finish_result(&j, &h, res, err);

done:
    ctx_free(&c);
    host_free(&h);
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
