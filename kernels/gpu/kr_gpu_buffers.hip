// Device buffers the GPU worker works on where they lie (kr_gpu.h, "device
// buffers"): the weight dequantized for the references, widenings, and the
// scans a launch's checks need (the poison left, the canaries, reruns
// against the first launch), so a launch's output crosses to the host once.
//
// The scans accumulate per thread over a grid-stride loop and touch the
// result slots (unsigned 64-bit atomics, which CUDA and HIP both have) only
// from threads that found something: a clean output costs no atomic at all.
#include "vendor.h"
#include "kr_gpu_numerics.h"

#if !KR_GPU_BARE
#include <stdio.h>

#include "kr_gpu.h"

extern "C" int kr_gpu_internal_fail(int status, const char *what, const char *detail);

namespace {

typedef unsigned long long u64;

constexpr unsigned kThreads = 256;
constexpr unsigned kMaxBlocks = 4096;

unsigned grid_for(size_t n)
{
    size_t b = (n + kThreads - 1) / kThreads;
    if (b < 1)
        b = 1;
    return (unsigned)(b > kMaxBlocks ? kMaxBlocks : b);
}

int launched(const char *what)
{
    hipError_t e = hipGetLastError();
    return e == hipSuccess ? KR_GPU_OK
                           : kr_gpu_internal_fail(KR_GPU_ERR_RUNTIME, what, hipGetErrorString(e));
}

// mxfp4_dequant_row: a block's sixteen values are the eight e2m1 magnitudes
// times 2^(E-127) (one fp32 multiply) and their sign flips; a NaN scale
// gives its NaN for codes 0-7 and that NaN with the sign set for 8-15.
__global__ void k_dequant(const uint8_t *KR_RESTRICT packed, const uint8_t *KR_RESTRICT scales,
                          int layout, int zero_is_zero, int64_t N, int64_t K,
                          float *KR_RESTRICT out)
{
    const size_t total = (size_t)N * (size_t)K;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        const int64_t n = (int64_t)(i / (size_t)K), k = (int64_t)(i % (size_t)K);
        const uint32_t code = kr_code_at(packed, K, n, k);
        const float scale = kr_e8m0_decode(kr_scale_at(scales, layout, N, K, n, k / 32), zero_is_zero);
        const float mag = kr_u2f((code & 7u) << 22);   // e2m1 magnitude * 2^-126
        float v = scale != scale ? scale : kr_fmul(kr_fmul(mag, 8.507059173023462e37f), scale);
        if (code & 8u)
            v = kr_u2f(kr_f2u(v) ^ 0x80000000u);
        out[i] = v;
    }
}

__global__ void k_bf16_widen(const uint16_t *KR_RESTRICT in, float *KR_RESTRICT out, size_t n)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        out[i] = kr_bf16_decode(in[i]);
}

__global__ void k_f32_widen(const float *KR_RESTRICT in, double *KR_RESTRICT out, size_t n)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        out[i] = (double)in[i];
}

// result: [count, first (min index), last (max index)].
__global__ void k_result_init(u64 *result)
{
    result[0] = 0;
    result[1] = ~0ull;
    result[2] = 0;
}

__global__ void k_scan_u16(const uint16_t *KR_RESTRICT p, size_t n, uint16_t value, u64 *result)
{
    u64 count = 0, first = ~0ull;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        if (p[i] == value) {
            count++;
            first = first < i ? first : i;
        }
    if (count) {
        atomicAdd(&result[0], count);
        atomicMin(&result[1], first);
    }
}

__global__ void k_scan_u8(const uint8_t *KR_RESTRICT p, size_t n, uint8_t value, int equal,
                          u64 *result)
{
    u64 count = 0, first = ~0ull, last = 0;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        if ((p[i] == value) == (equal != 0)) {
            count++;
            first = first < i ? first : i;
            last = i;
        }
    if (count) {
        atomicAdd(&result[0], count);
        atomicMin(&result[1], first);
        atomicMax(&result[2], last);
    }
}

__device__ __forceinline__ bool bf16_nan(uint32_t h) { return (h & 0x7FFFu) > 0x7F80u; }
__device__ __forceinline__ bool bf16_inf(uint32_t h) { return (h & 0x7FFFu) == 0x7F80u; }
__device__ __forceinline__ int bf16_ordinal(uint32_t h)
{
    return (h & 0x8000u) ? -(int)(h & 0x7FFFu) : (int)h;
}

// As the runner's host comparison: equal bits agree, two NaNs agree; any
// other pair differs, and its ULP distance counts toward the maximum unless
// a NaN or an Inf makes it non-finite.
__global__ void k_diff_bf16(const uint16_t *KR_RESTRICT a, const uint16_t *KR_RESTRICT b, size_t n,
                            u64 *result)
{
    u64 count = 0, max_ulp = 0;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const uint32_t x = a[i], y = b[i];
        if (x == y || (bf16_nan(x) && bf16_nan(y)))
            continue;
        count++;
        if (bf16_nan(x) || bf16_nan(y) || bf16_inf(x) || bf16_inf(y))
            continue;
        const int d = bf16_ordinal(x) - bf16_ordinal(y);
        const u64 ad = (u64)(d < 0 ? -d : d);
        max_ulp = ad > max_ulp ? ad : max_ulp;
    }
    if (count) {
        atomicAdd(&result[0], count);
        atomicMax(&result[1], max_ulp);
    }
}

__global__ void k_diff_u8(const uint8_t *KR_RESTRICT a, const uint8_t *KR_RESTRICT b, size_t n,
                          u64 *result)
{
    u64 count = 0;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        count += a[i] != b[i];
    if (count)
        atomicAdd(&result[0], count);
}

} // namespace

extern "C" int kr_gpu_mem_info(size_t *free_bytes, size_t *total_bytes)
{
#if KR_GPU_CUDA
    cudaError_t e = cudaMemGetInfo(free_bytes, total_bytes);
#else
    hipError_t e = hipMemGetInfo(free_bytes, total_bytes);
#endif
    return e == hipSuccess ? KR_GPU_OK
                           : kr_gpu_internal_fail(KR_GPU_ERR_RUNTIME, "mem_info", hipGetErrorString(e));
}

extern "C" int kr_gpu_mxfp4_dequant(const kr_gpu_mxfp4_t *w, float *out, kr_gpu_stream_t stream)
{
    if (!w || !w->packed || !w->scales || !out || w->N <= 0 || w->K <= 0 || w->K % 32)
        return kr_gpu_internal_fail(KR_GPU_ERR_ARG, "mxfp4_dequant", "bad MXFP4 weight descriptor");
    k_dequant<<<grid_for((size_t)w->N * (size_t)w->K), kThreads, 0, (hipStream_t)stream>>>(
        w->packed, w->scales, w->scale_layout, w->e8m0_zero_is_zero, w->N, w->K, out);
    return launched("launch mxfp4_dequant");
}

extern "C" int kr_gpu_bf16_widen(const uint16_t *in, float *out, size_t n, kr_gpu_stream_t stream)
{
    if (!n)
        return KR_GPU_OK;
    k_bf16_widen<<<grid_for(n), kThreads, 0, (hipStream_t)stream>>>(in, out, n);
    return launched("launch bf16_widen");
}

extern "C" int kr_gpu_f32_widen(const float *in, double *out, size_t n, kr_gpu_stream_t stream)
{
    if (!n)
        return KR_GPU_OK;
    k_f32_widen<<<grid_for(n), kThreads, 0, (hipStream_t)stream>>>(in, out, n);
    return launched("launch f32_widen");
}

namespace {

// The result slots set, then the scan (when there is anything to scan).
template <typename Launch>
int scan(const char *what, size_t n, int64_t *result, kr_gpu_stream_t stream, Launch launch)
{
    u64 *r = (u64 *)(void *)result;
    k_result_init<<<1, 1, 0, (hipStream_t)stream>>>(r);
    if (n)
        launch(grid_for(n), (hipStream_t)stream, r);
    return launched(what);
}

} // namespace

extern "C" int kr_gpu_scan_u16(const uint16_t *p, size_t n, uint16_t value, int64_t *result,
                               kr_gpu_stream_t stream)
{
    return scan("launch scan_u16", n, result, stream, [&](unsigned g, hipStream_t s, u64 *r) {
        k_scan_u16<<<g, kThreads, 0, s>>>(p, n, value, r);
    });
}

extern "C" int kr_gpu_scan_u8(const uint8_t *p, size_t n, uint8_t value, int equal,
                              int64_t *result, kr_gpu_stream_t stream)
{
    return scan("launch scan_u8", n, result, stream, [&](unsigned g, hipStream_t s, u64 *r) {
        k_scan_u8<<<g, kThreads, 0, s>>>(p, n, value, equal, r);
    });
}

extern "C" int kr_gpu_diff_bf16(const uint16_t *a, const uint16_t *b, size_t n, int64_t *result,
                                kr_gpu_stream_t stream)
{
    return scan("launch diff_bf16", n, result, stream, [&](unsigned g, hipStream_t s, u64 *r) {
        k_diff_bf16<<<g, kThreads, 0, s>>>(a, b, n, r);
    });
}

extern "C" int kr_gpu_diff_u8(const uint8_t *a, const uint8_t *b, size_t n, int64_t *result,
                              kr_gpu_stream_t stream)
{
    return scan("launch diff_u8", n, result, stream, [&](unsigned g, hipStream_t s, u64 *r) {
        k_diff_u8<<<g, kThreads, 0, s>>>(a, b, n, r);
    });
}

#endif // !KR_GPU_BARE
