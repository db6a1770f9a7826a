#include "gpu_plugin_launch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kr_string.h"
#include "plugin_loader.h"

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct {
    gpu_device_t *d;
    const kernel_desc_t *k;
    const gpu_plugin_operands_t *op;
    size_t guard, out_bytes;
    uint8_t *block;             /* guard | out | guard, on the device */
    uint16_t *out;
    uint16_t *first;            /* launch 1's output, on the device */
    uint16_t *host_now;         /* a differing rerun's output, on the host */
    unsigned char *mask;        /* elements that differed in some rerun */
} plugin_job_t;

/* One launch's failure: run 1's is the outcome; a rerun's is noted. */
static void launch_failed(launch_outcome_t *res, int run, int runs, verdict_t v, const char *msg)
{
    if (run == 1) {
        res->ok = 0;
        res->verdict = v;
        kr_strlcpy(res->message, msg, sizeof res->message);
        return;
    }
    snprintf(res->reruns.rerun_failure, sizeof res->reruns.rerun_failure,
             "run %d of %d on the same inputs: %s: %.180s", run, runs, verdict_name(v), msg);
}

static int runtime_error(plugin_job_t *j, const char *what, int st, char *msg, size_t cap)
{
    snprintf(msg, cap, "GPU plugin kernel %s: %s: %s: %s", j->k->name, what,
             kr_gpu_status_name(st), gpu_dev_error(j->d));
    return -1;
}

/* Guards, poison, launch, synchronize: 0, or -1 with msg (and *v) saying why. */
static int launch_once(plugin_job_t *j, verdict_t *v, char *msg, size_t cap, double *seconds)
{
    const gpu_plugin_operands_t *o = j->op;
    int st;
    *v = VERDICT_ERROR;
    if ((st = gpu_dev_fill_u8(j->d, j->block, PLUGIN_GUARD_BYTE, j->guard)) != KR_GPU_OK ||
        (st = gpu_dev_fill_u8(j->d, (uint8_t *)j->out + j->out_bytes, PLUGIN_GUARD_BYTE, j->guard)) !=
            KR_GPU_OK ||
        (st = gpu_dev_fill_u16(j->d, j->out, PLUGIN_POISON_BF16, j->out_bytes / 2)) != KR_GPU_OK ||
        (st = gpu_dev_sync(j->d)) != KR_GPU_OK)
        return runtime_error(j, "preparing the output", st, msg, cap);
    const kreplay_kernel_t *e = plugin_kernel_entry(j->k);
    const double t0 = now_seconds();
    const int rc = e->launch(o->x, o->weight, o->scales, o->ref, o->xs, j->out, o->M, o->N, o->K,
                             j->d->stream);
    if (rc != 0) {
        snprintf(msg, cap, "GPU plugin kernel %s: launch returned %d: %s", j->k->name, rc,
                 plugin_kernel_last_error(j->k));
        return -1;
    }
    if ((st = gpu_dev_sync(j->d)) != KR_GPU_OK)
        return runtime_error(j, "running the kernel", st, msg, cap);
    *seconds = now_seconds() - t0;
    plugin_guard_scan_t g = {.guard = j->guard};
    int64_t ignored;
    if ((st = gpu_dev_scan_u8(j->d, j->block, j->guard, PLUGIN_GUARD_BYTE, 0, &g.n_before,
                              &ignored, &g.last_before)) != KR_GPU_OK ||
        (st = gpu_dev_scan_u8(j->d, (uint8_t *)j->out + j->out_bytes, j->guard, PLUGIN_GUARD_BYTE, 0,
                              &g.n_after, &g.first_after, &g.last_after)) != KR_GPU_OK)
        return runtime_error(j, "checking the guards", st, msg, cap);
    kr_error_t oob = {{0}};
    if (plugin_guard_report("GPU plugin kernel", j->k->name, &g, o->M, o->N, &oob)) {
        *v = VERDICT_OOB_WRITE;
        kr_strlcpy(msg, oob.msg, cap);
        return -1;
    }
    return 0;
}

/* A rerun that differs from launch 1: its elements marked on the host. */
static int mark_rerun(plugin_job_t *j, launch_outcome_t *res, char *msg, size_t cap)
{
    const int64_t n = j->op->M * j->op->N;
    int64_t differ = 0;
    uint64_t max_ulp = 0;
    int st = gpu_dev_diff_bf16(j->d, j->first, j->out, (size_t)n, &differ, &max_ulp);
    if (st != KR_GPU_OK)
        return runtime_error(j, "comparing a rerun", st, msg, cap);
    if (!differ)
        return 0;
    if (!j->mask) {
        j->mask = calloc((size_t)n, 1);
        j->host_now = malloc(j->out_bytes);
        if (!j->mask || !j->host_now) {
            snprintf(msg, cap, "out of memory comparing the reruns of %s", j->k->name);
            return -1;
        }
    }
    uint16_t *first = malloc(j->out_bytes);
    if (!first) {
        snprintf(msg, cap, "out of memory comparing the reruns of %s", j->k->name);
        return -1;
    }
    if ((st = gpu_dev_download(j->d, first, j->first, j->out_bytes)) != KR_GPU_OK ||
        (st = gpu_dev_download(j->d, j->host_now, j->out, j->out_bytes)) != KR_GPU_OK) {
        free(first);
        return runtime_error(j, "downloading a rerun", st, msg, cap);
    }
    for (int64_t i = 0; i < n; i++)
        if (first[i] != j->host_now[i])
            j->mask[i] = 1;
    free(first);
    (void)res;
    return 0;
}

/* Launch 1 kept on the device, its poison counted for the note. */
static int keep_first(plugin_job_t *j, launch_outcome_t *res, char *msg, size_t cap)
{
    int64_t left = 0, where = -1;
    int st = gpu_dev_scan_u16(j->d, j->out, j->out_bytes / 2, PLUGIN_POISON_BF16, &left, &where);
    if (st == KR_GPU_OK)
        st = gpu_dev_copy(j->d, j->first, j->out, j->out_bytes);
    if (st != KR_GPU_OK)
        return runtime_error(j, "keeping launch 1", st, msg, cap);
    plugin_note_unwritten(left, where, j->op->M, j->op->N, &res->info);
    return 0;
}

static int run_all(plugin_job_t *j, int runs, int64_t row_offset, uint16_t *out_host,
                   launch_outcome_t *res, int *retire)
{
    char msg[KR_ERROR_MSG_MAX];
    verdict_t v = VERDICT_ERROR;
    res->reruns.runs = 1;
    res->reruns.elements = j->op->M * j->op->N;
    for (int r = 1; r <= runs; r++) {
        double seconds = 0;
        if (launch_once(j, &v, msg, sizeof msg, &seconds) ||
            (r == 1 ? keep_first(j, res, msg, sizeof msg) : mark_rerun(j, res, msg, sizeof msg))) {
            launch_failed(res, r, runs, v, msg);
            *retire = 1;    /* the device (or what the kernel left on it) is suspect */
            break;
        }
        res->reruns.runs = r;
        if (r == 1) {
            res->ok = 1;
            res->seconds = seconds;
        }
    }
    if (j->mask)
        launch_reruns_summarize(j->mask, j->op->M * j->op->N, j->op->N, row_offset, &res->reruns);
    if (res->ok) {
        const int st = gpu_dev_download(j->d, out_host, j->first, j->out_bytes);
        if (st != KR_GPU_OK) {
            runtime_error(j, "downloading out", st, msg, sizeof msg);
            launch_failed(res, 1, runs, VERDICT_ERROR, msg);
            *retire = 1;
        }
    }
    return 0;
}

int gpu_plugin_launch(gpu_device_t *d, const kernel_desc_t *k, const gpu_plugin_operands_t *op,
                      int runs, int64_t row_offset, uint16_t *out_host, launch_outcome_t *res,
                      int *retire, kr_error_t *err)
{
    memset(res, 0, sizeof *res);
    *retire = 0;
    plugin_job_t j = {.d = d, .k = k, .op = op, .guard = plugin_guard_bytes(op->N),
                      .out_bytes = (size_t)op->M * (size_t)op->N * sizeof(uint16_t)};
    void *block = NULL, *first = NULL;
    int st = gpu_dev_alloc(d, &block, 2 * j.guard + j.out_bytes);
    if (st == KR_GPU_OK)
        st = gpu_dev_alloc(d, &first, j.out_bytes);
    int status = 0;
    if (st != KR_GPU_OK) {
        char msg[KR_ERROR_MSG_MAX];
        runtime_error(&j, "allocating out", st, msg, sizeof msg);
        launch_failed(res, 1, runs, VERDICT_ERROR, msg);
        *retire = !d->standin;
    } else {
        j.block = block;
        j.out = (uint16_t *)(void *)(j.block + j.guard);
        j.first = first;
        status = run_all(&j, runs > 1 ? runs : 1, row_offset, out_host, res, retire);
    }
    gpu_dev_free(d, block);
    gpu_dev_free(d, first);
    free(j.mask);
    free(j.host_now);
    (void)err;
    return status;
}
