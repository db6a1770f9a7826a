/* A plugin whose kernel never returns (a busy loop): for testing the
 * isolation timeout (harness/common/isolate.h). */
#include <stdint.h>

#include "plugin.h"

static int hang_launch(const void *x_fp8, const void *weight, const void *weight_scale,
                       const void *weight_ref, const float *x_scale, void *out, int64_t M,
                       int64_t N, int64_t K, void *stream)
{
    (void)x_fp8, (void)weight, (void)weight_scale, (void)weight_ref, (void)x_scale, (void)out;
    (void)M, (void)N, (void)K, (void)stream;
    volatile unsigned long spin = 0;
    for (;;)
        spin++;
    return 0;
}

static const kreplay_kernel_t hang_kernels[] = {{
    .name = "testplugin.hang",
    .summary = "never returns (isolation timeout test)",
    .act_format = KREPLAY_ACT_FP8_E4M3FN_TOKEN,
    .weight_order = KREPLAY_WEIGHT_CHECKPOINT,
    .scale_layout = KREPLAY_SCALES_KN,
    .weight_ref = KREPLAY_WREF_NONE,
    .launch = hang_launch,
}};

KREPLAY_PLUGIN_EXPORT const kreplay_plugin_t kreplay_plugin = {
    .abi_version = KREPLAY_PLUGIN_ABI_VERSION,
    .struct_size = sizeof(kreplay_plugin_t),
    .name = "hang",
    .kernel_count = 1,
    .kernels = hang_kernels,
};
