#include "gpu_run.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats.h"
#include "gpu_backend_info.h"
#include "gpu_device.h"
#include "gpu_launch.h"
#include "kr_gpu.h"
#include "kr_gpu_entry.h"
#include "kr_string.h"

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

int gpu_run_declined(const kernel_desc_t *k, const gpu_run_options_t *opt, gpu_run_result_t *res)
{
    if (gpu_kernel_runs(k, opt->variant) &&
        !(opt->fault && k->gpu_entry != kr_gpu_entry_fault_host()))
        return 0;
    const kernel_desc_t *host = fault_host();
    char faults[96] = "";
    if (opt->fault)
        snprintf(faults, sizeof faults, " (faults run on %s)", host ? host->name : "no kernel");
    snprintf(res->note, sizeof res->note, "no GPU kernel for %s%s", res->kernel, faults);
    res->verdict = VERDICT_UNSUPPORTED;
    return 1;
}

void gpu_run_result_init(gpu_run_result_t *res, const kernel_desc_t *k, int64_t M, int64_t N,
                         int64_t K, const gpu_run_options_t *opt, int standin)
{
    memset(res, 0, sizeof *res);
    res->M = M;
    res->N = N;
    res->K = K;
    res->first_unwritten = -1;
    res->ms_median = res->ms_min = NAN;
    res->tflops = res->gbps = NAN;
    res->verdict = VERDICT_PASS;
    const char *matrix = standin || strcmp(kr_gpu_backend(), "hip") ? "+mma" : "+wmma";
    snprintf(res->kernel, sizeof res->kernel, "%s%s%s%s", k ? k->name : "?",
             opt->variant == GPU_VARIANT_MATRIX ? matrix : "", opt->fault ? "+fault:" : "",
             opt->fault ? opt->fault : "");
}

/* ---- in process: the operands uploaded for one run ---- */

typedef struct {
    gpu_device_t *d;
    void *ptr[12];
    int count;
} uploads_t;

static int upload(uploads_t *u, const void **dst, const void *host, size_t bytes)
{
    void *p = NULL;
    *dst = NULL;
    if (!host)
        return KR_GPU_OK;
    if (u->count >= (int)(sizeof u->ptr / sizeof u->ptr[0]))
        return KR_GPU_ERR_ARG;
    int st = gpu_dev_alloc(u->d, &p, bytes);
    if (st == KR_GPU_OK) {
        u->ptr[u->count++] = p;
        st = gpu_dev_upload(u->d, p, host, bytes);
    }
    *dst = p;
    return st;
}

/* The bf16 bits of a bf16 kernel's activations (its act holds their fp32 values). */
static uint16_t *bf16_bits_of(const kernel_act_t *act, int64_t n)
{
    uint16_t *xb = malloc((size_t)n * sizeof(uint16_t));
    for (int64_t i = 0; xb && i < n; i++)
        xb[i] = bf16_encode(act->dequant[i]);   /* already bf16 values: exact */
    return xb;
}

/* Every operand the descriptor's formats call for, uploaded. */
static int upload_operands(uploads_t *u, const kernel_desc_t *k, const kernel_inputs_t *in,
                           const kernel_act_t *act, kr_gpu_operands_t *op)
{
    const size_t M = (size_t)in->M, N = (size_t)in->N, K = (size_t)in->K;
    const mxfp4_weight_t *w = &in->weight;
    int st = KR_GPU_OK;
    *op = (kr_gpu_operands_t){.M = in->M, .N = in->N, .K = in->K, .dispatch_M = in->dispatch_M};
    if (k->op == KERNEL_OP_QUANT)
        return upload(u, (const void **)&op->xf, in->x, M * K * sizeof(float));
    if (act && act->dequant && (st = upload(u, (const void **)&op->x_dequant, act->dequant,
                                            M * K * sizeof(float))) != KR_GPU_OK)
        return st;
    if (k->act.elem == ELEM_BF16) {
        uint16_t *xb = act && act->dequant ? bf16_bits_of(act, in->M * in->K) : NULL;
        if (act && act->dequant && !xb)
            return KR_GPU_ERR_ARG;
        st = upload(u, (const void **)&op->x_bf16, xb, M * K * 2);
        free(xb);
        if (st == KR_GPU_OK)
            st = upload(u, (const void **)&op->w_bf16, in->weight_bf16, N * K * 2);
        return st;
    }
    op->x_fmt = act && act->fp8_format == FP8_E4M3FNUZ ? 1 : 0;
    op->w = (kr_gpu_mxfp4_t){.scale_layout = w->layout == SCALE_LAYOUT_KN ? 1 : 0,
                             .e8m0_zero_is_zero = w->e8m0_mode == E8M0_ZERO_IS_ZERO,
                             .N = in->N, .K = in->K};
    if (act && (st = upload(u, (const void **)&op->x, act->codes, M * K)) == KR_GPU_OK &&
        act->kind == ACT_FP8_PER_TOKEN)
        st = upload(u, (const void **)&op->xs, act->token_scale, M * sizeof(float));
    else if (act && st == KR_GPU_OK)
        st = upload(u, (const void **)&op->a_scales, act->block_scale, M * (K / 32));
    if (st == KR_GPU_OK && w->packed)
        st = upload(u, (const void **)&op->w.packed, w->packed, N * K / 2);
    if (st == KR_GPU_OK && w->packed)
        st = upload(u, (const void **)&op->w.scales, w->scales, N * K / 32);
    if (st == KR_GPU_OK && in->weight_ref && in->weight_ref_len == in->N)
        st = upload(u, (const void **)&op->case_ref, in->weight_ref, N);
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
    gpu_run_result_init(res, k, in->M, in->N, in->K, &opt, 0);
    char why[256];
    const int standin = gpu_device_standin_requested();
    if (gpu_run_declined(k, &opt, res))
        return kr_fail(err, "%s", res->note);
    if (!standin && !gpu_available(why, sizeof why)) {
        kr_strlcpy(res->note, why, sizeof res->note);
        res->verdict = VERDICT_UNSUPPORTED;
        return kr_fail(err, "%s", res->note);
    }
    gpu_device_t d;
    if (gpu_device_open(&d, standin, opt.device, err)) {
        res->verdict = VERDICT_ERROR;
        kr_strlcpy(res->note, err->msg, sizeof res->note);
        return -1;
    }
    kr_strlcpy(res->device, d.name, sizeof res->device);
    uploads_t u = {.d = &d};
    kr_gpu_operands_t op;
    const size_t out_bytes = gpu_launch_out_bytes(k, in->M, in->N, in->K);
    const size_t scale_bytes = gpu_launch_scale_bytes(k, in->M, in->K);
    void *out = malloc(out_bytes), *scales = scale_bytes ? malloc(scale_bytes) : NULL;
    int status = 0;
    int st = upload_operands(&u, k, in, act, &op);
    if (!out || (scale_bytes && !scales)) {
        res->verdict = VERDICT_ERROR;
        status = kr_fail(err, "out of memory for the GPU run's output");
    } else if (st != KR_GPU_OK) {
        res->verdict = VERDICT_ERROR;
        snprintf(res->note, sizeof res->note, "upload operands: %s: %s", kr_gpu_status_name(st),
                 gpu_dev_error(&d));
        status = kr_fail(err, "%s", res->note);
    } else {
        status = gpu_launch_twin(&d, k, kopt, &op, &opt, res, out, scales, err);
    }
    for (int i = 0; i < u.count; i++)
        gpu_dev_free(&d, u.ptr[i]);
    gpu_device_close(&d);
    if (status == 0 && k->op == KERNEL_OP_QUANT) {
        res->q_codes = out;
        if (k->act.elem == ELEM_E2M1)
            res->q_block_scale = scales;
        else
            res->q_token_scale = scales;
        return 0;
    }
    free(scales);
    if (status == 0)
        res->out = out;
    else
        free(out);
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
