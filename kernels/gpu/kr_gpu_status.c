/* The names of kr_gpu_status_t: plain C, built into kr_gpu for every backend
 * (the stub's included), so the HIP/CUDA sources and the stub cannot name a
 * status differently. */
#include "kr_gpu.h"

const char *kr_gpu_status_name(int status)
{
    static const char *const names[] = {
        [KR_GPU_OK] = "ok",
        [KR_GPU_ERR_NOT_BUILT] = "no GPU support built",
        [KR_GPU_ERR_NO_DEVICE] = "no GPU device",
        [KR_GPU_ERR_RUNTIME] = "GPU runtime error",
        [KR_GPU_ERR_ARG] = "bad argument",
        [KR_GPU_ERR_UNSUPPORTED] = "unsupported on this device",
    };
    if (status < 0 || status >= (int)(sizeof names / sizeof names[0]) || !names[status])
        return "unknown status";
    return names[status];
}
