// NVIDIA matrix-unit W4A8: fp8 e4m3 x e4m3 -> f32 with
// mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 (sm_89+), on the folded
// path's operands: activations x [M, K] e4m3fn and the pre-shifted weight
// w8 [N, K] e4m3fn (kr_gpu_w4a8_preshift).  Epilogue as w4a8.folded:
// out = bf16(acc * (x_scale[m] * 2^(ref[n] - 127))).
//
// NOT bit-faithful to the fp32 model: the tensor core's internal
// accumulation is not IEEE fp32 in k order (NUMERICS.md, "Matrix units").
// tests/test_gpu.c measures the difference.
//
// Tiling: 128 x BN block tile (BN = 256 by default, 128 selectable), BK = 64
// bytes of K per stage, 4 cp.async stages, 8 warps as 2 (M) x 4 (N), warp
// tile 64 x BN/4.  On sm_90 ptxas lowers each fp8 m16n8k32 to two
// HMMA.16816.F32 (f16) after unpacking e4m3 to f16: Hopper's fp8 tensor-core
// rate is reachable only through wgmma (QGMMA, sm_90a), which this is not.
// Shared rows are 64 bytes (4 x 16-byte chunks), chunk c of row r stored at
// chunk c ^ ((r >> 1) & 3) so ldmatrix's 8 row addresses hit 8 bank groups.
#include "vendor.h"
#include "kr_gpu_numerics.h"

#if KR_GPU_CUDA
#include "kr_gpu.h"

#define MMA_BM 128
#define MMA_BK 64
#define MMA_STAGES 4
#define MMA_THREADS 256
#define MMA_GROUP_M 16

static __device__ __forceinline__ uint32_t kr_swz(int row, int chunk)
{
    return (uint32_t)(row * MMA_BK + ((chunk ^ ((row >> 1) & 3)) << 4));
}

static __device__ __forceinline__ void kr_cp_async16(uint32_t dst, const void *src, int bytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes));
}

static __device__ __forceinline__ void kr_ldsm_x4(uint32_t addr, uint32_t &r0, uint32_t &r1,
                                                  uint32_t &r2, uint32_t &r3)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(addr));
}

static __device__ __forceinline__ void kr_mma_e4m3(float c[4], const uint32_t a[4], uint32_t b0,
                                                   uint32_t b1)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
    (void)c; (void)a; (void)b0; (void)b1;
    __trap();
#endif
}

// Block tile 128 x BN, 8 warps as 2 (M) x 4 (N), warp tile 64 x BN/4.
// out32 != NULL: write the fp32 value acc * f instead of bf16 (measurement).
template <int BN>
__global__ void __launch_bounds__(MMA_THREADS, BN == 128 ? 2 : 1) kr_k_w4a8_mma(
    const uint8_t *KR_RESTRICT x, const float *KR_RESTRICT xs, int M, const uint8_t *KR_RESTRICT w8,
    const uint8_t *KR_RESTRICT ref, int zmode, int N, int K, uint16_t *KR_RESTRICT out,
    float *KR_RESTRICT out32)
{
    constexpr int WN = BN / 4, NI = WN / 8, STAGE = (MMA_BM + BN) * MMA_BK;
    extern __shared__ __align__(128) uint8_t kr_mma_smem[];
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int warp_m = warp >> 2, warp_n = warp & 3;
    // Grouped block order (GROUP_M M-blocks walk the N-blocks together) so a
    // weight tile is reused from L2 by the M-blocks running at the same time.
    const int grid_n = (N + BN - 1) / BN, grid_m = (M + MMA_BM - 1) / MMA_BM;
    const int pid = blockIdx.x, per_group = MMA_GROUP_M * grid_n;
    const int first_m = (pid / per_group) * MMA_GROUP_M;
    const int gsize = min(grid_m - first_m, MMA_GROUP_M);
    const int m0 = (first_m + (pid % per_group) % gsize) * MMA_BM;
    const int n0 = ((pid % per_group) / gsize) * BN;
    const uint32_t sbase = (uint32_t)__cvta_generic_to_shared(kr_mma_smem);
    const int KT = K / MMA_BK;

    auto load_stage = [&](int stage, int kt) {
        const uint32_t sa = sbase + stage * STAGE;
        const uint32_t sb = sa + MMA_BM * MMA_BK;
#pragma unroll
        for (int i = 0; i < MMA_BM * 4 / MMA_THREADS; i++) {
            const int id = tid + i * MMA_THREADS;
            const int row = id >> 2, chunk = id & 3;
            const int gm = m0 + row;
            const uint8_t *src = gm < M ? x + (size_t)gm * K + kt * MMA_BK + chunk * 16 : x;
            kr_cp_async16(sa + kr_swz(row, chunk), src, gm < M ? 16 : 0);
        }
#pragma unroll
        for (int i = 0; i < BN * 4 / MMA_THREADS; i++) {
            const int id = tid + i * MMA_THREADS;
            const int row = id >> 2, chunk = id & 3;
            const int gn = n0 + row;
            const uint8_t *src = gn < N ? w8 + (size_t)gn * K + kt * MMA_BK + chunk * 16 : w8;
            kr_cp_async16(sb + kr_swz(row, chunk), src, gn < N ? 16 : 0);
        }
    };

    float acc[4][NI][4];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < NI; j++)
#pragma unroll
            for (int c = 0; c < 4; c++)
                acc[i][j][c] = 0.0f;

#pragma unroll
    for (int s = 0; s < MMA_STAGES - 1; s++) {
        if (s < KT)
            load_stage(s, s);
        asm volatile("cp.async.commit_group;\n" ::);
    }

    for (int kt = 0; kt < KT; kt++) {
        asm volatile("cp.async.wait_group %0;\n" ::"n"(MMA_STAGES - 2));
        __syncthreads();
        const int pf = kt + MMA_STAGES - 1;
        if (pf < KT)
            load_stage(pf % MMA_STAGES, pf);
        asm volatile("cp.async.commit_group;\n" ::);

        const uint32_t sa = sbase + (kt % MMA_STAGES) * STAGE;
        const uint32_t sb = sa + MMA_BM * MMA_BK;
#pragma unroll
        for (int kk = 0; kk < 2; kk++) {
            uint32_t a[4][4], b[NI][2];
#pragma unroll
            for (int mi = 0; mi < 4; mi++) {
                const int row = warp_m * 64 + mi * 16 + (lane & 15);
                kr_ldsm_x4(sa + kr_swz(row, 2 * kk + (lane >> 4)), a[mi][0], a[mi][1], a[mi][2],
                           a[mi][3]);
            }
#pragma unroll
            for (int nj = 0; nj < NI / 2; nj++) {
                const int j = lane >> 3;
                const int row = warp_n * WN + nj * 16 + (lane & 7) + 8 * (j >> 1);
                kr_ldsm_x4(sb + kr_swz(row, 2 * kk + (j & 1)), b[2 * nj][0], b[2 * nj][1],
                           b[2 * nj + 1][0], b[2 * nj + 1][1]);
            }
#pragma unroll
            for (int mi = 0; mi < 4; mi++)
#pragma unroll
                for (int ni = 0; ni < NI; ni++)
                    kr_mma_e4m3(acc[mi][ni], a[mi], b[ni][0], b[ni][1]);
        }
    }
    asm volatile("cp.async.wait_group 0;\n" ::);

    const int g = lane >> 2, tig = lane & 3;
#pragma unroll
    for (int mi = 0; mi < 4; mi++) {
#pragma unroll
        for (int half = 0; half < 2; half++) {
            const int row = m0 + warp_m * 64 + mi * 16 + g + 8 * half;
            if (row >= M)
                continue;
            const float xsr = xs[row];
#pragma unroll
            for (int ni = 0; ni < NI; ni++) {
                const int col = n0 + warp_n * WN + ni * 8 + tig * 2;
                float v[2];
#pragma unroll
                for (int c = 0; c < 2; c++)
                    v[c] = col + c < N ? kr_fmul(acc[mi][ni][2 * half + c],
                                                 kr_fmul(xsr, kr_e8m0_decode(ref[col + c], zmode)))
                                       : 0.0f;
                if (out32) {
                    for (int c = 0; c < 2; c++)
                        if (col + c < N)
                            out32[(size_t)row * N + col + c] = v[c];
                } else if (col + 1 < N && (N & 1) == 0) {   // two bf16 in one 4-byte store
                    *(uint32_t *)(out + (size_t)row * N + col) =
                        (uint32_t)kr_bf16_encode(v[0]) | ((uint32_t)kr_bf16_encode(v[1]) << 16);
                } else {
                    for (int c = 0; c < 2; c++)
                        if (col + c < N)
                            out[(size_t)row * N + col + c] = kr_bf16_encode(v[c]);
                }
            }
        }
    }
}

template __global__ void kr_k_w4a8_mma<128>(const uint8_t *, const float *, int, const uint8_t *,
                                            const uint8_t *, int, int, int, uint16_t *, float *);
template __global__ void kr_k_w4a8_mma<256>(const uint8_t *, const float *, int, const uint8_t *,
                                            const uint8_t *, int, int, int, uint16_t *, float *);

extern "C" int kr_gpu_internal_fail(int status, const char *what, const char *detail);

static int kr_mma_bn = 256;

extern "C" int kr_gpu_w4a8_mma_set_tile(int bn)
{
    const int prev = kr_mma_bn;
    if (bn == 128 || bn == 256)
        kr_mma_bn = bn;
    return prev;
}

template <int BN>
static int kr_mma_launch(const uint8_t *x, const float *x_scale, int64_t M, const uint8_t *w8,
                         const uint8_t *ref, int zmode, int64_t N, int64_t K, uint16_t *out,
                         float *out32, cudaStream_t stream)
{
    static int attr_done = 0;
    const int smem = MMA_STAGES * (MMA_BM + BN) * MMA_BK;
    cudaError_t e;
    if (!attr_done) {
        e = cudaFuncSetAttribute(kr_k_w4a8_mma<BN>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
        if (e != cudaSuccess)
            return kr_gpu_internal_fail(KR_GPU_ERR_RUNTIME, "w4a8_mma: cudaFuncSetAttribute", cudaGetErrorString(e));
        attr_done = 1;
    }
    const unsigned blocks = (unsigned)(((N + BN - 1) / BN) * ((M + MMA_BM - 1) / MMA_BM));
    kr_k_w4a8_mma<BN><<<blocks, MMA_THREADS, smem, stream>>>(x, x_scale, (int)M, w8, ref, zmode,
                                                          (int)N, (int)K, out, out32);
    e = cudaGetLastError();
    if (e != cudaSuccess)
        return kr_gpu_internal_fail(KR_GPU_ERR_RUNTIME, "launch w4a8_mma", cudaGetErrorString(e));
    return KR_GPU_OK;
}

static int kr_mma_common(const uint8_t *x, const float *x_scale, int64_t M, const uint8_t *w8,
                         const uint8_t *ref, int zmode, int64_t N, int64_t K, uint16_t *out,
                         float *out32, kr_gpu_stream_t stream)
{
    if (M <= 0 || N <= 0 || K <= 0 || K % MMA_BK || M > (1 << 30) || N > (1 << 30) || K > (1 << 30))
        return kr_gpu_internal_fail(KR_GPU_ERR_ARG, "w4a8_mma: bad shape (K % 64 != 0?)", NULL);
    int dev = 0;
    cudaDeviceProp p;
    cudaError_t e = cudaGetDevice(&dev);
    if (e == cudaSuccess)
        e = cudaGetDeviceProperties(&p, dev);
    if (e != cudaSuccess)
        return kr_gpu_internal_fail(KR_GPU_ERR_RUNTIME, "w4a8_mma: device query", cudaGetErrorString(e));
    if (p.major * 10 + p.minor < 89)
        return kr_gpu_internal_fail(KR_GPU_ERR_UNSUPPORTED, "w4a8_mma: needs sm_89+ (fp8 mma.sync)", NULL);
    if (kr_mma_bn == 128)
        return kr_mma_launch<128>(x, x_scale, M, w8, ref, zmode, N, K, out, out32, (cudaStream_t)stream);
    return kr_mma_launch<256>(x, x_scale, M, w8, ref, zmode, N, K, out, out32, (cudaStream_t)stream);
}

extern "C" int kr_gpu_w4a8_mma(const uint8_t *x, const float *x_scale, int64_t M, const uint8_t *w8,
                               const uint8_t *ref, int e8m0_zero_is_zero, int64_t N, int64_t K,
                               uint16_t *out, kr_gpu_stream_t stream)
{
    return kr_mma_common(x, x_scale, M, w8, ref, e8m0_zero_is_zero, N, K, out, NULL, stream);
}

extern "C" int kr_gpu_w4a8_mma_f32(const uint8_t *x, const float *x_scale, int64_t M,
                                   const uint8_t *w8, const uint8_t *ref, int e8m0_zero_is_zero,
                                   int64_t N, int64_t K, float *out, kr_gpu_stream_t stream)
{
    return kr_mma_common(x, x_scale, M, w8, ref, e8m0_zero_is_zero, N, K, NULL, out, stream);
}

#elif !KR_GPU_BARE
#include "kr_gpu.h"
extern "C" int kr_gpu_w4a8_mma(const uint8_t *x, const float *x_scale, int64_t M, const uint8_t *w8,
                               const uint8_t *ref, int e8m0_zero_is_zero, int64_t N, int64_t K,
                               uint16_t *out, kr_gpu_stream_t stream)
{
    (void)x; (void)x_scale; (void)M; (void)w8; (void)ref; (void)e8m0_zero_is_zero;
    (void)N; (void)K; (void)out; (void)stream;
    return KR_GPU_ERR_UNSUPPORTED;   // NVIDIA only; the AMD matrix variant is kr_gpu_w4a8_wmma_gfx12
}
extern "C" int kr_gpu_w4a8_mma_f32(const uint8_t *x, const float *x_scale, int64_t M,
                                   const uint8_t *w8, const uint8_t *ref, int e8m0_zero_is_zero,
                                   int64_t N, int64_t K, float *out, kr_gpu_stream_t stream)
{
    (void)x; (void)x_scale; (void)M; (void)w8; (void)ref; (void)e8m0_zero_is_zero;
    (void)N; (void)K; (void)out; (void)stream;
    return KR_GPU_ERR_UNSUPPORTED;
}
extern "C" int kr_gpu_w4a8_mma_set_tile(int bn) { (void)bn; return 0; }
#endif
