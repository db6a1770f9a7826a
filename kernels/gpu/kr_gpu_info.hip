// kr_gpu_runtime_info (kr_gpu.h): what 'kreplay --version' says of the GPU
// build.  KR_GPU_TARGETS is the device code list the build system compiled.
#include "vendor.h"

#if !KR_GPU_BARE
#include <stdio.h>

#include "kr_gpu.h"

#ifndef KR_GPU_TARGETS
#define KR_GPU_TARGETS "unknown"
#endif

extern "C" int kr_gpu_runtime_info(char *buf, size_t cap)
{
    int rt = 0;
    const hipError_t e = hipRuntimeGetVersion(&rt);
    if (e != hipSuccess) {
        (void)hipGetLastError();
        snprintf(buf, cap, "runtime version unknown (%s), device code %s", hipGetErrorString(e),
                 KR_GPU_TARGETS);
        return KR_GPU_ERR_RUNTIME;
    }
#if KR_GPU_CUDA
    // CUDA encodes 1000 * major + 10 * minor.
    snprintf(buf, cap, "runtime %d.%d, device code %s", rt / 1000, rt % 1000 / 10, KR_GPU_TARGETS);
#else
    // HIP encodes 10000000 * major + 100000 * minor + patch.
    snprintf(buf, cap, "runtime %d.%d.%d, device code %s", rt / 10000000, rt / 100000 % 100,
             rt % 100000, KR_GPU_TARGETS);
#endif
    return KR_GPU_OK;
}
#endif
