/* GPU plugins for the stand-in device (KREPLAY_GPU_STANDIN=1): flagged
 * KREPLAY_PLUGIN_GPU, so kreplay launches them in its GPU worker with
 * "device" pointers and a stream, which under the stand-in are host
 * pointers and NULL: so they are plain C.  On a real GPU their launch would
 * read device memory from the host; they exist for the worker's tests on
 * machines without one (tests/test_gpu_worker.c).  One behaviour per build,
 * chosen by KR_GPU_STANDIN:
 *   1 ok     the W4A8 per-block product (w4a8_spec.h)
 *   2 crash  segfaults in launch
 *   3 hang   never returns
 *   4 oob    the product, then 64 elements written past the end of out */
#include <stdint.h>

#include "w4a8_spec.h"

#ifndef KR_GPU_STANDIN
#error "build with -DKR_GPU_STANDIN=1..4"
#endif

#if KR_GPU_STANDIN == 1
#define KERNEL_NAME "gpustandin.w4a8_ok"
#elif KR_GPU_STANDIN == 2
#define KERNEL_NAME "gpustandin.crash"
#elif KR_GPU_STANDIN == 3
#define KERNEL_NAME "gpustandin.hang"
#else
#define KERNEL_NAME "gpustandin.oob"
#endif

static KREPLAY_LAUNCH(standin_launch)
{
    (void)weight_ref;
    if (stream)
        return kreplay_fail("a stand-in GPU plugin: expected the stand-in's NULL stream", 1);
#if KR_GPU_STANDIN == 2
    volatile uintptr_t bad = 16;
    *(volatile int *)bad = 1;
#elif KR_GPU_STANDIN == 3
    volatile unsigned long spin = 0;
    for (;;)
        spin++;
#endif
    spec_rows(x_fp8, weight, weight_scale, x_scale, out, 0, M, N, K);
#if KR_GPU_STANDIN == 4
    for (int64_t i = 0; i < 64; i++)
        ((uint16_t *)out)[M * N + i] = 0x3F80;
#endif
    return kreplay_ok();
}

KREPLAY_PLUGIN_ONE_KERNEL_FLAGS("gpustandin", KREPLAY_PLUGIN_GPU, kreplay_last_error,
                                .name = KERNEL_NAME,
                                .summary = "a stand-in GPU plugin (host pointers; worker tests)",
                                .accumulation = "per 32-block: s += x*w over k ascending; acc += "
                                                "s * 2^(E-127) over blocks; out = bf16(acc * x_scale[m])",
                                KREPLAY_W4A8_PERBLOCK_OPERANDS, .k_multiple = 32,
                                .launch = standin_launch);
