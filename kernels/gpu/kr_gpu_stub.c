/* kr_gpu without GPU support (KREPLAY_GPU=OFF, or no hipcc/nvcc found): every
 * entry point answers KR_GPU_ERR_NOT_BUILT, and kr_gpu_device_count says 0,
 * so host code links and reports "no GPU support built". */
#include <stdio.h>

#include "kr_gpu.h"

static const char kr_stub_msg[] = "no GPU support built (configure with -DKREPLAY_GPU=HIP or CUDA)";

/* A stub ignores its arguments by definition: naming each one unused would
 * only repeat every signature. */
#pragma GCC diagnostic ignored "-Wunused-parameter"

const char *kr_gpu_backend(void) { return "none"; }
const char *kr_gpu_last_error(void) { return kr_stub_msg; }

int kr_gpu_runtime_info(char *buf, size_t cap)
{
    snprintf(buf, cap, "built without GPU support");
    return KR_GPU_ERR_NOT_BUILT;
}

int kr_gpu_device_count(int *count)
{
    *count = 0;
    return KR_GPU_OK;
}

int kr_gpu_device_name(int device, char *buf, size_t cap)
{
    if (cap)
        snprintf(buf, cap, "none");
    return KR_GPU_ERR_NOT_BUILT;
}

int kr_gpu_device_arch(int device, int *arch)
{
    *arch = 0;
    return KR_GPU_ERR_NOT_BUILT;
}

int kr_gpu_set_device(int device) { return KR_GPU_ERR_NOT_BUILT; }
int kr_gpu_synchronize(void) { return KR_GPU_ERR_NOT_BUILT; }

int kr_gpu_malloc(void **ptr, size_t bytes)
{
    *ptr = NULL;
    return KR_GPU_ERR_NOT_BUILT;
}

int kr_gpu_free(void *ptr) { return ptr ? KR_GPU_ERR_NOT_BUILT : KR_GPU_OK; }

int kr_gpu_memcpy_h2d(void *dst, const void *src, size_t bytes)
{
    return KR_GPU_ERR_NOT_BUILT;
}

int kr_gpu_memcpy_d2h(void *dst, const void *src, size_t bytes)
{
    return KR_GPU_ERR_NOT_BUILT;
}

int kr_gpu_memcpy_d2d(void *dst, const void *src, size_t bytes, kr_gpu_stream_t stream)
{
    return KR_GPU_ERR_NOT_BUILT;
}

int kr_gpu_memset(void *dst, int byte, size_t bytes, kr_gpu_stream_t stream)
{
    return KR_GPU_ERR_NOT_BUILT;
}

int kr_gpu_fill_u16(uint16_t *dst, uint16_t value, size_t count, kr_gpu_stream_t stream)
{
    return KR_GPU_ERR_NOT_BUILT;
}

int kr_gpu_stream_create(kr_gpu_stream_t *stream) { *stream = NULL; return KR_GPU_ERR_NOT_BUILT; }
int kr_gpu_stream_destroy(kr_gpu_stream_t stream) { return stream ? KR_GPU_ERR_NOT_BUILT : KR_GPU_OK; }
int kr_gpu_stream_synchronize(kr_gpu_stream_t stream) { return KR_GPU_ERR_NOT_BUILT; }
int kr_gpu_event_create(kr_gpu_event_t *event) { *event = NULL; return KR_GPU_ERR_NOT_BUILT; }
int kr_gpu_event_destroy(kr_gpu_event_t event) { return event ? KR_GPU_ERR_NOT_BUILT : KR_GPU_OK; }

int kr_gpu_event_record(kr_gpu_event_t event, kr_gpu_stream_t stream)
{
    return KR_GPU_ERR_NOT_BUILT;
}

int kr_gpu_event_elapsed_ms(kr_gpu_event_t start, kr_gpu_event_t stop, float *ms)
{
    *ms = 0;
    return KR_GPU_ERR_NOT_BUILT;
}

int kr_gpu_quant_fp8_token(const float *x, int64_t M, int64_t K, uint8_t *q, float *scale,
                           kr_gpu_stream_t stream)
{
    return KR_GPU_ERR_NOT_BUILT;
}

int kr_gpu_quant_mxfp4(const float *x, int64_t M, int64_t K, uint8_t *codes, uint8_t *scales,
                       kr_gpu_stream_t stream)
{
    return KR_GPU_ERR_NOT_BUILT;
}

int kr_gpu_w4a8_perblock(const uint8_t *x, int x_fmt, const float *x_scale, int64_t M,
                         const kr_gpu_mxfp4_t *w, uint16_t *out, kr_gpu_stream_t stream)
{
    return KR_GPU_ERR_NOT_BUILT;
}

int kr_gpu_w4a8_row_ref(const kr_gpu_mxfp4_t *w, const uint8_t *case_ref, uint8_t *ref,
                        kr_gpu_stream_t stream)
{
    return KR_GPU_ERR_NOT_BUILT;
}

int kr_gpu_w4a8_preshift(const kr_gpu_mxfp4_t *w, const uint8_t *ref, uint8_t *w8,
                         kr_gpu_stream_t stream)
{
    return KR_GPU_ERR_NOT_BUILT;
}

int kr_gpu_w4a8_folded(const uint8_t *x, int x_fmt, const float *x_scale, int64_t M,
                       const kr_gpu_mxfp4_t *w, const uint8_t *ref, uint16_t *out,
                       kr_gpu_stream_t stream)
{
    return KR_GPU_ERR_NOT_BUILT;
}

size_t kr_gpu_w4a8_decode_scratch_bytes(int64_t M, int64_t N, int splits)
{
    return (size_t)(splits > 0 ? splits : 1) * (size_t)M * (size_t)N * sizeof(float);
}

int64_t kr_gpu_w4a8_decode_counters(int64_t N) { return (N + 31) / 32 + 8; }

size_t kr_gpu_w4a8_decode_layout_bytes(int64_t N, int64_t K)
{
    return (size_t)((N + 31) / 32 * 32) * (size_t)(K / 2);
}

int kr_gpu_w4a8_decode_layout(const kr_gpu_mxfp4_t *w, uint8_t *dec, kr_gpu_stream_t stream)
{
    return KR_GPU_ERR_NOT_BUILT;
}

int kr_gpu_w4a8_decode(const uint8_t *x, int x_fmt, const float *x_scale, int64_t M,
                       const kr_gpu_mxfp4_t *w, const uint8_t *dec, const uint8_t *ref, int splits,
                       float *scratch, size_t scratch_bytes, int *counters, int64_t n_counters,
                       uint16_t *out, kr_gpu_stream_t stream)
{
    return KR_GPU_ERR_NOT_BUILT;
}

int kr_gpu_w4a8_mma(const uint8_t *x, const float *x_scale, int64_t M, const uint8_t *w8,
                    const uint8_t *ref, int e8m0_zero_is_zero, int64_t N, int64_t K,
                    uint16_t *out, kr_gpu_stream_t stream)
{
    return KR_GPU_ERR_NOT_BUILT;
}

int kr_gpu_w4a8_mma_f32(const uint8_t *x, const float *x_scale, int64_t M, const uint8_t *w8,
                        const uint8_t *ref, int e8m0_zero_is_zero, int64_t N, int64_t K,
                        float *out, kr_gpu_stream_t stream)
{
    return kr_gpu_w4a8_mma(x, x_scale, M, w8, ref, e8m0_zero_is_zero, N, K, NULL, stream);
}

int kr_gpu_w4a8_mma_set_tile(int bn) { return 0; }

int kr_gpu_w4a8_wmma_gfx12(const uint8_t *x, const float *x_scale, int64_t M, const uint8_t *w8,
                           const uint8_t *ref, int e8m0_zero_is_zero, int64_t N, int64_t K,
                           uint16_t *out, kr_gpu_stream_t stream)
{
    return kr_gpu_w4a8_mma(x, x_scale, M, w8, ref, e8m0_zero_is_zero, N, K, out, stream);
}

int kr_gpu_w4a4_aiter(const uint8_t *a_codes, const uint8_t *a_scales, int64_t M,
                      const kr_gpu_mxfp4_t *w, uint16_t *out, kr_gpu_stream_t stream)
{
    return KR_GPU_ERR_NOT_BUILT;
}

int kr_gpu_bf16_skinny(const uint16_t *x, const uint16_t *w, int64_t M, int64_t N, int64_t K,
                       int splits, uint16_t *out, kr_gpu_stream_t stream)
{
    return KR_GPU_ERR_NOT_BUILT;
}

int kr_gpu_fault_launch(const char *fault, const uint8_t *x, int x_fmt, const float *x_scale,
                        int64_t M, const kr_gpu_mxfp4_t *w, const uint8_t *ref, float *scratch,
                        size_t scratch_bytes, uint16_t *out, kr_gpu_stream_t stream)
{
    return KR_GPU_ERR_NOT_BUILT;
}

int kr_gpu_gemm_f32_nt(const float *A, const float *B, int64_t M, int64_t N, int64_t K, float *C)
{
    return KR_GPU_ERR_NOT_BUILT;
}

int kr_gpu_gemm_f64_nt(const double *A, const double *B, int64_t M, int64_t N, int64_t K,
                       double *C)
{
    return KR_GPU_ERR_NOT_BUILT;
}

int kr_gpu_gemm_f32_nt_dev(const float *A, const float *B, int64_t M, int64_t N, int64_t K,
                           float *C, kr_gpu_stream_t stream)
{
    return KR_GPU_ERR_NOT_BUILT;
}

int kr_gpu_gemm_f64_nt_dev(const double *A, const double *B, int64_t M, int64_t N, int64_t K,
                           double *C, kr_gpu_stream_t stream)
{
    return KR_GPU_ERR_NOT_BUILT;
}

int kr_gpu_mem_info(size_t *free_bytes, size_t *total_bytes)
{
    *free_bytes = *total_bytes = 0;
    return KR_GPU_ERR_NOT_BUILT;
}

int kr_gpu_mxfp4_dequant(const kr_gpu_mxfp4_t *w, float *out, kr_gpu_stream_t stream)
{
    return KR_GPU_ERR_NOT_BUILT;
}

int kr_gpu_bf16_widen(const uint16_t *in, float *out, size_t n, kr_gpu_stream_t stream)
{
    return KR_GPU_ERR_NOT_BUILT;
}

int kr_gpu_f32_widen(const float *in, double *out, size_t n, kr_gpu_stream_t stream)
{
    return KR_GPU_ERR_NOT_BUILT;
}

int kr_gpu_scan_u16(const uint16_t *p, size_t n, uint16_t value, int64_t *result,
                    kr_gpu_stream_t stream)
{
    return KR_GPU_ERR_NOT_BUILT;
}

int kr_gpu_scan_u8(const uint8_t *p, size_t n, uint8_t value, int equal, int64_t *result,
                   kr_gpu_stream_t stream)
{
    return KR_GPU_ERR_NOT_BUILT;
}

int kr_gpu_diff_bf16(const uint16_t *a, const uint16_t *b, size_t n, int64_t *result,
                     kr_gpu_stream_t stream)
{
    return KR_GPU_ERR_NOT_BUILT;
}

int kr_gpu_diff_u8(const uint8_t *a, const uint8_t *b, size_t n, int64_t *result,
                   kr_gpu_stream_t stream)
{
    return KR_GPU_ERR_NOT_BUILT;
}
