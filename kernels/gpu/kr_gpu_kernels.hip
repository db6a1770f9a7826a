// kreplay GPU kernels: the SIMT kernels that reproduce the CPU models bit for
// bit (quantizers, w4a8.perblock, w4a8.folded with its row ref and pre-shift,
// w4a4.aiter, bf16.skinny), the fault-injection kernels, and their launches.
// The runtime wrappers are in kr_gpu_runtime.hip, w4a8.decode in
// kr_gpu_decode.hip.  One HIP source: hipcc on ROCm, nvcc through vendor.h, or
// clang -x hip device-only (KR_GPU_BARE: kernels only, no host code).
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
#include <string.h>
#include "kr_gpu_internal.h"
#endif

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

// ---------------------------------------------------------------- launches

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
    char why[480];
    snprintf(why, sizeof why, "unknown fault \"%s\" (race, oob, unwritten)", fault);
    return kr_gpu_internal_fail(KR_GPU_ERR_ARG, "fault_launch", why);
}

#endif  // !KR_GPU_BARE
