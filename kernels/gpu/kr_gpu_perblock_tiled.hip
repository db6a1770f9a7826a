// w4a8.perblock at prefill sizes: the same bits as kr_k_w4a8_perblock (one
// thread per output, kr_gpu_kernels.hip) from a register-tiled SIMT kernel.
//
// Each block computes a 128 x 128 tile of out; each of its 256 threads 8
// rows (consecutive) by 8 columns (16 apart, so a warp's loads of the
// weight values and its stores of out cover consecutive columns).  A step is one 32-element K block: the activations'
// codes and the weight's e2m1 codes of the tile are decoded once into
// shared memory (k-major), then every thread sums, for each of its
// outputs, s = x[k] * w[k] over the block's k in increasing order, and
// folds acc = acc + s * 2^(E-127) in increasing block order; at the end
// out = bf16(acc * x_scale[m]).  That is the model's order for every
// output (kernels/cpu/w4a8_perblock.c).  fp8 x e2m1 products are exact in
// fp32, so s = fma(x, w, s) rounds exactly as s + x*w does; the scale
// product and the fold are separate rounded operations (kr_fmul, kr_fadd),
// as in the one-thread kernel.  Rows and columns past M and N are
// computed on zeros and not stored.
#include "vendor.h"
#include "kr_gpu_numerics.h"

#if !KR_GPU_BARE
#include "kr_gpu.h"
#endif

#define PT_BM 128
#define PT_BN 128
#define PT_BK 32
#define PT_THREADS 256
#define PT_TM 8
#define PT_TN 8

__global__ void __launch_bounds__(PT_THREADS) kr_k_w4a8_perblock_tiled(
    const uint8_t *KR_RESTRICT x, int x_fmt, const float *KR_RESTRICT xs, int64_t M,
    const uint8_t *KR_RESTRICT packed, const uint8_t *KR_RESTRICT scales, int layout, int zmode,
    int64_t N, int64_t K, uint16_t *KR_RESTRICT out)
{
    __shared__ __attribute__((aligned(16))) float xv[PT_BK][PT_BM];   // activation values, k-major
    __shared__ float wv[PT_BK][PT_BN];   // weight values, k-major
    __shared__ float sc[PT_BN];          // the block's scale per column
    const int tid = threadIdx.x;
    const int tx = tid % 16, ty = tid / 16;
    const int64_t m0 = (int64_t)blockIdx.y * PT_BM, n0 = (int64_t)blockIdx.x * PT_BN;
    float acc[PT_TM][PT_TN];
    for (int i = 0; i < PT_TM; i++)
        for (int j = 0; j < PT_TN; j++)
            acc[i][j] = 0.0f;
    for (int64_t b = 0; b < K / PT_BK; b++) {
        // Activations: 128 rows x 32 codes, 16 codes per thread.
        {
            const int r = tid / 2, k0 = (tid % 2) * 16;
            const int64_t m = m0 + r;
            for (int q = 0; q < 16; q++)
                xv[k0 + q][r] = m < M ? kr_fp8_decode(x[m * K + b * PT_BK + k0 + q], x_fmt) : 0.0f;
        }
        // Weight: 128 columns x 32 codes (16 bytes), 16 codes per thread.
        {
            const int c = tid / 2, k0 = (tid % 2) * 16;
            const int64_t n = n0 + c;
            for (int q = 0; q < 16; q++)
                wv[k0 + q][c] = n < N ? kr_e2m1_value(kr_code_at(packed, K, n, b * PT_BK + k0 + q)) : 0.0f;
            if (tid < PT_BN)
                sc[tid] = n0 + tid < N ? kr_e8m0_decode(kr_scale_at(scales, layout, N, K, n0 + tid, b), zmode)
                                       : 0.0f;
        }
        __syncthreads();
        float s[PT_TM][PT_TN];
        for (int i = 0; i < PT_TM; i++)
            for (int j = 0; j < PT_TN; j++)
                s[i][j] = 0.0f;
        for (int k = 0; k < PT_BK; k++) {
            float a[PT_TM], w[PT_TN];
            const float4 a0 = *(const float4 *)&xv[k][ty * PT_TM];
            const float4 a1 = *(const float4 *)&xv[k][ty * PT_TM + 4];
            a[0] = a0.x, a[1] = a0.y, a[2] = a0.z, a[3] = a0.w;
            a[4] = a1.x, a[5] = a1.y, a[6] = a1.z, a[7] = a1.w;
            for (int j = 0; j < PT_TN; j++)
                w[j] = wv[k][tx + 16 * j];
            for (int i = 0; i < PT_TM; i++)
                for (int j = 0; j < PT_TN; j++)
                    s[i][j] = kr_fma(a[i], w[j], s[i][j]);   // the product is exact
        }
        for (int i = 0; i < PT_TM; i++)
            for (int j = 0; j < PT_TN; j++)
                acc[i][j] = kr_fadd(acc[i][j], kr_fmul(s[i][j], sc[tx + 16 * j]));
        __syncthreads();
    }
    for (int i = 0; i < PT_TM; i++) {
        const int64_t m = m0 + ty * PT_TM + i;
        if (m >= M)
            continue;
        for (int j = 0; j < PT_TN; j++) {
            const int64_t n = n0 + tx + 16 * j;
            if (n < N)
                out[m * N + n] = kr_bf16_encode(kr_fmul(acc[i][j], xs[m]));
        }
    }
}

#if !KR_GPU_BARE
extern "C" int kr_gpu_internal_fail(int status, const char *what, const char *detail);

// Called by kr_gpu_w4a8_perblock (kr_gpu_kernels.hip) for larger M; the
// weight descriptor is checked there.
extern "C" int kr_gpu_internal_w4a8_perblock_tiled(const uint8_t *x, int x_fmt,
                                                   const float *x_scale, int64_t M,
                                                   const kr_gpu_mxfp4_t *w, uint16_t *out,
                                                   kr_gpu_stream_t stream)
{
    const dim3 grid((unsigned)((w->N + PT_BN - 1) / PT_BN), (unsigned)((M + PT_BM - 1) / PT_BM));
    kr_k_w4a8_perblock_tiled<<<grid, PT_THREADS, 0, (hipStream_t)stream>>>(
        x, x_fmt, x_scale, M, w->packed, w->scales, w->scale_layout, w->e8m0_zero_is_zero, w->N,
        w->K, out);
    const hipError_t e = hipGetLastError();
    return e == hipSuccess ? KR_GPU_OK
                           : kr_gpu_internal_fail(KR_GPU_ERR_RUNTIME, "launch w4a8_perblock_tiled",
                                                  hipGetErrorString(e));
}
#endif
