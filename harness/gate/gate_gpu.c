#include "gate_gpu.h"

#include <string.h>

#include "gpu_session.h"

const char *gate_gpu_device_name(const gate_options_t *o, const char *suite_device)
{
    return o->device ? o->device : suite_device;
}

int gate_gpu_setup(const char *suite_path, const char *suite_device, const gate_options_t *o,
                   replay_options_t *ropt, gpu_list_t *gpus, kr_error_t *err)
{
    kr_error_t e = {{0}};
    ropt->device_gpu = !strcmp(gate_gpu_device_name(o, suite_device), "gpu");
    if (gpu_list_parse(o->gpus, gpus, &e))
        return kr_fail(err, "--gpus: %s", e.msg);
    if (o->model_rows && gpu_model_rows_parse(o->model_rows, &ropt->model_rows, &e))
        return kr_fail(err, "--model-rows: %s", e.msg);
    if (gpu_setup_open(ropt, gpus->n ? gpus->index[0] : 0, &e) || gpu_setup_ready(ropt, &e)) {
        gpu_setup_close(ropt);
        return kr_fail(err, "%s: device gpu: %s", suite_path, e.msg);
    }
    return 0;
}

int gate_gpu_lanes(replay_options_t *ropt, const gpu_list_t *gpus, int *devices)
{
    if (!ropt->device_gpu || !ropt->gpu)
        return 1;
    int n = gpus->n;
    for (int i = 0; i < n; i++)
        devices[i] = gpus->index[i];
    if (n == 0) {
        n = gpu_session_device_count(ropt->gpu);
        if (n > GPU_LIST_MAX)
            n = GPU_LIST_MAX;
        for (int i = 0; i < n; i++)
            devices[i] = i;
    }
    return n > 1 ? n : 1;
}
