/* kr_gpu: the C API of kreplay's GPU kernels (plain C, included by C11 host
 * code).  Implemented by the HIP sources in this folder (built by hipcc on
 * ROCm or by nvcc through vendor.h), or by kr_gpu_stub.c when the build has
 * no GPU support, so host code always links.
 *
 * Every function returns a kr_gpu_status_t; on failure kr_gpu_last_error()
 * holds one line naming the call and the runtime's error string.  Launch
 * functions are asynchronous on `stream` (NULL = the default stream); they
 * check the launch itself (hipGetLastError) but not the kernel's completion:
 * synchronize to see execution errors.  All pointers passed to launches are
 * device pointers.  Nothing here allocates inside a launch: scratch for the
 * split-K kernels is allocated by the caller up front (outside any graph
 * capture), as the production MXFP4 dispatch does.
 *
 * Bit contracts: each SIMT launch reproduces the accumulation order of the
 * CPU model of the same name (kernels/cpu/) bit for bit; the matrix-unit
 * launches (w4a8_mma, w4a8_wmma_gfx12) do not, and their difference from the
 * model is measured by tests/test_gpu.c. */
#ifndef KR_GPU_H
#define KR_GPU_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    KR_GPU_OK = 0,
    KR_GPU_ERR_NOT_BUILT,       /* this build has no GPU support */
    KR_GPU_ERR_NO_DEVICE,       /* built, but no device present */
    KR_GPU_ERR_RUNTIME,         /* a HIP/CUDA runtime call failed (see kr_gpu_last_error) */
    KR_GPU_ERR_ARG,             /* bad argument (shape, null pointer, scratch too small) */
    KR_GPU_ERR_UNSUPPORTED,     /* not available on this device or backend */
} kr_gpu_status_t;

typedef void *kr_gpu_stream_t;
typedef void *kr_gpu_event_t;

/* ---- build and devices ---- */
const char *kr_gpu_backend(void);           /* "cuda", "hip" or "none" */
const char *kr_gpu_status_name(int status);
const char *kr_gpu_last_error(void);        /* last failure's message ("" if none) */
/* The runtime's version and the device code built in, e.g. "runtime 5.2.21153,
 * device code gfx1030"; KR_GPU_ERR_NOT_BUILT without GPU support. */
int kr_gpu_runtime_info(char *buf, size_t cap);
int kr_gpu_device_count(int *count);        /* 0 devices is KR_GPU_OK with *count = 0 */
int kr_gpu_device_name(int device, char *buf, size_t cap);
/* Compute capability (CUDA major*10+minor, e.g. 90) or gfx number (e.g. 1201 on ROCm). */
int kr_gpu_device_arch(int device, int *arch);
int kr_gpu_set_device(int device);
int kr_gpu_synchronize(void);

/* ---- memory ---- */
int kr_gpu_malloc(void **ptr, size_t bytes);
int kr_gpu_free(void *ptr);                 /* NULL is fine */
int kr_gpu_memcpy_h2d(void *dst, const void *src, size_t bytes);
int kr_gpu_memcpy_d2h(void *dst, const void *src, size_t bytes);
int kr_gpu_memcpy_d2d(void *dst, const void *src, size_t bytes, kr_gpu_stream_t stream);
int kr_gpu_memset(void *dst, int byte, size_t bytes, kr_gpu_stream_t stream);
/* dst[i] = value for i < count (16-bit pattern fill, e.g. the 0x7FC1 poison). */
int kr_gpu_fill_u16(uint16_t *dst, uint16_t value, size_t count, kr_gpu_stream_t stream);

/* ---- streams and events ---- */
int kr_gpu_stream_create(kr_gpu_stream_t *stream);
int kr_gpu_stream_destroy(kr_gpu_stream_t stream);
int kr_gpu_stream_synchronize(kr_gpu_stream_t stream);
int kr_gpu_event_create(kr_gpu_event_t *event);
int kr_gpu_event_destroy(kr_gpu_event_t event);
int kr_gpu_event_record(kr_gpu_event_t event, kr_gpu_stream_t stream);
int kr_gpu_event_elapsed_ms(kr_gpu_event_t start, kr_gpu_event_t stop, float *ms);

/* ---- reference GEMMs (host pointers in and out) ----
 * C[M, N] = A[M, K] @ B[N, K]^T, every operand row-major in host memory; the
 * call allocates, copies, multiplies and copies back.  fp32 in true IEEE fp32
 * (cuBLAS in pedantic math mode: no TF32, no reduced-precision reductions),
 * fp64 through DGEMM.  CUDA builds only (cuBLAS); KR_GPU_ERR_UNSUPPORTED on
 * ROCm, whose hipBLAS Debian does not ship. */
int kr_gpu_gemm_f32_nt(const float *A, const float *B, int64_t M, int64_t N, int64_t K,
                       float *C);
int kr_gpu_gemm_f64_nt(const double *A, const double *B, int64_t M, int64_t N, int64_t K,
                       double *C);
/* The same on operands already on the device, on `stream`, into device C:
 * the worker's references, its operands resident for the whole case. */
int kr_gpu_gemm_f32_nt_dev(const float *A, const float *B, int64_t M, int64_t N, int64_t K,
                           float *C, kr_gpu_stream_t stream);
int kr_gpu_gemm_f64_nt_dev(const double *A, const double *B, int64_t M, int64_t N, int64_t K,
                           double *C, kr_gpu_stream_t stream);

/* ---- device buffers (kr_gpu_buffers.hip; what the GPU worker computes where the data is) ----
 * Every pointer is a device pointer; `result` is device memory the caller
 * owns (int64 slots, downloaded after a synchronize), so no call allocates. */
int kr_gpu_mem_info(size_t *free_bytes, size_t *total_bytes);
/* out[n] = the fp32 value of bf16 bits in[n] (exact). */
int kr_gpu_bf16_widen(const uint16_t *in, float *out, size_t n, kr_gpu_stream_t stream);
/* out[n] = (double)in[n] (exact). */
int kr_gpu_f32_widen(const float *in, double *out, size_t n, kr_gpu_stream_t stream);
/* result[0] = elements equal to value, result[1] = the first one's index (when result[0] > 0). */
int kr_gpu_scan_u16(const uint16_t *p, size_t n, uint16_t value, int64_t *result,
                    kr_gpu_stream_t stream);
/* Bytes equal to value (equal != 0) or different from it (equal == 0): result[0] = how
 * many, result[1] = the first one's index, result[2] = the last one's (both meaningful
 * when result[0] > 0). */
int kr_gpu_scan_u8(const uint8_t *p, size_t n, uint8_t value, int equal, int64_t *result,
                   kr_gpu_stream_t stream);
/* bf16 a against b: result[0] = elements that differ (two NaNs agree whatever their
 * payloads), result[1] = the largest bf16 ULP distance among them (pairs with a NaN
 * or an Inf on one side only not counted in it). */
int kr_gpu_diff_bf16(const uint16_t *a, const uint16_t *b, size_t n, int64_t *result,
                     kr_gpu_stream_t stream);
/* result[0] = bytes of a that differ from b. */
int kr_gpu_diff_u8(const uint8_t *a, const uint8_t *b, size_t n, int64_t *result,
                   kr_gpu_stream_t stream);

/* ---- operand descriptors ---- */

/* An MXFP4 weight on the device: packed e2m1 [N, K/2] in checkpoint order
 * (element 2j in the low nibble) and e8m0 block scales. */
typedef struct {
    const uint8_t *packed;
    const uint8_t *scales;
    int scale_layout;           /* 0: [N, K/32] (checkpoint), 1: [K/32, N] (production) */
    int e8m0_zero_is_zero;      /* 1: scale byte 0 decodes to 0 (Triton fallback); 0: 2^-127 */
    int64_t N, K;
} kr_gpu_mxfp4_t;

/* fp8 activation codes: 0 = e4m3fn, 1 = e4m3fnuz (the same values as fp8_format_t). */

/* The dequantized weight out [N, K] fp32: e2m1 * 2^(E-127) as mxfp4_dequant_row
 * computes it (the codes 8-15 the negations of 0-7, a NaN scale's NaN signed
 * likewise), bit for bit. */
int kr_gpu_mxfp4_dequant(const kr_gpu_mxfp4_t *w, float *out, kr_gpu_stream_t stream);

/* ---- activation quantizers ---- */
/* vLLM dynamic_per_token_scaled_fp8_quant (variant "vllm", e4m3fn): one block
 * per row.  x [M, K] fp32 -> q [M, K] codes, scale [M]. */
int kr_gpu_quant_fp8_token(const float *x, int64_t M, int64_t K, uint8_t *q, float *scale,
                           kr_gpu_stream_t stream);
/* aiter _mxfp4_quant_op (variant "aiter-even"): codes [M, K] one per byte, scales [M, K/32]. */
int kr_gpu_quant_mxfp4(const float *x, int64_t M, int64_t K, uint8_t *codes, uint8_t *scales,
                       kr_gpu_stream_t stream);

/* ---- W4A8 (fp8 per-token activations x MXFP4 weights), out bf16 [M, N] ---- */
/* w4a8.perblock: per 32-block exact sum, times 2^(E-127), accumulated; x_scale in the epilogue. */
int kr_gpu_w4a8_perblock(const uint8_t *x, int x_fmt, const float *x_scale, int64_t M,
                         const kr_gpu_mxfp4_t *w, uint16_t *out, kr_gpu_stream_t stream);
/* Reference exponent per row: a copy of case_ref (N bytes) if non-NULL, else
 * max over the row's scale bytes (make_row_ref).  ref [N] on the device. */
int kr_gpu_w4a8_row_ref(const kr_gpu_mxfp4_t *w, const uint8_t *case_ref, uint8_t *ref,
                        kr_gpu_stream_t stream);
/* w8 [N, K] e4m3fn codes = e4m3fn_encode(e2m1 * 2^(E - ref), saturate): the
 * folded path's pre-shifted weight, as the MMA kernels read it. */
int kr_gpu_w4a8_preshift(const kr_gpu_mxfp4_t *w, const uint8_t *ref, uint8_t *w8,
                         kr_gpu_stream_t stream);
/* w4a8.folded (SIMT): acc = sum over all k ascending of x*w8, out = bf16(acc * (xs*2^(ref-127))). */
int kr_gpu_w4a8_folded(const uint8_t *x, int x_fmt, const float *x_scale, int64_t M,
                       const kr_gpu_mxfp4_t *w, const uint8_t *ref, uint16_t *out,
                       kr_gpu_stream_t stream);
/* w4a8.decode: split-K into `splits` equal contiguous k ranges (K % splits == 0),
 * partials in fp32 scratch, a per-n-block counter; the last block to arrive
 * reduces partial[0] + partial[1] + ... in split order, writes the output and
 * resets its counter to 0.  scratch >= kr_gpu_w4a8_decode_scratch_bytes();
 * counters: kr_gpu_w4a8_decode_counters() ints, zeroed once by the caller.
 * dec: the weight in the decode kernel's warp-contiguous order
 * (kr_gpu_w4a8_decode_layout, kr_gpu_w4a8_decode_layout_bytes(N, K) bytes,
 * built once at load like WPERM), or NULL to read w->packed in checkpoint
 * order (same bits, slower: each lane streams its own row).
 * M <= 64 (larger M, or k ranges not multiples of 128, take a one-thread-per-
 * output kernel with the same order). */
size_t kr_gpu_w4a8_decode_scratch_bytes(int64_t M, int64_t N, int splits);
int64_t kr_gpu_w4a8_decode_counters(int64_t N);
size_t kr_gpu_w4a8_decode_layout_bytes(int64_t N, int64_t K);
int kr_gpu_w4a8_decode_layout(const kr_gpu_mxfp4_t *w, uint8_t *dec, kr_gpu_stream_t stream);
int kr_gpu_w4a8_decode(const uint8_t *x, int x_fmt, const float *x_scale, int64_t M,
                       const kr_gpu_mxfp4_t *w, const uint8_t *dec, const uint8_t *ref, int splits,
                       float *scratch, size_t scratch_bytes, int *counters, int64_t n_counters,
                       uint16_t *out, kr_gpu_stream_t stream);

/* ---- matrix-unit variants (NOT bit-faithful: fp8 MMA does not sum as IEEE fp32) ---- */
/* NVIDIA mma.sync m16n8k32 e4m3 (sm_89+): x [M, K] e4m3fn, w8 [N, K] e4m3fn
 * (kr_gpu_w4a8_preshift), out = bf16(acc * (x_scale[m] * 2^(ref[n]-127))).
 * K % 64 == 0.  KR_GPU_ERR_UNSUPPORTED elsewhere. */
int kr_gpu_w4a8_mma(const uint8_t *x, const float *x_scale, int64_t M, const uint8_t *w8,
                    const uint8_t *ref, int e8m0_zero_is_zero, int64_t N, int64_t K,
                    uint16_t *out, kr_gpu_stream_t stream);
/* The same, writing the fp32 value acc * (x_scale[m] * 2^(ref[n]-127)) before
 * the bf16 rounding (to measure the tensor cores' accumulation). */
int kr_gpu_w4a8_mma_f32(const uint8_t *x, const float *x_scale, int64_t M, const uint8_t *w8,
                        const uint8_t *ref, int e8m0_zero_is_zero, int64_t N, int64_t K,
                        float *out, kr_gpu_stream_t stream);
/* Block tile N of the MMA kernel: 256 (default) or 128; returns the previous. */
int kr_gpu_w4a8_mma_set_tile(int bn);
/* gfx12 WMMA fp8 (v_wmma_f32_16x16x16_fp8_fp8), same operands and epilogue.
 * Only on ROCm builds for gfx12 targets; KR_GPU_ERR_UNSUPPORTED elsewhere. */
int kr_gpu_w4a8_wmma_gfx12(const uint8_t *x, const float *x_scale, int64_t M, const uint8_t *w8,
                           const uint8_t *ref, int e8m0_zero_is_zero, int64_t N, int64_t K,
                           uint16_t *out, kr_gpu_stream_t stream);

/* ---- W4A4 (aiter): MXFP4 activations (codes one per byte + e8m0 [M, K/32]) ---- */
int kr_gpu_w4a4_aiter(const uint8_t *a_codes, const uint8_t *a_scales, int64_t M,
                      const kr_gpu_mxfp4_t *w, uint16_t *out, kr_gpu_stream_t stream);

/* ---- bf16 skinny: C[M, N] = x[M, K] @ W[N, K]^T, bf16 bits in and out ----
 * partial[s] = sequential fp32 sum over the s-th of `splits` equal k ranges,
 * acc = partial[0] + partial[1] + ... in split order, out = bf16(acc). */
int kr_gpu_bf16_skinny(const uint16_t *x, const uint16_t *w, int64_t M, int64_t N, int64_t K,
                       int splits, uint16_t *out, kr_gpu_stream_t stream);

/* ---- fault injection (tests of the runner's verdicts) ----
 * "race":      split-K whose partials are summed with float atomics in arrival
 *              order and written by every block (no counter): reruns differ.
 *              Needs scratch of M*N floats.
 * "oob":       w4a8.folded that also writes one element past out[M*N-1].
 * "unwritten": w4a8.folded that skips the last 32-column tile.
 * Operands as kr_gpu_w4a8_folded. */
int kr_gpu_fault_launch(const char *fault, const uint8_t *x, int x_fmt, const float *x_scale,
                        int64_t M, const kr_gpu_mxfp4_t *w, const uint8_t *ref, float *scratch,
                        size_t scratch_bytes, uint16_t *out, kr_gpu_stream_t stream);

#ifdef __cplusplus
}
#endif

#endif
