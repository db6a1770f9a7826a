#include "gpu_backend_info.h"

#include <stdio.h>
#include <string.h>

#include "kr_gpu.h"

static const char *backend_label(const char *backend)
{
    if (!strcmp(backend, "hip"))
        return "HIP";
    if (!strcmp(backend, "cuda"))
        return "CUDA";
    return backend;
}

void gpu_backend_info_format(char *line, size_t cap)
{
    char runtime[192];
    kr_gpu_runtime_info(runtime, sizeof runtime);
    snprintf(line, cap, "%s (%s)", backend_label(kr_gpu_backend()), runtime);
}

const char *gpu_backend_platform(void)
{
    const char *backend = kr_gpu_backend();
    if (!strcmp(backend, "hip"))
        return "ROCm";
    if (!strcmp(backend, "cuda"))
        return "CUDA";
    return "GPU";
}
