// AMD matrix-unit W4A8 for gfx12 (RDNA4, wave32): fp8 x fp8 -> f32 with
// __builtin_amdgcn_wmma_f32_16x16x16_fp8_fp8_w32_gfx12, which emits
// v_wmma_f32_16x16x16_fp8_fp8.  Same operands and epilogue as the NVIDIA
// kr_gpu_w4a8_mma: x [M, K] e4m3fn, pre-shifted w8 [N, K] e4m3fn,
// out = bf16(acc * (x_scale[m] * 2^(ref[n] - 127))).
//
// Lane layout (NUMERICS.md, "Matrix units", from composable_kernel):
//   A: lane l holds row l % 16, k = 8 * (l / 16) + i, i = 0..7 (8 fp8 in 2 x i32)
//   B: lane l holds column l % 16, the same k
//   C: element i of lane l is row 8 * (l / 16) + i, column l % 16
// The gfx12 WMMA's internal accumulation is NOT documented (open question 1):
// like the NVIDIA variant, this is not bit-faithful to the fp32 model.
//
// Compiled only for gfx12 device code; CI compiles it device-only with
// clang-19 (tests/test_gfx1201_compile.c checks the instruction is there).
#include "vendor.h"
#include "kr_gpu_numerics.h"

#define KR_WMMA_WAVES 4   // a block is 2 x 2 waves, a 32 x 32 output tile

#if !KR_GPU_CUDA
typedef int kr_v2i __attribute__((ext_vector_type(2)));
typedef float kr_v8f __attribute__((ext_vector_type(8)));

__global__ void __launch_bounds__(32 * KR_WMMA_WAVES) kr_k_w4a8_wmma_gfx12(
    const uint8_t *KR_RESTRICT x, const float *KR_RESTRICT xs, int M,
    const uint8_t *KR_RESTRICT w8, const uint8_t *KR_RESTRICT ref, int zmode, int N, int K,
    uint16_t *KR_RESTRICT out)
{
#if defined(__HIP_DEVICE_COMPILE__) && defined(__GFX12__)
    const int tid = threadIdx.x, wave = tid >> 5, lane = tid & 31;
    const int mt = blockIdx.y * 32 + 16 * (wave >> 1);
    const int nt = blockIdx.x * 32 + 16 * (wave & 1);
    const int arow = mt + (lane & 15), bcol = nt + (lane & 15);
    const int koff = 8 * (lane >> 4);
    const kr_v2i zero = {0, 0};
    kr_v8f c = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    for (int k = 0; k < K; k += 16) {
        const kr_v2i a = arow < M ? *(const kr_v2i *)(x + (size_t)arow * K + k + koff) : zero;
        const kr_v2i b = bcol < N ? *(const kr_v2i *)(w8 + (size_t)bcol * K + k + koff) : zero;
        c = __builtin_amdgcn_wmma_f32_16x16x16_fp8_fp8_w32_gfx12(a, b, c);
    }
    if (bcol < N) {
        const float epi = kr_e8m0_decode(ref[bcol], zmode);
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const int row = mt + 8 * (lane >> 4) + i;
            if (row < M)
                out[(size_t)row * N + bcol] = kr_bf16_encode(kr_fmul(c[i], kr_fmul(xs[row], epi)));
        }
    }
#else
    (void)x; (void)xs; (void)M; (void)w8; (void)ref; (void)zmode; (void)N; (void)K; (void)out;
#endif
}
#endif  // !KR_GPU_CUDA

#if !KR_GPU_BARE
#include <string.h>
#include "kr_gpu.h"

extern "C" int kr_gpu_internal_fail(int status, const char *what, const char *detail);

extern "C" int kr_gpu_w4a8_wmma_gfx12(const uint8_t *x, const float *x_scale, int64_t M,
                                      const uint8_t *w8, const uint8_t *ref, int e8m0_zero_is_zero,
                                      int64_t N, int64_t K, uint16_t *out, kr_gpu_stream_t stream)
{
#if KR_GPU_HIP
    if (M <= 0 || N <= 0 || K <= 0 || K % 16)
        return kr_gpu_internal_fail(KR_GPU_ERR_ARG, "w4a8_wmma_gfx12: bad shape", NULL);
    int dev = 0;
    hipDeviceProp_t p;
    if (hipGetDevice(&dev) != hipSuccess || hipGetDeviceProperties(&p, dev) != hipSuccess)
        return kr_gpu_internal_fail(KR_GPU_ERR_RUNTIME, "w4a8_wmma_gfx12: device query", NULL);
    if (strncmp(p.gcnArchName, "gfx12", 5) != 0)
        return kr_gpu_internal_fail(KR_GPU_ERR_UNSUPPORTED, "w4a8_wmma_gfx12: needs a gfx12 device",
                                    p.gcnArchName);
    dim3 grid((unsigned)((N + 31) / 32), (unsigned)((M + 31) / 32));
    kr_k_w4a8_wmma_gfx12<<<grid, 32 * KR_WMMA_WAVES, 0, (hipStream_t)stream>>>(
        x, x_scale, (int)M, w8, ref, e8m0_zero_is_zero, (int)N, (int)K, out);
    hipError_t e = hipGetLastError();
    if (e != hipSuccess)
        return kr_gpu_internal_fail(KR_GPU_ERR_RUNTIME, "launch w4a8_wmma_gfx12", hipGetErrorString(e));
    return KR_GPU_OK;
#else
    (void)x; (void)x_scale; (void)M; (void)w8; (void)ref; (void)e8m0_zero_is_zero;
    (void)N; (void)K; (void)out; (void)stream;
    return kr_gpu_internal_fail(KR_GPU_ERR_UNSUPPORTED,
                                "w4a8_wmma_gfx12: AMD gfx12 only (this is a CUDA build)", NULL);
#endif
}
#endif
