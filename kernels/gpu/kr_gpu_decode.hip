// w4a8.decode on the GPU (README.md, its w4a8.decode section): the warp-contiguous
// weight layout, the split-K kernel for the decode band (M <= 64, split
// ranges of whole 128-element steps) with its last-block reduction, the
// one-thread-per-output fallback of the same order, and their launches.
// Apart from kr_gpu_kernels.hip because it is the one SIMT kernel tuned for
// speed: its own scratch, counters, layout and launch geometry.
//
// Bit contract: the model's order (kernels/cpu/w4a8_decode.c): each split's
// partial summed sequentially in k from +0, the partials added in split
// order, one IEEE fp32 rounding per operation (see kr_gpu_kernels.hip).
#include "vendor.h"
#include "kr_gpu_numerics.h"

#if !KR_GPU_BARE
#include "kr_gpu_internal.h"
#endif

#define KR_DECODE_THREADS 256
#define KR_DECODE_MAX_M 64
#define KR_DECODE_MIN_NB 32

struct kr_u32x4 {
    uint32_t x, y, z, w;
};

#if KR_GPU_BARE
struct __attribute__((aligned(16))) kr_f32x4 {
    float x, y, z, w;
};
#else
typedef float4 kr_f32x4;
#endif

static __device__ __forceinline__ kr_u32x4 kr_ldg16(const uint8_t *p)
{
#if KR_GPU_CUDA
    const uint4 v = __ldg((const uint4 *)p);
    return kr_u32x4{v.x, v.y, v.z, v.w};
#else
    const uint32_t *q = (const uint32_t *)p;
    return kr_u32x4{q[0], q[1], q[2], q[3]};
#endif
}

// Warp-contiguous weight order for the decode kernel (a permutation done
// once at load, like the dispatch's WPERM; it cannot change a bit): the 16
// bytes of row n, MX block c sit at ((n / 32) * (K / 32) + c) * 32 + n % 32,
// so the 32 lanes of a warp (32 consecutive rows) read 512 contiguous bytes.
static __device__ __forceinline__ size_t kr_dec_offset(int n, int c, int K, int dec)
{
    return dec ? (((size_t)(n >> 5) * (size_t)(K / 32) + (size_t)c) * 32 + (size_t)(n & 31)) * 16
               : (size_t)n * (size_t)(K / 2) + (size_t)c * 16;
}

__global__ void kr_k_w4a8_decode_layout(const uint8_t *KR_RESTRICT packed, int N, int K,
                                        uint8_t *KR_RESTRICT dec)
{
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;   // 16-byte chunk (n, c)
    const int64_t Npad = (int64_t)(N + 31) / 32 * 32;
    if (i >= Npad * (K / 32))
        return;
    const int n = (int)(i / (K / 32)), c = (int)(i % (K / 32));
    kr_u32x4 v = {0, 0, 0, 0};
    if (n < N)
        v = kr_ldg16(packed + kr_dec_offset(n, c, K, 0));
    *(kr_u32x4 *)(dec + kr_dec_offset(n, c, K, 1)) = v;
}

// One 32-element MX block of one weight row (16 bytes in w) against RT rows of
// staged activations xb[r * ldx + i], accumulated into acc[] in k order.
//
// The folded weight w8 = e4m3fn(e2m1 * 2^-s), s = ref - E >= 0, without a
// branch: bits (c & 7) << 22 (plus the sign) are e2m1 * 2^-126, so
// fma(bits, 2^(126-s), C) with C = 1.5 * 2^14 is C + e2m1 * 2^-s rounded once
// to the fp32 grid of [2^14, 2^15), whose spacing 2^-9 is e4m3fn's subnormal
// step: that single rounding is e4m3fn's RNE (exact when s <= 8, the
// subnormal rounding beyond), and subtracting C is exact.  The sign of a zero
// is lost, which no sum starting at +0 can see.  s < 0 (a case weight_ref below
// the row's largest exponent: e4m3 saturation) takes the general encoder.
template <int RT>
static __device__ __forceinline__ void kr_decode_block(const kr_u32x4 w, uint32_t e, uint32_t ref,
                                                       int zmode, const float *xb, int ldx,
                                                       float acc[RT])
{
    const int s = (int)ref - (int)e;
    const bool zero = zmode && e == 0;
    const uint32_t words[4] = {w.x, w.y, w.z, w.w};
    if (!zero && s < 0) {
#pragma unroll
        for (int j = 0; j < 4; j++) {
#pragma unroll
            for (int i = 0; i < 8; i++) {
                const float wv = kr_w8_value((words[j] >> (4 * i)) & 0xFu, s);
#pragma unroll
                for (int r = 0; r < RT; r++)
                    acc[r] = kr_fma(xb[r * ldx + 8 * j + i], wv, acc[r]);
            }
        }
        return;
    }
    const float C = 24576.0f;   // 1.5 * 2^14
    const int se = s > 160 ? 160 : s;
    const float P = zero ? 0.0f : kr_u2f((uint32_t)(253 - se) << 23);   // 2^(126 - s)
#pragma unroll
    for (int j = 0; j < 4; j++) {
        const uint32_t u = words[j];
        float wv[8];
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const uint32_t bits = (((u >> (4 * i)) & 7u) << 22) | (((u >> (4 * i + 3)) & 1u) << 31);
            wv[i] = kr_fsub(kr_fma(kr_u2f(bits), P, C), C);
        }
#pragma unroll
        for (int r = 0; r < RT; r++) {
            const kr_f32x4 x0 = *(const kr_f32x4 *)(xb + r * ldx + 8 * j);
            const kr_f32x4 x1 = *(const kr_f32x4 *)(xb + r * ldx + 8 * j + 4);
            float a = acc[r];
            a = kr_fma(x0.x, wv[0], a);
            a = kr_fma(x0.y, wv[1], a);
            a = kr_fma(x0.z, wv[2], a);
            a = kr_fma(x0.w, wv[3], a);
            a = kr_fma(x1.x, wv[4], a);
            a = kr_fma(x1.y, wv[5], a);
            a = kr_fma(x1.z, wv[6], a);
            a = kr_fma(x1.w, wv[7], a);
            acc[r] = a;
        }
    }
}

// Grid (ceil(N / NB), splits); NW warps per block; warp w serves columns
// (w / MW) * 32 + lane of the block's NB = 32 * NW / MW and rows
// (w % MW) * RT .. + RT.  Each thread sums its k range sequentially (the
// model's partial), writes it to scratch [split][M][N]; the last block of the
// n-block to arrive (atomicAdd on its counter after a __threadfence) sums the
// partials in split order and writes bf16, then resets the counter.
// dec: the weight is in warp-contiguous order (kr_k_w4a8_decode_layout).
template <int RT>
__global__ void __launch_bounds__(KR_DECODE_THREADS) kr_k_w4a8_decode(
    const uint8_t *KR_RESTRICT x, int x_fmt, const float *KR_RESTRICT xs, int M,
    const uint8_t *KR_RESTRICT packed, int dec, const uint8_t *KR_RESTRICT scales, int layout,
    int zmode, const uint8_t *KR_RESTRICT ref, int N, int K, int SK, int MW, int KC, float *part,
    int *counters, uint16_t *KR_RESTRICT out)
{
    extern __shared__ kr_f32x4 kr_xsm4[];   // [MW * RT][KC] floats
    float *kr_xsm = (float *)kr_xsm4;
    __shared__ int s_last;
    const int nthreads = blockDim.x, nwarps = nthreads >> 5;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int NB = nthreads / MW;
    const int n = blockIdx.x * NB + (warp / MW) * 32 + lane;
    const int m0 = (warp % MW) * RT;
    const int MP = MW * RT;
    const int split = blockIdx.y;
    const int Ks = K / SK, k0 = split * Ks, k1 = k0 + Ks;
    const bool active = n < N;
    const int nn = active ? n : N - 1;
    const uint32_t r = ref[nn];
    float acc[RT];
#pragma unroll
    for (int i = 0; i < RT; i++)
        acc[i] = 0.0f;

    // 128 k (64 bytes, 4 MX blocks) per step; the next step's bytes are in
    // flight while this one is summed.
    kr_u32x4 w[4];
    uint32_t e[4];
#pragma unroll
    for (int q = 0; q < 4; q++) {
        w[q] = kr_ldg16(packed + kr_dec_offset(nn, k0 / 32 + q, K, dec));
        e[q] = kr_scale_at(scales, layout, N, K, nn, k0 / 32 + q);
    }
    for (int k = k0; k < k1; k += 128) {
        if ((k - k0) % KC == 0) {
            // Stage x[0 .. MP) [k, k + kcn) as fp32, 4 codes per thread-step.
            const int kcn = min(KC, k1 - k);
            __syncthreads();
            for (int row = warp; row < MP; row += nwarps) {
                for (int kk = 4 * lane; kk < kcn; kk += 128) {
                    kr_f32x4 v = {0.0f, 0.0f, 0.0f, 0.0f};
                    if (row < M) {
                        const uint32_t c4 = *(const uint32_t *)(x + (size_t)row * K + k + kk);
                        v.x = kr_fp8_decode_fast(c4 & 0xFFu, x_fmt);
                        v.y = kr_fp8_decode_fast((c4 >> 8) & 0xFFu, x_fmt);
                        v.z = kr_fp8_decode_fast((c4 >> 16) & 0xFFu, x_fmt);
                        v.w = kr_fp8_decode_fast(c4 >> 24, x_fmt);
                    }
                    *(kr_f32x4 *)(kr_xsm + row * KC + kk) = v;
                }
            }
            __syncthreads();
        }
        kr_u32x4 c[4];
        uint32_t f[4];
#pragma unroll
        for (int q = 0; q < 4; q++) {
            c[q] = w[q];
            f[q] = e[q];
        }
        if (k + 128 < k1) {   // prefetch the next 128 elements of this row
#pragma unroll
            for (int q = 0; q < 4; q++) {
                w[q] = kr_ldg16(packed + kr_dec_offset(nn, (k + 128) / 32 + q, K, dec));
                e[q] = kr_scale_at(scales, layout, N, K, nn, (k + 128) / 32 + q);
            }
        }
        const float *xb = kr_xsm + m0 * KC + (k - k0) % KC;
#pragma unroll
        for (int q = 0; q < 4; q++)
            kr_decode_block<RT>(c[q], f[q], r, zmode, xb + 32 * q, KC, acc);
    }
    if (active) {
#pragma unroll
        for (int i = 0; i < RT; i++)
            if (m0 + i < M)
                part[((size_t)split * M + m0 + i) * N + n] = acc[i];
    }
    __threadfence();
    __syncthreads();
    if (tid == 0)
        s_last = atomicAdd(&counters[blockIdx.x], 1) == SK - 1;
    __syncthreads();
    if (!s_last)
        return;
    __threadfence();
    if (active) {
        const float epi = kr_e8m0_decode(r, zmode);
#pragma unroll
        for (int i = 0; i < RT; i++) {
            const int m = m0 + i;
            if (m >= M)
                continue;
            float a = kr_load_cg(&part[(size_t)m * N + n]);
            for (int sp = 1; sp < SK; sp++)
                a = kr_fadd(a, kr_load_cg(&part[((size_t)sp * M + m) * N + n]));
            out[(size_t)m * N + n] = kr_bf16_encode(kr_fmul(a, kr_fmul(xs[m], epi)));
        }
    }
    if (tid == 0)
        counters[blockIdx.x] = 0;
}

#define KR_DECODE_INSTANTIATE(RT)                                                            \
    template __global__ void kr_k_w4a8_decode<RT>(                                           \
        const uint8_t *, int, const float *, int, const uint8_t *, int, const uint8_t *, int,  \
        int, const uint8_t *, int, int, int, int, int, float *, int *, uint16_t *);
KR_DECODE_INSTANTIATE(1)
KR_DECODE_INSTANTIATE(2)
KR_DECODE_INSTANTIATE(4)
KR_DECODE_INSTANTIATE(8)
KR_DECODE_INSTANTIATE(16)

// The same contract for any split length (k ranges not multiples of 128) and
// any M: one thread per output, the splits summed one after the other.
__global__ void __launch_bounds__(128) kr_k_w4a8_decode_simple(
    const uint8_t *KR_RESTRICT x, int x_fmt, const float *KR_RESTRICT xs, int64_t M,
    const uint8_t *KR_RESTRICT packed, const uint8_t *KR_RESTRICT scales, int layout, int zmode,
    const uint8_t *KR_RESTRICT ref, int64_t N, int64_t K, int SK, uint16_t *KR_RESTRICT out)
{
    const int64_t n = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t m = blockIdx.y;
    if (n >= N || m >= M)
        return;
    const uint8_t *xr = x + m * K;
    const uint32_t r = ref[n];
    const int64_t Ks = K / SK;
    float acc = 0.0f;
    for (int sp = 0; sp < SK; sp++) {
        float p = 0.0f;
        for (int64_t k = sp * Ks; k < (sp + 1) * Ks; k++) {
            const float w = kr_folded_w(kr_code_at(packed, K, n, k),
                                        kr_scale_at(scales, layout, N, K, n, k / 32), r, zmode);
            p = kr_fadd(p, kr_fmul(kr_fp8_decode(xr[k], x_fmt), w));
        }
        acc = sp == 0 ? p : kr_fadd(acc, p);
    }
    out[m * N + n] = kr_bf16_encode(kr_fmul(acc, kr_fmul(xs[m], kr_e8m0_decode(r, zmode))));
}

#if !KR_GPU_BARE

extern "C" size_t kr_gpu_w4a8_decode_scratch_bytes(int64_t M, int64_t N, int splits)
{
    return (size_t)(splits > 0 ? splits : 1) * (size_t)M * (size_t)N * sizeof(float);
}

extern "C" int64_t kr_gpu_w4a8_decode_counters(int64_t N)
{
    return (N + KR_DECODE_MIN_NB - 1) / KR_DECODE_MIN_NB + 8;
}

extern "C" size_t kr_gpu_w4a8_decode_layout_bytes(int64_t N, int64_t K)
{
    return (size_t)((N + 31) / 32 * 32) * (size_t)(K / 2);
}

extern "C" int kr_gpu_w4a8_decode_layout(const kr_gpu_mxfp4_t *w, uint8_t *dec, kr_gpu_stream_t stream)
{
    int st = kr_check_w(w, "w4a8_decode_layout");
    if (st)
        return st;
    const int64_t chunks = (w->N + 31) / 32 * 32 * (w->K / 32);
    kr_k_w4a8_decode_layout<<<kr_blocks(chunks, 256), 256, 0, kr_stream(stream)>>>(
        w->packed, (int)w->N, (int)w->K, dec);
    KR_LAUNCHED("w4a8_decode_layout");
    return KR_GPU_OK;
}

template <int RT>
static int kr_decode_launch_rt(const uint8_t *x, int x_fmt, const float *x_scale, int M,
                               const kr_gpu_mxfp4_t *w, const uint8_t *dec, const uint8_t *ref,
                               int SK, float *scratch, int *counters, uint16_t *out,
                               hipStream_t stream)
{
    int mw = (M + RT - 1) / RT;
    mw = mw <= 1 ? 1 : mw <= 2 ? 2 : mw <= 4 ? 4 : 8;
    const int N = (int)w->N, K = (int)w->K;
    const int Ks = K / SK;
    const int MP = mw * RT;
    int kc = (8192 / MP) / 128 * 128;
    if (kc < 128)
        kc = 128;
    if (kc > Ks)
        kc = Ks;
    // Small blocks (2 warps) when one warp covers the rows: many blocks even
    // out the SMs' shares; else 8 warps, MW of them per column group.
    const int nw = mw == 1 ? 2 : 8;
    const int nb = 32 * nw / mw;
    dim3 grid((unsigned)((N + nb - 1) / nb), (unsigned)SK);
    const size_t smem = (size_t)MP * (size_t)kc * sizeof(float);
    kr_k_w4a8_decode<RT><<<grid, 32 * nw, smem, stream>>>(
        x, x_fmt, x_scale, M, dec ? dec : w->packed, dec != NULL, w->scales, w->scale_layout,
        w->e8m0_zero_is_zero, ref, N, K, SK, mw, kc, scratch, counters, out);
    KR_LAUNCHED("w4a8_decode");
    return KR_GPU_OK;
}

extern "C" int kr_gpu_w4a8_decode(const uint8_t *x, int x_fmt, const float *x_scale, int64_t M,
                                  const kr_gpu_mxfp4_t *w, const uint8_t *dec, const uint8_t *ref,
                                  int splits, float *scratch, size_t scratch_bytes, int *counters,
                                  int64_t n_counters, uint16_t *out, kr_gpu_stream_t stream)
{
    int st = kr_check_w(w, "w4a8_decode");
    if (st)
        return st;
    if (splits <= 0 || w->K % splits != 0)
        return kr_fail_arg("w4a8_decode: K must be a multiple of the split count");
    if (M <= 0 || M > 65535)
        return kr_fail_arg("w4a8_decode: M out of range");
    const int64_t Ks = w->K / splits;
    hipStream_t s = kr_stream(stream);
    if (M > KR_DECODE_MAX_M || Ks % 128 != 0 || w->N > (int64_t)1 << 30 || w->K > (int64_t)1 << 30) {
        dim3 grid(kr_blocks(w->N, 128), (unsigned)M);
        kr_k_w4a8_decode_simple<<<grid, 128, 0, s>>>(x, x_fmt, x_scale, M, w->packed, w->scales,
                                                     w->scale_layout, w->e8m0_zero_is_zero, ref,
                                                     w->N, w->K, splits, out);
        KR_LAUNCHED("w4a8_decode_simple");
        return KR_GPU_OK;
    }
    if (!scratch || scratch_bytes < kr_gpu_w4a8_decode_scratch_bytes(M, w->N, splits))
        return kr_fail_arg("w4a8_decode: split-K scratch missing or too small");
    if (!counters || n_counters < kr_gpu_w4a8_decode_counters(w->N))
        return kr_fail_arg("w4a8_decode: block counters missing or too few");
    const int m = (int)M;
    if (m <= 1)
        return kr_decode_launch_rt<1>(x, x_fmt, x_scale, m, w, dec, ref, splits, scratch, counters, out, s);
    if (m <= 2)
        return kr_decode_launch_rt<2>(x, x_fmt, x_scale, m, w, dec, ref, splits, scratch, counters, out, s);
    if (m <= 4)
        return kr_decode_launch_rt<4>(x, x_fmt, x_scale, m, w, dec, ref, splits, scratch, counters, out, s);
    if (m <= 32)
        return kr_decode_launch_rt<8>(x, x_fmt, x_scale, m, w, dec, ref, splits, scratch, counters, out, s);
    return kr_decode_launch_rt<16>(x, x_fmt, x_scale, m, w, dec, ref, splits, scratch, counters, out, s);
}

#endif  // !KR_GPU_BARE
