/* gpu_backend_info: one line naming the GPU backend this binary was built
 * with (HIP, CUDA or none) and, where the runtime answers, its version and
 * the device code built in; printed by 'kreplay --version'. */
#ifndef KR_GPU_BACKEND_INFO_H
#define KR_GPU_BACKEND_INFO_H

#include <stddef.h>

/* e.g. "HIP (runtime 5.2.21153, device code gfx1030)", "none (built without GPU support)". */
void gpu_backend_info_format(char *line, size_t cap);

/* "ROCm" for HIP builds, "CUDA" for CUDA builds, "GPU" otherwise: the word a
 * "no ... device" message uses. */
const char *gpu_backend_platform(void);

#endif
