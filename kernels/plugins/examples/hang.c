/* A plugin whose kernel never returns (a busy loop): for testing the
 * isolation timeout (harness/common/isolate.h). */
#include <stdint.h>

#include "plugin_util.h"

static int hang_launch(const void *x_fp8, const void *weight, const void *weight_scale,
                       const void *weight_ref, const float *x_scale, void *out, int64_t M,
                       int64_t N, int64_t K, void *stream)
{
    KREPLAY_UNUSED_OPERANDS();
    volatile unsigned long spin = 0;
    for (;;)
        spin++;
    return 0;
}

KREPLAY_PLUGIN_ONE_KERNEL("hang", NULL,
                          .name = "testplugin.hang",
                          .summary = "never returns (isolation timeout test)",
                          KREPLAY_W4A8_PERBLOCK_OPERANDS,
                          .launch = hang_launch);
