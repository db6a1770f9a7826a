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

/* The kernel's name, by behaviour. */
#define GPU_PLUGIN_NAME_1 "gpu.w4a8_perblock"
#define GPU_PLUGIN_NAME_2 "gpu.segv"
#define GPU_PLUGIN_NAME_3 "gpu.hang"
#define GPU_PLUGIN_NAME_4 "gpu.oob"
#define GPU_PLUGIN_NAME_5 "gpu.empty"
#define GPU_PLUGIN_NAME_(b) GPU_PLUGIN_NAME_##b
#define GPU_PLUGIN_NAME(b) GPU_PLUGIN_NAME_(b)
#define KERNEL_NAME GPU_PLUGIN_NAME(KR_GPU_PLUGIN)

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

/* kernels/gpu's kr_gpu_w4a8_perblock: the w4a8.perblock model's order. */
#define GPU_PLUGIN_ORDER "the w4a8.perblock model's (kernels/cpu/w4a8_perblock.c), bit for bit"

KREPLAY_PLUGIN_ONE_KERNEL_FLAGS("gpu", KREPLAY_PLUGIN_GPU, kreplay_last_error, .name = KERNEL_NAME,
                                .launch = gpu_launch, KREPLAY_W4A8_PERBLOCK_OPERANDS,
                                .summary = "kreplay's SIMT w4a8.perblock as a GPU plugin",
                                .accumulation = GPU_PLUGIN_ORDER);
