#include "gpu_launch.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats.h"
#include "gpu_standin.h"

#define GPU_POISON_BF16 0x7FC1u
#define GPU_POISON_BYTE 0xFF
#define GPU_CANARY_BYTE 0xA5
#define GPU_LAUNCH_MAX_ALLOCS 16

size_t gpu_launch_out_bytes(const kernel_desc_t *k, int64_t M, int64_t N, int64_t K)
{
    return k->op == KERNEL_OP_QUANT ? (size_t)M * (size_t)K : (size_t)M * (size_t)N * 2;
}

size_t gpu_launch_scale_bytes(const kernel_desc_t *k, int64_t M, int64_t K)
{
    if (k->op != KERNEL_OP_QUANT)
        return 0;
    return k->act.scale == SCALE_PER_TOKEN ? (size_t)M * sizeof(float)
                                           : (size_t)M * (size_t)(K / k->act.block);
}

int gpu_launch_splits(const kernel_desc_t *k, int64_t M, int64_t dispatch_M, int64_t N,
                      int64_t K, const kernel_options_t *kopt)
{
    kernel_options_t defaults;
    if (!kopt) {
        kernel_options_default(&defaults);
        kopt = &defaults;
    }
    if (!k->split_k)
        return 1;
    kr_error_t ignored = {{0}};
    const int sk = k->split_k(k, dispatch_M > 0 ? dispatch_M : M, N, K, kopt, &ignored);
    return sk > 0 ? sk : 0;
}

/* One twin's run: what it launches and the device memory it made. */
typedef struct {
    gpu_device_t *d;
    const kernel_desc_t *k;
    const kernel_options_t *kopt;
    const kr_gpu_entry_t *gpu;
    gpu_variant_t variant;
    const char *fault;
    kr_gpu_operands_t *op;
    uint8_t *block;             /* canary | output | canary */
    uint8_t *first;             /* launch 1's output, kept for the reruns' comparison */
    uint8_t *first_scale;
    size_t canary, out_bytes, scale_bytes;
    int quant, mxfp4_codes;
    int launches;               /* so far (the stand-in's race moves with it) */
    void *mem[GPU_LAUNCH_MAX_ALLOCS];
    int n_mem;
    double *times;
} launch_job_t;

static int job_alloc(launch_job_t *j, void **p, size_t bytes)
{
    *p = NULL;
    if (j->n_mem >= GPU_LAUNCH_MAX_ALLOCS)
        return KR_GPU_ERR_ARG;
    int st = gpu_dev_alloc(j->d, p, bytes);
    if (st == KR_GPU_OK)
        j->mem[j->n_mem++] = *p;
    return st;
}

/* job_alloc as kr_gpu_prepare_t.alloc. */
static int job_alloc_for_entry(void *owner, void **p, size_t bytes)
{
    return job_alloc(owner, p, bytes);
}

static void job_free(launch_job_t *j)
{
    for (int i = 0; i < j->n_mem; i++)
        gpu_dev_free(j->d, j->mem[i]);
    free(j->times);
    j->n_mem = 0;
}

static int fail_row(launch_job_t *j, gpu_run_result_t *res, verdict_t v, kr_error_t *err,
                    const char *what, int st)
{
    const char *detail = gpu_dev_error(j->d);
    res->verdict = v;
    snprintf(res->note, sizeof res->note, "%s: %s%s%s", what, kr_gpu_status_name(st),
             detail[0] ? ": " : "", detail);
    return kr_fail(err, "%s", res->note);
}

static int decline(gpu_run_result_t *res, kr_error_t *err)
{
    res->verdict = VERDICT_UNSUPPORTED;
    return kr_fail(err, "%s", res->note);
}

#define GPU_TRY(expr, what)                                                                  \
    do {                                                                                     \
        int st_ = (expr);                                                                    \
        if (st_ != KR_GPU_OK)                                                                \
            return fail_row(j, res,                                                          \
                            st_ == KR_GPU_ERR_UNSUPPORTED ? VERDICT_UNSUPPORTED : VERDICT_ERROR, \
                            err, what, st_);                                                 \
    } while (0)

static int job_launch(launch_job_t *j)
{
    const kr_gpu_operands_t *o = j->op;
    j->launches++;
    if (j->d->standin)
        return gpu_standin_launch(j->k, j->kopt, o, j->variant == GPU_VARIANT_MATRIX, j->fault,
                                  j->launches);
    if (j->fault)
        return kr_gpu_fault_launch(j->fault, o->x, o->x_fmt, o->xs, o->M, &o->w, o->ref, o->scratch,
                                   o->scratch_bytes, (uint16_t *)o->out, j->d->stream);
    if (!j->gpu)
        return KR_GPU_ERR_UNSUPPORTED;
    if (j->variant == GPU_VARIANT_MATRIX)
        return j->gpu->launch_matrix ? j->gpu->launch_matrix(o, j->d->stream) : KR_GPU_ERR_UNSUPPORTED;
    return j->gpu->launch(o, j->d->stream);
}

/* Whether the operands the descriptor's formats call for are there. */
static int operands_missing(const launch_job_t *j, gpu_run_result_t *res)
{
    const kr_gpu_operands_t *o = j->op;
    const char *missing = NULL;
    if (j->quant)
        missing = o->xf ? NULL : "the case has no source activations x";
    else if (j->k->act.elem == ELEM_BF16)
        missing = o->x_bf16 && o->w_bf16 ? NULL : "needs bf16 activations and weight_bf16";
    else if (!o->x || !o->w.packed || !o->w.scales || (!o->xs && !o->a_scales))
        missing = "needs prepared activations and an MXFP4 weight";
    if (missing)
        snprintf(res->note, sizeof res->note, "%s: %s", res->kernel, missing);
    return missing != NULL;
}

/* Bytes a launch moves and its flops, for TFLOP/s and GB/s. */
static void launch_measures(const launch_job_t *j, gpu_run_result_t *res)
{
    const kr_gpu_operands_t *o = j->op;
    const double M = (double)o->M, N = (double)o->N, K = (double)o->K;
    if (j->quant) {
        res->flops = 0;
        res->bytes = 5.0 * M * K + (double)j->scale_bytes;
    } else if (j->k->act.elem == ELEM_BF16) {
        res->flops = 2.0 * M * N * K;
        res->bytes = 2.0 * (M * K + N * K + M * N);
    } else {
        res->flops = 2.0 * M * N * K;
        res->bytes = M * K + N * K / 2 + N * K / 32 + 2.0 * M * N + (o->xs ? 4.0 * M : M * K / 32);
    }
}

/* The split count, the per-row reference exponents and the entry's own
 * buffers: everything a launch reads beyond the operands. */
static int prepare_job(launch_job_t *j, gpu_run_result_t *res, kr_error_t *err)
{
    kr_gpu_operands_t *o = j->op;
    if (operands_missing(j, res))
        return decline(res, err);
    launch_measures(j, res);
    if (j->k->split_k && !j->quant) {
        o->splits = gpu_launch_splits(j->k, o->M, o->dispatch_M, o->N, o->K, j->kopt);
        if (o->splits <= 0 || (j->k->act.elem == ELEM_BF16 && o->K % o->splits)) {
            snprintf(res->note, sizeof res->note, "%s: no split-K config for %lldx%lld", res->kernel,
                     (long long)o->N, (long long)o->K);
            return decline(res, err);
        }
    }
    if (j->d->standin)
        return 0;
    void *p;
    if (kernel_is_w4a8(j->k)) {
        GPU_TRY(job_alloc(j, &p, (size_t)o->N), "alloc row reference");
        GPU_TRY(kr_gpu_w4a8_row_ref(&o->w, o->case_ref, p, j->d->stream), "row reference");
        o->ref = p;
    }
    if (j->gpu && j->gpu->prepare) {
        kr_gpu_prepare_t prep = {.owner = j, .alloc = job_alloc_for_entry, .stream = j->d->stream,
                                 .matrix = j->variant == GPU_VARIANT_MATRIX};
        const int st = j->gpu->prepare(o, &prep);
        if (prep.decline) {
            snprintf(res->note, sizeof res->note, "%s: %s", res->kernel, prep.decline);
            return decline(res, err);
        }
        GPU_TRY(st, prep.step);
        res->bytes += prep.extra_bytes;
    }
    if (j->fault && strcmp(j->fault, "race") == 0) {
        o->scratch_bytes = (size_t)o->M * (size_t)o->N * sizeof(float);
        GPU_TRY(job_alloc(j, &p, o->scratch_bytes), "alloc race scratch");
        o->scratch = p;
    }
    return 0;
}

/* The canaried output, the scales, and the copies of launch 1's. */
static int alloc_outputs(launch_job_t *j, const gpu_run_options_t *opt, gpu_run_result_t *res,
                         kr_error_t *err)
{
    void *p;
    j->canary = opt->canary_bytes;
    GPU_TRY(job_alloc(j, &p, 2 * j->canary + j->out_bytes), "alloc output");
    j->block = p;
    j->op->out = j->block + j->canary;
    GPU_TRY(job_alloc(j, &p, j->out_bytes), "alloc output copy");
    j->first = p;
    if (j->scale_bytes) {
        GPU_TRY(job_alloc(j, &p, j->scale_bytes), "alloc scales");
        j->op->scale_out = p;
        GPU_TRY(job_alloc(j, &p, j->scale_bytes), "alloc scales copy");
        j->first_scale = p;
    }
    const int n = opt->reruns + (opt->timed_runs > 0 ? opt->timed_runs : 0);
    j->times = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    if (!j->times) {
        res->verdict = VERDICT_ERROR;
        return kr_fail(err, "out of memory for the GPU run's times");
    }
    return 0;
}

static int poison(launch_job_t *j)
{
    const gpu_device_t *d = j->d;
    int st;
    if (j->quant) {
        st = gpu_dev_fill_u8(d, j->op->out, GPU_POISON_BYTE, j->out_bytes);
        if (st == KR_GPU_OK && j->scale_bytes)
            st = gpu_dev_fill_u8(d, j->op->scale_out, GPU_POISON_BYTE, j->scale_bytes);
        return st;
    }
    return gpu_dev_fill_u16(d, (uint16_t *)j->op->out, GPU_POISON_BF16, j->out_bytes / 2);
}

/* The canaries of the launch just run, and the elements that kept the poison. */
static int check_launch(launch_job_t *j, gpu_run_result_t *res, kr_error_t *err)
{
    int64_t before, after, first, last, left = 0, where = -1;
    const uint8_t *after_out = j->block + j->canary + j->out_bytes;
    GPU_TRY(gpu_dev_scan_u8(j->d, j->block, j->canary, GPU_CANARY_BYTE, 0, &before, &first, &last),
            "canary check");
    GPU_TRY(gpu_dev_scan_u8(j->d, after_out, j->canary, GPU_CANARY_BYTE, 0, &after, &first, &last),
            "canary check");
    res->canary_bad += before + after;
    res->canary_bad_after += after;
    if (j->quant && j->mxfp4_codes)   /* 0xFF is no e2m1 code: the poison shows */
        GPU_TRY(gpu_dev_scan_u8(j->d, j->op->out, j->out_bytes, GPU_POISON_BYTE, 1, &left, &where,
                                &last),
                "poison check");
    else if (!j->quant)
        GPU_TRY(gpu_dev_scan_u16(j->d, (const uint16_t *)j->op->out, j->out_bytes / 2,
                                 GPU_POISON_BF16, &left, &where),
                "poison check");
    res->unwritten += left;
    if (left && res->first_unwritten < 0)
        res->first_unwritten = where;
    return 0;
}

/* Launch 1 kept on the device; a rerun compared with it there. */
static int keep_or_compare(launch_job_t *j, int r, gpu_run_result_t *res, kr_error_t *err)
{
    if (r == 0) {
        GPU_TRY(gpu_dev_copy(j->d, j->first, j->op->out, j->out_bytes), "keep launch 1");
        if (j->scale_bytes)
            GPU_TRY(gpu_dev_copy(j->d, j->first_scale, j->op->scale_out, j->scale_bytes),
                    "keep launch 1");
        return 0;
    }
    int64_t differ = 0, scale_differ = 0;
    uint64_t max_ulp = 0;
    if (j->quant) {
        GPU_TRY(gpu_dev_diff_u8(j->d, j->first, j->op->out, j->out_bytes, &differ), "rerun compare");
        if (j->scale_bytes)
            GPU_TRY(gpu_dev_diff_u8(j->d, j->first_scale, j->op->scale_out, j->scale_bytes,
                                    &scale_differ),
                    "rerun compare");
    } else {
        GPU_TRY(gpu_dev_diff_bf16(j->d, (const uint16_t *)j->first, (const uint16_t *)j->op->out,
                                  j->out_bytes / 2, &differ, &max_ulp),
                "rerun compare");
    }
    res->rerun_diff += differ + scale_differ;
    if (max_ulp > res->rerun_max_ulp)
        res->rerun_max_ulp = max_ulp;
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median and minimum of the warm launches' times, and the rates. */
static void summarize_times(launch_job_t *j, int n, gpu_run_result_t *res)
{
    double *t = j->times;
    if (n > 1) {    /* launch 1 pays for first touches: the warm ones are timed */
        t++;
        n--;
    }
    if (n <= 0)
        return;
    qsort(t, (size_t)n, sizeof(double), cmp_double);
    res->ms_min = t[0];
    res->ms_median = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
    if (res->ms_median > 0) {
        res->tflops = res->flops / (res->ms_median * 1e-3) / 1e12;
        res->gbps = res->bytes / (res->ms_median * 1e-3) / 1e9;
    }
}

static int run_launches(launch_job_t *j, const gpu_run_options_t *opt, gpu_run_result_t *res,
                        kr_error_t *err)
{
    const int timed = opt->timed_runs > 0 ? opt->timed_runs : 0;
    int n = 0;
    for (int r = 0; r < opt->reruns + timed; r++) {
        const int checked = r < opt->reruns;
        if (checked) {
            GPU_TRY(gpu_dev_fill_u8(j->d, j->block, GPU_CANARY_BYTE, 2 * j->canary + j->out_bytes),
                    "canary fill");
            GPU_TRY(poison(j), "poison");
        }
        GPU_TRY(gpu_dev_clock_start(j->d), "event record");
        GPU_TRY(job_launch(j), res->kernel);
        GPU_TRY(gpu_dev_clock_stop(j->d, &j->times[n]), "kernel execution");
        n++;
        if (!checked)
            continue;
        res->reruns++;
        if (check_launch(j, res, err) || keep_or_compare(j, r, res, err))
            return -1;
    }
    summarize_times(j, n, res);
    return 0;
}

/* The verdict the checks give, and its note. */
static void judge_launches(const launch_job_t *j, gpu_run_result_t *res)
{
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
                 (long long)res->unwritten, (long long)(res->first_unwritten / j->op->K),
                 (long long)(res->first_unwritten % j->op->K));
    } else if (res->unwritten) {
        res->verdict = VERDICT_WRONG;
        snprintf(res->note, sizeof res->note,
                 "unwritten: %lld element(s) kept the poison 0x7FC1, first at [m=%lld, n=%lld] "
                 "(partial N tile unwritten?)",
                 (long long)res->unwritten, (long long)(res->first_unwritten / j->op->N),
                 (long long)(res->first_unwritten % j->op->N));
    } else {
        snprintf(res->note, sizeof res->note, "%d launches bit-identical, canaries intact, every element written",
                 res->reruns);
    }
}

int gpu_launch_twin(gpu_device_t *d, const kernel_desc_t *k, const kernel_options_t *kopt,
                    kr_gpu_operands_t *op, const gpu_run_options_t *opt, gpu_run_result_t *res,
                    void *out_host, void *scale_host, kr_error_t *err)
{
    launch_job_t job = {.d = d, .k = k, .kopt = kopt, .variant = opt->variant, .fault = opt->fault,
                        .op = op};
    launch_job_t *j = &job;
    job.gpu = kr_gpu_entry_find(k->gpu_entry);
    job.quant = k->op == KERNEL_OP_QUANT;
    job.mxfp4_codes = job.quant && k->act.elem == ELEM_E2M1;
    job.out_bytes = gpu_launch_out_bytes(k, op->M, op->N, op->K);
    job.scale_bytes = gpu_launch_scale_bytes(k, op->M, op->K);
    int status = prepare_job(j, res, err);
    if (status == 0)
        status = alloc_outputs(j, opt, res, err);
    if (status == 0)
        status = run_launches(j, opt, res, err);
    if (status == 0) {
        int st = gpu_dev_download(d, out_host, j->first, j->out_bytes);
        if (st == KR_GPU_OK && j->scale_bytes)
            st = gpu_dev_download(d, scale_host, j->first_scale, j->scale_bytes);
        if (st != KR_GPU_OK)
            status = fail_row(j, res, VERDICT_ERROR, err, "download output", st);
    }
    if (status == 0)
        judge_launches(j, res);
    job_free(j);
    op->out = op->scale_out = NULL;
    return status;
}
