/* A plugin whose kernel aborts (a failed assertion, as it were): for
 * testing isolation (harness/common/isolate.h). */
#include <stdint.h>
#include <stdlib.h>

#include "plugin_util.h"

static int abort_launch(const void *x_fp8, const void *weight, const void *weight_scale,
                        const void *weight_ref, const float *x_scale, void *out, int64_t M,
                        int64_t N, int64_t K, void *stream)
{
    KREPLAY_UNUSED_OPERANDS();
    abort();
}

KREPLAY_PLUGIN_ONE_KERNEL("abort", NULL,
                          .name = "testplugin.abort",
                          .summary = "calls abort() on every launch (isolation test)",
                          KREPLAY_W4A8_PERBLOCK_OPERANDS,
                          .launch = abort_launch);
