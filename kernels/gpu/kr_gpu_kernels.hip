// kreplay GPU kernels: runtime wrappers, the SIMT kernels that reproduce the
// CPU models bit for bit, the decode split-K kernel, and the fault-injection
// kernels.  One HIP source: hipcc on ROCm, nvcc through vendor.h, or clang -x
// hip device-only (KR_GPU_BARE: kernels only, no host code).
//
// Bit contract: every SIMT kernel does its additions in the order of the CPU
// model named above it, with IEEE fp32 rounding per operation.  Products of
// fp8 x e2m1, fp8 x fp8, e2m1 x e2m1 and bf16 x bf16 values are exact in fp32,
// so an FMA there gives the same bits as a multiply and an add; everywhere a
// product is not exact (block scales, epilogues) the code uses kr_fmul /
// kr_fadd (__fmul_rn / __fadd_rn on CUDA), which no compiler contracts.
#include "vendor.h"
#include "kr_gpu_numerics.h"

#if !KR_GPU_BARE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kr_gpu.h"
#endif

#define KR_DECODE_THREADS 256
#define KR_DECODE_MAX_M 64
#define KR_DECODE_MIN_NB 32

// ---------------------------------------------------------------- utilities

__global__ void kr_k_fill_u16(uint16_t *dst, uint16_t v, size_t n)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (; i < n; i += stride)
        dst[i] = v;
}

// ------------------------------------------------------ activation quantizers

// quant.fp8_token (reference/quant_fp8.c, vllm variant, e4m3fn): one block per row.
__global__ void __launch_bounds__(256) kr_k_quant_fp8_token(const float *KR_RESTRICT x, int64_t K,
                                                            uint8_t *KR_RESTRICT q,
                                                            float *KR_RESTRICT scale)
{
    __shared__ float red[256];
    const int64_t m = blockIdx.x;
    const float *xr = x + m * K;
    float amax = 0.0f;
    for (int64_t k = threadIdx.x; k < K; k += blockDim.x)
        amax = fmaxf(amax, fabsf(xr[k]));   // NaN-ignoring; max is order-free
    red[threadIdx.x] = amax;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s)
            red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + s]);
        __syncthreads();
    }
    const float min_scale = kr_fdiv(1.0f, kr_fmul(448.0f, 512.0f));
    const float s = fmaxf(kr_fdiv(red[0], 448.0f), min_scale);
    for (int64_t k = threadIdx.x; k < K; k += blockDim.x) {
        const float scaled = kr_fdiv(xr[k], s);
        const float r = fmaxf(-448.0f, fminf(scaled, 448.0f));
        q[m * K + k] = (uint8_t)kr_e4m3fn_encode_sat(r);
    }
    if (threadIdx.x == 0)
        scale[m] = s;
}

// quant.mxfp4 (reference/quant_mxfp4.c, aiter-even): one thread per 32-block.
__global__ void kr_k_quant_mxfp4(const float *KR_RESTRICT x, int64_t M, int64_t K,
                                 uint8_t *KR_RESTRICT codes, uint8_t *KR_RESTRICT scales)
{
    const int64_t nb = K / 32;
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= M * nb)
        return;
    const int64_t m = i / nb, b = i % nb;
    const float *xb = x + m * K + b * 32;
    // NaN bits matter here (aiter's scale rule reads amax's bits, the e2m1
    // conversion reads x's): keep them as the x86-64 model does.
    float amax = kr_fabs_bits(xb[0]);
    for (int j = 1; j < 32; j++)
        amax = kr_fmaxf_c(amax, kr_fabs_bits(xb[j]));
    const int e = kr_aiter_scale_exponent(amax);
    scales[i] = (uint8_t)(e + 127);
    const float qs = kr_ldexpf(1.0f, -e);
    uint8_t *cb = codes + m * K + b * 32;
    for (int j = 0; j < 32; j++)
        cb[j] = (uint8_t)kr_aiter_e2m1_from_scaled(kr_fmul_nan_x86(xb[j], qs));
}

// ------------------------------------------------------------------ W4A8

// w4a8.perblock (kernels/cpu/w4a8_perblock.c): one thread per output.
//   for each block b: s = sum_k x*w (exact products, fp32 adds, k ascending)
//                     acc += s * 2^(E-127)
//   out = bf16(acc * x_scale[m])
__global__ void __launch_bounds__(128) kr_k_w4a8_perblock(
    const uint8_t *KR_RESTRICT x, int x_fmt, const float *KR_RESTRICT xs, int64_t M,
    const uint8_t *KR_RESTRICT packed, const uint8_t *KR_RESTRICT scales, int layout, int zmode,
    int64_t N, int64_t K, uint16_t *KR_RESTRICT out)
{
    const int64_t n = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t m = blockIdx.y;
    if (n >= N || m >= M)
        return;
    const uint8_t *xr = x + m * K;
    float acc = 0.0f;
    for (int64_t b = 0; b < K / 32; b++) {
        float s = 0.0f;
        for (int64_t k = b * 32; k < b * 32 + 32; k++)
            s = kr_fadd(s, kr_fmul(kr_fp8_decode(xr[k], x_fmt), kr_e2m1_value(kr_code_at(packed, K, n, k))));
        const float sc = kr_e8m0_decode(kr_scale_at(scales, layout, N, K, n, b), zmode);
        acc = kr_fadd(acc, kr_fmul(s, sc));
    }
    out[m * N + n] = kr_bf16_encode(kr_fmul(acc, xs[m]));
}

__global__ void kr_k_w4a8_row_ref(const uint8_t *KR_RESTRICT scales, int layout, int64_t N,
                                  int64_t K, const uint8_t *KR_RESTRICT case_ref,
                                  uint8_t *KR_RESTRICT ref)
{
    const int64_t n = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (n >= N)
        return;
    if (case_ref) {
        ref[n] = case_ref[n];
        return;
    }
    uint32_t r = 0;
    for (int64_t b = 0; b < K / 32; b++) {
        const uint32_t e = kr_scale_at(scales, layout, N, K, n, b);
        r = e > r ? e : r;
    }
    ref[n] = (uint8_t)r;
}

// The folded weight's value at (n, k) (kernels/cpu/folded_weight.c): zero in a
// zero-scale block under E8M0_ZERO_IS_ZERO, else e4m3fn(e2m1 * 2^(E-ref)).
static __device__ __forceinline__ float kr_folded_w(uint32_t code, uint32_t e, uint32_t ref, int zmode)
{
    if (zmode && e == 0)
        return 0.0f;
    return kr_w8_value(code, (int)ref - (int)e);
}

__global__ void kr_k_w4a8_preshift(const uint8_t *KR_RESTRICT packed,
                                   const uint8_t *KR_RESTRICT scales, int layout, int zmode,
                                   const uint8_t *KR_RESTRICT ref, int64_t N, int64_t K,
                                   uint8_t *KR_RESTRICT w8)
{
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;   // byte index
    if (i >= N * (K / 2))
        return;
    const int64_t n = i / (K / 2), k = 2 * (i % (K / 2));
    const uint32_t e = kr_scale_at(scales, layout, N, K, n, k / 32);
    const uint32_t byte = packed[i];
    const float lo = kr_folded_w(byte & 0xFu, e, ref[n], zmode);
    const float hi = kr_folded_w(byte >> 4, e, ref[n], zmode);
    w8[n * K + k] = (uint8_t)kr_e4m3fn_encode_sat(lo);
    w8[n * K + k + 1] = (uint8_t)kr_e4m3fn_encode_sat(hi);
}

// w4a8.folded (kernels/cpu/w4a8_folded.c): one thread per output,
//   acc = sum over k ascending of x*w8 from +0; out = bf16(acc * (x_scale[m] * 2^(ref-127))).
// fault: 0 none, 1 also write one element past the end, 2 skip the last 32-column tile.
__global__ void __launch_bounds__(128) kr_k_w4a8_folded(
    const uint8_t *KR_RESTRICT x, int x_fmt, const float *KR_RESTRICT xs, int64_t M,
    const uint8_t *KR_RESTRICT packed, const uint8_t *KR_RESTRICT scales, int layout, int zmode,
    const uint8_t *KR_RESTRICT ref, int64_t N, int64_t K, uint16_t *KR_RESTRICT out, int fault)
{
    const int64_t n = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t m = blockIdx.y;
    if (n >= N || m >= M)
        return;
    if (fault == 2 && n >= ((N - 1) / 32) * 32)
        return;
    const uint8_t *xr = x + m * K;
    const uint32_t r = ref[n];
    float acc = 0.0f;
    for (int64_t b = 0; b < K / 32; b++) {
        const uint32_t e = kr_scale_at(scales, layout, N, K, n, b);
        for (int64_t k = b * 32; k < b * 32 + 32; k++) {
            const float w = kr_folded_w(kr_code_at(packed, K, n, k), e, r, zmode);
            acc = kr_fadd(acc, kr_fmul(kr_fp8_decode(xr[k], x_fmt), w));
        }
    }
    const float f = kr_fmul(xs[m], kr_e8m0_decode(r, zmode));
    const uint16_t o = kr_bf16_encode(kr_fmul(acc, f));
    out[m * N + n] = o;
    if (fault == 1 && m == M - 1 && n == N - 1)
        out[M * N] = o;   // deliberate out-of-bounds write
}

// -------------------------------------------------------- w4a8.decode

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

// Fault "race": split-K whose partials meet in float atomics, in whatever
// order the blocks arrive, and every block writes the output with what it sees.
__global__ void __launch_bounds__(128) kr_k_fault_race(
    const uint8_t *KR_RESTRICT x, int x_fmt, const float *KR_RESTRICT xs, int64_t M,
    const uint8_t *KR_RESTRICT packed, const uint8_t *KR_RESTRICT scales, int layout, int zmode,
    const uint8_t *KR_RESTRICT ref, int64_t N, int64_t K, int SK, float *accbuf,
    uint16_t *KR_RESTRICT out)
{
    const int64_t n = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t m = blockIdx.y;
    if (n >= N || m >= M)
        return;
    const int64_t Ks = K / SK, k0 = blockIdx.z * Ks;
    const uint32_t r = ref[n];
    float p = 0.0f;
    for (int64_t k = k0; k < k0 + Ks; k++) {
        const float w = kr_folded_w(kr_code_at(packed, K, n, k),
                                    kr_scale_at(scales, layout, N, K, n, k / 32), r, zmode);
        p = kr_fadd(p, kr_fmul(kr_fp8_decode(x[m * K + k], x_fmt), w));
    }
    const float now = atomicAdd(&accbuf[m * N + n], p) + p;
    out[m * N + n] = kr_bf16_encode(kr_fmul(now, kr_fmul(xs[m], kr_e8m0_decode(r, zmode))));
}

// ------------------------------------------------------------------ W4A4

// w4a4.aiter (kernels/cpu/w4a4_aiter.c): one thread per output.
//   for each block b: s = sum_k a*w (exact), acc += s * (2^(Ea-127) * 2^(Ew-127))
//   out = bf16(acc)
__global__ void __launch_bounds__(128) kr_k_w4a4_aiter(
    const uint8_t *KR_RESTRICT a, const uint8_t *KR_RESTRICT as, int64_t M,
    const uint8_t *KR_RESTRICT packed, const uint8_t *KR_RESTRICT scales, int layout, int zmode,
    int64_t N, int64_t K, uint16_t *KR_RESTRICT out)
{
    const int64_t n = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t m = blockIdx.y;
    if (n >= N || m >= M)
        return;
    const int64_t nb = K / 32;
    float acc = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        float s = 0.0f;
        for (int64_t k = b * 32; k < b * 32 + 32; k++)
            s = kr_fadd(s, kr_fmul(kr_e2m1_value(a[m * K + k]), kr_e2m1_value(kr_code_at(packed, K, n, k))));
        const float sa = kr_e8m0_decode(as[m * nb + b], 0);
        const float sw = kr_e8m0_decode(kr_scale_at(scales, layout, N, K, n, b), zmode);
        acc = kr_fadd(acc, kr_fmul(s, kr_fmul(sa, sw)));
    }
    out[m * N + n] = kr_bf16_encode(acc);
}

// ------------------------------------------------------------ bf16 skinny

// bf16.skinny (kernels/cpu/bf16_gemm.c): one thread per output,
//   partial[s] = sum over k in split s ascending of x*w (exact products, fp32 adds)
//   acc = partial[0]; acc += partial[s] for s = 1..SK-1; out = bf16(acc)
__global__ void __launch_bounds__(128) kr_k_bf16_skinny(const uint16_t *KR_RESTRICT x,
                                                        const uint16_t *KR_RESTRICT w, int64_t M,
                                                        int64_t N, int64_t K, int SK,
                                                        uint16_t *KR_RESTRICT out)
{
    const int64_t n = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t m = blockIdx.y;
    if (n >= N || m >= M)
        return;
    const int64_t Ks = K / SK;
    float acc = 0.0f;
    for (int sp = 0; sp < SK; sp++) {
        float p = 0.0f;
        for (int64_t k = sp * Ks; k < (sp + 1) * Ks; k++)
            p = kr_fadd(p, kr_fmul(kr_bf16_decode(x[m * K + k]), kr_bf16_decode(w[n * K + k])));
        acc = sp == 0 ? p : kr_fadd(acc, p);
    }
    out[m * N + n] = kr_bf16_encode(acc);
}

// ======================================================================
// Host side (not in a bare device-only compile)
// ======================================================================
#if !KR_GPU_BARE

static char kr_err[512];

extern "C" const char *kr_gpu_last_error(void) { return kr_err; }

// For the other sources of this library (kr_gpu_mma.hip, kr_gpu_wmma_gfx12.hip).
extern "C" int kr_gpu_internal_fail(int status, const char *what, const char *detail)
{
    snprintf(kr_err, sizeof kr_err, "%s%s%s", what, detail ? ": " : "", detail ? detail : "");
    return status;
}

static int kr_fail_rt(const char *what, hipError_t e)
{
    snprintf(kr_err, sizeof kr_err, "%s: %s (%d)", what, hipGetErrorString(e), (int)e);
    return KR_GPU_ERR_RUNTIME;
}

static int kr_fail_arg(const char *what)
{
    snprintf(kr_err, sizeof kr_err, "%s", what);
    return KR_GPU_ERR_ARG;
}

#define KR_RT(call)                                                                          \
    do {                                                                                     \
        hipError_t kr_e_ = (call);                                                           \
        if (kr_e_ != hipSuccess)                                                             \
            return kr_fail_rt(#call, kr_e_);                                                 \
    } while (0)

// After a launch: the launch's own status (bad configuration, no device code
// for this GPU) is reported here; execution errors surface at the next sync.
#define KR_LAUNCHED(name)                                                                    \
    do {                                                                                     \
        hipError_t kr_e_ = hipGetLastError();                                                \
        if (kr_e_ != hipSuccess)                                                             \
            return kr_fail_rt("launch " name, kr_e_);                                        \
    } while (0)

static inline hipStream_t kr_stream(kr_gpu_stream_t s) { return (hipStream_t)s; }
static inline unsigned kr_blocks(int64_t n, int64_t per) { return (unsigned)((n + per - 1) / per); }

extern "C" const char *kr_gpu_backend(void) { return KR_GPU_BACKEND_NAME; }

extern "C" int kr_gpu_device_count(int *count)
{
    *count = 0;
    int n = 0;
    hipError_t e = hipGetDeviceCount(&n);
    if (e != hipSuccess) {
        // No driver or no device: report zero devices, keep the reason.
        kr_fail_rt("hipGetDeviceCount", e);
        (void)hipGetLastError();
        return KR_GPU_OK;
    }
    *count = n;
    return KR_GPU_OK;
}

extern "C" int kr_gpu_device_name(int device, char *buf, size_t cap)
{
    hipDeviceProp_t p;
    KR_RT(hipGetDeviceProperties(&p, device));
    snprintf(buf, cap, "%s", p.name);
    return KR_GPU_OK;
}

extern "C" int kr_gpu_device_arch(int device, int *arch)
{
    hipDeviceProp_t p;
    KR_RT(hipGetDeviceProperties(&p, device));
#if KR_GPU_CUDA
    *arch = p.major * 10 + p.minor;
#else
    *arch = strncmp(p.gcnArchName, "gfx", 3) == 0 ? (int)strtol(p.gcnArchName + 3, NULL, 10) : 0;
#endif
    return KR_GPU_OK;
}

extern "C" int kr_gpu_set_device(int device)
{
    KR_RT(hipSetDevice(device));
    return KR_GPU_OK;
}

extern "C" int kr_gpu_synchronize(void)
{
    KR_RT(hipDeviceSynchronize());
    return KR_GPU_OK;
}

extern "C" int kr_gpu_malloc(void **ptr, size_t bytes)
{
    *ptr = NULL;
    KR_RT(hipMalloc(ptr, bytes ? bytes : 1));
    return KR_GPU_OK;
}

extern "C" int kr_gpu_free(void *ptr)
{
    if (ptr)
        KR_RT(hipFree(ptr));
    return KR_GPU_OK;
}

extern "C" int kr_gpu_memcpy_h2d(void *dst, const void *src, size_t bytes)
{
    KR_RT(hipMemcpy(dst, src, bytes, hipMemcpyHostToDevice));
    return KR_GPU_OK;
}

extern "C" int kr_gpu_memcpy_d2h(void *dst, const void *src, size_t bytes)
{
    KR_RT(hipMemcpy(dst, src, bytes, hipMemcpyDeviceToHost));
    return KR_GPU_OK;
}

extern "C" int kr_gpu_memcpy_d2d(void *dst, const void *src, size_t bytes, kr_gpu_stream_t stream)
{
    KR_RT(hipMemcpyAsync(dst, src, bytes, hipMemcpyDeviceToDevice, kr_stream(stream)));
    return KR_GPU_OK;
}

extern "C" int kr_gpu_memset(void *dst, int byte, size_t bytes, kr_gpu_stream_t stream)
{
    KR_RT(hipMemsetAsync(dst, byte, bytes, kr_stream(stream)));
    return KR_GPU_OK;
}

extern "C" int kr_gpu_fill_u16(uint16_t *dst, uint16_t value, size_t count, kr_gpu_stream_t stream)
{
    if (!count)
        return KR_GPU_OK;
    unsigned blocks = kr_blocks((int64_t)count, 256);
    if (blocks > 4096)
        blocks = 4096;
    kr_k_fill_u16<<<blocks, 256, 0, kr_stream(stream)>>>(dst, value, count);
    KR_LAUNCHED("fill_u16");
    return KR_GPU_OK;
}

extern "C" int kr_gpu_stream_create(kr_gpu_stream_t *stream)
{
    hipStream_t s;
    KR_RT(hipStreamCreate(&s));
    *stream = (kr_gpu_stream_t)s;
    return KR_GPU_OK;
}

extern "C" int kr_gpu_stream_destroy(kr_gpu_stream_t stream)
{
    if (stream)
        KR_RT(hipStreamDestroy(kr_stream(stream)));
    return KR_GPU_OK;
}

extern "C" int kr_gpu_stream_synchronize(kr_gpu_stream_t stream)
{
    KR_RT(hipStreamSynchronize(kr_stream(stream)));
    return KR_GPU_OK;
}

extern "C" int kr_gpu_event_create(kr_gpu_event_t *event)
{
    hipEvent_t e;
    KR_RT(hipEventCreate(&e));
    *event = (kr_gpu_event_t)e;
    return KR_GPU_OK;
}

extern "C" int kr_gpu_event_destroy(kr_gpu_event_t event)
{
    if (event)
        KR_RT(hipEventDestroy((hipEvent_t)event));
    return KR_GPU_OK;
}

extern "C" int kr_gpu_event_record(kr_gpu_event_t event, kr_gpu_stream_t stream)
{
    KR_RT(hipEventRecord((hipEvent_t)event, kr_stream(stream)));
    return KR_GPU_OK;
}

extern "C" int kr_gpu_event_elapsed_ms(kr_gpu_event_t start, kr_gpu_event_t stop, float *ms)
{
    KR_RT(hipEventSynchronize((hipEvent_t)stop));
    KR_RT(hipEventElapsedTime(ms, (hipEvent_t)start, (hipEvent_t)stop));
    return KR_GPU_OK;
}

// ---------------------------------------------------------------- launches

static int kr_check_w(const kr_gpu_mxfp4_t *w, const char *who)
{
    if (!w || !w->packed || !w->scales || w->N <= 0 || w->K <= 0 || w->K % 32 != 0) {
        snprintf(kr_err, sizeof kr_err, "%s: bad MXFP4 weight descriptor", who);
        return KR_GPU_ERR_ARG;
    }
    return KR_GPU_OK;
}

// A weight and an M that fits the grid's y dimension (one block row per m).
static int kr_check_w_rows(const kr_gpu_mxfp4_t *w, int64_t M, const char *who)
{
    int st = kr_check_w(w, who);
    if (st)
        return st;
    if (M <= 0 || M > 65535) {
        snprintf(kr_err, sizeof kr_err, "%s: M out of range", who);
        return KR_GPU_ERR_ARG;
    }
    return KR_GPU_OK;
}

extern "C" int kr_gpu_quant_fp8_token(const float *x, int64_t M, int64_t K, uint8_t *q,
                                      float *scale, kr_gpu_stream_t stream)
{
    if (M <= 0 || K <= 0)
        return kr_fail_arg("quant_fp8_token: bad shape");
    kr_k_quant_fp8_token<<<(unsigned)M, 256, 0, kr_stream(stream)>>>(x, K, q, scale);
    KR_LAUNCHED("quant_fp8_token");
    return KR_GPU_OK;
}

extern "C" int kr_gpu_quant_mxfp4(const float *x, int64_t M, int64_t K, uint8_t *codes,
                                  uint8_t *scales, kr_gpu_stream_t stream)
{
    if (M <= 0 || K <= 0 || K % 32)
        return kr_fail_arg("quant_mxfp4: bad shape (K % 32 != 0)");
    kr_k_quant_mxfp4<<<kr_blocks(M * (K / 32), 128), 128, 0, kr_stream(stream)>>>(x, M, K, codes,
                                                                                  scales);
    KR_LAUNCHED("quant_mxfp4");
    return KR_GPU_OK;
}

extern "C" int kr_gpu_internal_w4a8_perblock_tiled(const uint8_t *, int, const float *, int64_t,
                                                   const kr_gpu_mxfp4_t *, uint16_t *,
                                                   kr_gpu_stream_t);

extern "C" int kr_gpu_w4a8_perblock(const uint8_t *x, int x_fmt, const float *x_scale, int64_t M,
                                    const kr_gpu_mxfp4_t *w, uint16_t *out, kr_gpu_stream_t stream)
{
    /* From 32 rows the register-tiled kernel (kr_gpu_perblock_tiled.hip), same bits. */
    if (M >= 32 && kr_check_w(w, "w4a8_perblock") == KR_GPU_OK)
        return kr_gpu_internal_w4a8_perblock_tiled(x, x_fmt, x_scale, M, w, out, stream);
    int st = kr_check_w_rows(w, M, "w4a8_perblock");
    if (st)
        return st;
    dim3 grid(kr_blocks(w->N, 128), (unsigned)M);
    kr_k_w4a8_perblock<<<grid, 128, 0, kr_stream(stream)>>>(x, x_fmt, x_scale, M, w->packed,
                                                           w->scales, w->scale_layout,
                                                           w->e8m0_zero_is_zero, w->N, w->K, out);
    KR_LAUNCHED("w4a8_perblock");
    return KR_GPU_OK;
}

extern "C" int kr_gpu_w4a8_row_ref(const kr_gpu_mxfp4_t *w, const uint8_t *case_ref, uint8_t *ref,
                                   kr_gpu_stream_t stream)
{
    int st = kr_check_w(w, "w4a8_row_ref");
    if (st)
        return st;
    kr_k_w4a8_row_ref<<<kr_blocks(w->N, 128), 128, 0, kr_stream(stream)>>>(
        w->scales, w->scale_layout, w->N, w->K, case_ref, ref);
    KR_LAUNCHED("w4a8_row_ref");
    return KR_GPU_OK;
}

extern "C" int kr_gpu_w4a8_preshift(const kr_gpu_mxfp4_t *w, const uint8_t *ref, uint8_t *w8,
                                    kr_gpu_stream_t stream)
{
    int st = kr_check_w(w, "w4a8_preshift");
    if (st)
        return st;
    kr_k_w4a8_preshift<<<kr_blocks(w->N * (w->K / 2), 256), 256, 0, kr_stream(stream)>>>(
        w->packed, w->scales, w->scale_layout, w->e8m0_zero_is_zero, ref, w->N, w->K, w8);
    KR_LAUNCHED("w4a8_preshift");
    return KR_GPU_OK;
}

static int kr_folded_launch(const uint8_t *x, int x_fmt, const float *x_scale, int64_t M,
                            const kr_gpu_mxfp4_t *w, const uint8_t *ref, uint16_t *out,
                            int fault, kr_gpu_stream_t stream)
{
    int st = kr_check_w_rows(w, M, "w4a8_folded");
    if (st)
        return st;
    dim3 grid(kr_blocks(w->N, 128), (unsigned)M);
    kr_k_w4a8_folded<<<grid, 128, 0, kr_stream(stream)>>>(x, x_fmt, x_scale, M, w->packed,
                                                         w->scales, w->scale_layout,
                                                         w->e8m0_zero_is_zero, ref, w->N, w->K,
                                                         out, fault);
    KR_LAUNCHED("w4a8_folded");
    return KR_GPU_OK;
}

extern "C" int kr_gpu_w4a8_folded(const uint8_t *x, int x_fmt, const float *x_scale, int64_t M,
                                  const kr_gpu_mxfp4_t *w, const uint8_t *ref, uint16_t *out,
                                  kr_gpu_stream_t stream)
{
    return kr_folded_launch(x, x_fmt, x_scale, M, w, ref, out, 0, stream);
}

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

extern "C" int kr_gpu_w4a4_aiter(const uint8_t *a_codes, const uint8_t *a_scales, int64_t M,
                                 const kr_gpu_mxfp4_t *w, uint16_t *out, kr_gpu_stream_t stream)
{
    int st = kr_check_w_rows(w, M, "w4a4_aiter");
    if (st)
        return st;
    dim3 grid(kr_blocks(w->N, 128), (unsigned)M);
    kr_k_w4a4_aiter<<<grid, 128, 0, kr_stream(stream)>>>(a_codes, a_scales, M, w->packed,
                                                        w->scales, w->scale_layout,
                                                        w->e8m0_zero_is_zero, w->N, w->K, out);
    KR_LAUNCHED("w4a4_aiter");
    return KR_GPU_OK;
}

extern "C" int kr_gpu_bf16_skinny(const uint16_t *x, const uint16_t *w, int64_t M, int64_t N,
                                  int64_t K, int splits, uint16_t *out, kr_gpu_stream_t stream)
{
    if (M <= 0 || M > 65535 || N <= 0 || K <= 0 || splits <= 0 || K % splits)
        return kr_fail_arg("bf16_skinny: bad shape or split count");
    dim3 grid(kr_blocks(N, 128), (unsigned)M);
    kr_k_bf16_skinny<<<grid, 128, 0, kr_stream(stream)>>>(x, w, M, N, K, splits, out);
    KR_LAUNCHED("bf16_skinny");
    return KR_GPU_OK;
}

#define KR_RACE_SPLITS 32

extern "C" int kr_gpu_fault_launch(const char *fault, const uint8_t *x, int x_fmt,
                                   const float *x_scale, int64_t M, const kr_gpu_mxfp4_t *w,
                                   const uint8_t *ref, float *scratch, size_t scratch_bytes,
                                   uint16_t *out, kr_gpu_stream_t stream)
{
    if (!fault)
        return kr_fail_arg("fault_launch: no fault named");
    if (strcmp(fault, "oob") == 0)
        return kr_folded_launch(x, x_fmt, x_scale, M, w, ref, out, 1, stream);
    if (strcmp(fault, "unwritten") == 0)
        return kr_folded_launch(x, x_fmt, x_scale, M, w, ref, out, 2, stream);
    if (strcmp(fault, "race") == 0) {
        int st = kr_check_w(w, "fault race");
        if (st)
            return st;
        int sk = KR_RACE_SPLITS;
        while (sk > 1 && w->K % sk)
            sk /= 2;
        if (!scratch || scratch_bytes < (size_t)M * (size_t)w->N * sizeof(float))
            return kr_fail_arg("fault race: needs M*N floats of scratch");
        if (M <= 0 || M > 65535)
            return kr_fail_arg("fault race: M out of range");
        KR_RT(hipMemsetAsync(scratch, 0, (size_t)M * (size_t)w->N * sizeof(float), kr_stream(stream)));
        dim3 grid(kr_blocks(w->N, 128), (unsigned)M, (unsigned)sk);
        kr_k_fault_race<<<grid, 128, 0, kr_stream(stream)>>>(
            x, x_fmt, x_scale, M, w->packed, w->scales, w->scale_layout, w->e8m0_zero_is_zero,
            ref, w->N, w->K, sk, scratch, out);
        KR_LAUNCHED("fault race");
        return KR_GPU_OK;
    }
    snprintf(kr_err, sizeof kr_err, "fault_launch: unknown fault \"%s\" (race, oob, unwritten)", fault);
    return KR_GPU_ERR_ARG;
}

#endif  // !KR_GPU_BARE
