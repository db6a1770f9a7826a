/* A plugin whose kernel segfaults on purpose: for testing isolation
 * (harness/common/isolate.h).  Loading it is harmless; launching it is not. */
#include <stdint.h>

#include "plugin_util.h"

static int crash_launch(const void *x_fp8, const void *weight, const void *weight_scale,
                        const void *weight_ref, const float *x_scale, void *out, int64_t M,
                        int64_t N, int64_t K, void *stream)
{
    KREPLAY_UNUSED_OPERANDS();
    /* A store through an address the compiler cannot see is bad: a real
     * SIGSEGV, not a trap instruction. */
    volatile uintptr_t bad = 16;
    *(volatile int *)bad = 1;
    return 0;
}

KREPLAY_PLUGIN_ONE_KERNEL("crash", NULL,
                          .name = "testplugin.crash",
                          .summary = "segfaults on every launch (isolation test)",
                          KREPLAY_W4A8_PERBLOCK_OPERANDS,
                          .launch = crash_launch);
