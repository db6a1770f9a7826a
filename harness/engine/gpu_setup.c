#include "gpu_setup.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_device.h"
#include "gpu_session.h"
#include "plugin_loader.h"

int gpu_list_parse(const char *text, gpu_list_t *l, kr_error_t *err)
{
    memset(l, 0, sizeof *l);
    if (!text || !strcmp(text, "all"))
        return 0;
    const char *p = text;
    for (;;) {
        char *end;
        errno = 0;
        const long v = strtol(p, &end, 10);
        if (end == p || errno || v < 0 || v > 1023 || (*end && *end != ','))
            return kr_fail(err, "'%s': expected GPU indices such as 0,1 (or all)", text);
        if (l->n == GPU_LIST_MAX)
            return kr_fail(err, "'%s': at most %d GPUs", text, GPU_LIST_MAX);
        l->index[l->n++] = (int)v;
        if (!*end)
            return 0;
        p = end + 1;
    }
}

int gpu_model_rows_parse(const char *text, int64_t *rows, kr_error_t *err)
{
    if (!strcmp(text, "all")) {
        *rows = REPLAY_MODEL_ROWS_ALL;
        return 0;
    }
    char *end;
    errno = 0;
    const long long v = strtoll(text, &end, 10);
    if (end == text || *end || errno || v < 0)
        return kr_fail(err, "'%s': expected a number of rows >= 0 (0: no model check), or all", text);
    *rows = v;
    return 0;
}

static int any_extra(const replay_options_t *opt, int (*test)(const kernel_desc_t *))
{
    for (int i = 0; i < opt->n_extra_kernels; i++)
        if (test(opt->extra_kernels[i]))
            return 1;
    return 0;
}

int gpu_setup_needs_device(const replay_options_t *opt)
{
    return opt->device_gpu || any_extra(opt, plugin_kernel_is_gpu);
}

int gpu_setup_open(replay_options_t *opt, int device, kr_error_t *err)
{
    opt->gpu = NULL;
    const int on_device = gpu_setup_needs_device(opt);
    if (!on_device && !any_extra(opt, plugin_kernel_is_persistent))
        return 0;
    const gpu_session_options_t so = {
        .device = on_device ? device : -1,
        .standin = gpu_device_standin_requested(),
        .in_process = opt->no_isolate,
        .timeout_s = opt->timeout_s,
        .extra_kernels = opt->extra_kernels,
        .n_extra_kernels = opt->n_extra_kernels,
    };
    if (gpu_session_open(&opt->gpu, &so, err))
        return -1;
    gpu_session_prewarm(opt->gpu);
    return 0;
}

int gpu_setup_ready(replay_options_t *opt, kr_error_t *err)
{
    if (!opt->gpu || !gpu_setup_needs_device(opt))
        return 0;
    char name[128], why[KR_ERROR_MSG_MAX];
    if (gpu_session_device(opt->gpu, name, sizeof name, why, sizeof why))
        return 0;
    return kr_fail(err, "%s", why);
}

void gpu_setup_close(replay_options_t *opt)
{
    gpu_session_close(opt->gpu);
    opt->gpu = NULL;
}
