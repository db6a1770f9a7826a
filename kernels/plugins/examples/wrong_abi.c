/* A plugin built against a (hypothetical) later ABI version: kreplay must
 * refuse it with a message naming the file and both versions. */
#include <stdint.h>

#include "plugin.h"

static int never_launch(const void *x_fp8, const void *weight, const void *weight_scale,
                        const void *weight_ref, const float *x_scale, void *out, int64_t M,
                        int64_t N, int64_t K, void *stream)
{
    (void)x_fp8, (void)weight, (void)weight_scale, (void)weight_ref, (void)x_scale, (void)out;
    (void)M, (void)N, (void)K, (void)stream;
    return 1;
}

static const kreplay_kernel_t wrong_kernels[] = {{
    .name = "testplugin.wrong_abi",
    .act_format = KREPLAY_ACT_FP8_E4M3FN_TOKEN,
    .launch = never_launch,
}};

KREPLAY_PLUGIN_EXPORT const kreplay_plugin_t kreplay_plugin = {
    .abi_version = KREPLAY_PLUGIN_ABI_VERSION + 1,
    .struct_size = sizeof(kreplay_plugin_t),
    .name = "wrong_abi",
    .kernel_count = 1,
    .kernels = wrong_kernels,
};
