/* A GPU plugin (KREPLAY_PLUGIN_GPU) built from kreplay's own GPU sources: the
 * W4A8 per-block kernel of kernels/gpu (kr_gpu_w4a8_perblock, bit-identical
 * to the w4a8.perblock model), launched on the device pointers and the
 * stream kreplay's GPU worker hands it.  CUDA builds only; the library links
 * kr_gpu statically and the CUDA runtime as kreplay does, so the pointers
 * and the stream are the worker's own.  One behaviour per build, chosen by
 * KR_GPU_PLUGIN (tests/test_gpu_plugin.c, the benchmark):
 *   1 w4a8    the kernel, correct
 *   2 segv    a segfault on the host during launch
 *   3 hang    the kernel queued, then a launch that never returns
 *   4 oob     the kernel, then 64 elements written past the end of out on
 *             the device (a tile overrun)
 *   5 empty   returns at once (the launch overhead; out stays poisoned) */
#include <stdint.h>
#include <unistd.h>

#include "kr_gpu.h"
#include "plugin_util.h"

#ifndef KR_GPU_PLUGIN
#error "build with -DKR_GPU_PLUGIN=1..5"
#endif

#if KR_GPU_PLUGIN == 1
#define KERNEL_NAME "gpu.w4a8_perblock"
#elif KR_GPU_PLUGIN == 2
#define KERNEL_NAME "gpu.segv"
#elif KR_GPU_PLUGIN == 3
#define KERNEL_NAME "gpu.hang"
#elif KR_GPU_PLUGIN == 4
#define KERNEL_NAME "gpu.oob"
#else
#define KERNEL_NAME "gpu.empty"
#endif

static KREPLAY_LAUNCH(gpu_launch)
{
    (void)weight_ref;
#if KR_GPU_PLUGIN == 5
    KREPLAY_UNUSED_OPERANDS();
    return kreplay_ok();
#else
#if KR_GPU_PLUGIN == 2
    volatile uintptr_t bad = 16;
    *(volatile int *)bad = 1;
#endif
    /* KREPLAY_SCALES_KN: the production layout, [K/32, N]. */
    const kr_gpu_mxfp4_t w = {.packed = weight, .scales = weight_scale, .scale_layout = 1,
                              .e8m0_zero_is_zero = 0, .N = N, .K = K};
    int st = kr_gpu_w4a8_perblock(x_fp8, 0, x_scale, M, &w, out, stream);
#if KR_GPU_PLUGIN == 3
    for (;;)
        pause();
#elif KR_GPU_PLUGIN == 4
    if (st == KR_GPU_OK)
        st = kr_gpu_fill_u16((uint16_t *)out + M * N, 0x3F80, 64, stream);
#endif
    return st == KR_GPU_OK ? kreplay_ok() : kreplay_fail(kr_gpu_last_error(), st);
#endif
}

KREPLAY_PLUGIN_ONE_KERNEL_FLAGS("gpu", KREPLAY_PLUGIN_GPU, kreplay_last_error,
                                .name = KERNEL_NAME,
                                .summary = "kreplay's SIMT w4a8.perblock as a GPU plugin",
                                .accumulation = "per 32-block: s += x*w over k ascending; acc += "
                                                "s * 2^(E-127) over blocks; out = bf16(acc * x_scale[m])",
                                KREPLAY_W4A8_PERBLOCK_OPERANDS, .k_multiple = 32,
                                .launch = gpu_launch);
