#include "isolate_kernel.h"

#include <string.h>

/* The kernel's info first, then the output bits (64-byte aligned, as a
 * kernel writing whole vectors expects). */
#define INFO_BYTES ((sizeof(kernel_run_info_t) + 63) / 64 * 64)

static int kernel_child(void *ctx, void *out, size_t out_bytes, kr_error_t *err)
{
    (void)out_bytes;
    const kernel_call_t *job = ctx;
    kernel_run_info_t info;
    memset(&info, 0, sizeof info);
    int rc = job->k->run_cpu(job->k, job->in, job->act, job->opt,
                             (uint16_t *)(void *)((char *)out + INFO_BYTES), &info, err);
    memcpy(out, &info, sizeof info);
    return rc;
}

int isolate_run_kernel(const kernel_desc_t *k, const kernel_inputs_t *in, const kernel_act_t *act,
                       const kernel_options_t *opt, uint16_t *out, kernel_run_info_t *info,
                       double timeout_s, isolate_result_t *res, kr_error_t *err)
{
    if (!k->run_cpu)
        return kr_fail(err, "isolate: kernel %s has no run function", k->name);
    kernel_call_t job = {.k = k, .in = in, .act = act, .opt = opt};
    const size_t out_bytes = (size_t)in->M * (size_t)in->N * sizeof(uint16_t);
    _Alignas(64) unsigned char head[INFO_BYTES];
    if (isolate_run_split(kernel_child, &job, head, INFO_BYTES, out, out_bytes, timeout_s, res, err))
        return -1;
    if (res->status == ISOLATE_OK && info)
        memcpy(info, head, sizeof *info);
    return 0;
}

verdict_t isolate_verdict(const isolate_result_t *r)
{
    switch (r->status) {
    case ISOLATE_OK: return VERDICT_PASS;
    case ISOLATE_FAILED: return VERDICT_ERROR;
    case ISOLATE_CRASHED: return VERDICT_CRASHED;
    case ISOLATE_TIMEOUT: return VERDICT_TIMEOUT;
    }
    return VERDICT_ERROR;
}
