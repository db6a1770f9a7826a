/* A plugin whose kernel segfaults on purpose: for testing isolation
 * (harness/common/isolate.h).  Loading it is harmless; launching it is not. */
#include <stdint.h>

#include "plugin.h"

static int crash_launch(const void *x_fp8, const void *weight, const void *weight_scale,
                        const void *weight_ref, const float *x_scale, void *out, int64_t M,
                        int64_t N, int64_t K, void *stream)
{
    (void)x_fp8, (void)weight, (void)weight_scale, (void)weight_ref, (void)x_scale, (void)out;
    (void)M, (void)N, (void)K, (void)stream;
    /* A store through an address the compiler cannot see is bad: a real
     * SIGSEGV, not a trap instruction. */
    volatile uintptr_t bad = 16;
    *(volatile int *)bad = 1;
    return 0;
}

static const kreplay_kernel_t crash_kernels[] = {{
    .name = "testplugin.crash",
    .summary = "segfaults on every launch (isolation test)",
    .act_format = KREPLAY_ACT_FP8_E4M3FN_TOKEN,
    .weight_order = KREPLAY_WEIGHT_CHECKPOINT,
    .scale_layout = KREPLAY_SCALES_KN,
    .weight_ref = KREPLAY_WREF_NONE,
    .launch = crash_launch,
}};

KREPLAY_PLUGIN_EXPORT const kreplay_plugin_t kreplay_plugin = {
    .abi_version = KREPLAY_PLUGIN_ABI_VERSION,
    .struct_size = sizeof(kreplay_plugin_t),
    .name = "crash",
    .kernel_count = 1,
    .kernels = crash_kernels,
};
