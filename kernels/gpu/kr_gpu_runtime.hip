// kr_gpu's runtime wrappers (kr_gpu.h: devices, memory, streams, events) and
// the library's one error record (kr_gpu_last_error, written by every source
// through kr_gpu_internal_fail).  Apart from the kernels because every launch
// source stands on them and they on no kernel but the fill they wrap.  One HIP
// source: hipcc on ROCm, nvcc through vendor.h; a bare device-only compile
// (KR_GPU_BARE) keeps the fill kernel alone.
#include "vendor.h"

#if !KR_GPU_BARE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kr_gpu_internal.h"
#endif

// ---------------------------------------------------------------- utilities

__global__ void kr_k_fill_u16(uint16_t *dst, uint16_t v, size_t n)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (; i < n; i += stride)
        dst[i] = v;
}

#if !KR_GPU_BARE

static char kr_err[512];

extern "C" const char *kr_gpu_last_error(void) { return kr_err; }

// For the other sources of this library (the launch sources through
// kr_gpu_internal.h, kr_gpu_mma.hip, kr_gpu_wmma_gfx12.hip, ...).
extern "C" int kr_gpu_internal_fail(int status, const char *what, const char *detail)
{
    snprintf(kr_err, sizeof kr_err, "%s%s%s", what, detail ? ": " : "", detail ? detail : "");
    return status;
}

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

#endif  // !KR_GPU_BARE
