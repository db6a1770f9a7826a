/* kr_gpu.h in HIP builds: the GPU code and the HIP runtime live in a module
 * (libkreplay_gpu_hip.so) opened on the first call that needs a device.
 * Linking libamdhip64 into kreplay made every process pay for loading and
 * initialising ROCm (about 20 ms on a 2-core machine: a small replay took
 * 57 ms instead of 33) and made kreplay fail to start where the ROCm libraries are
 * missing, although CPU replays need neither.
 *
 * Each call below forwards to the module's function of the same name; the
 * compiler checks every forwarder against its declaration in kr_gpu.h, the
 * linker that none is missing.  Where the module cannot be opened, a call
 * answers KR_GPU_ERR_RUNTIME, the device count is 0, and kr_gpu_last_error
 * says why (the loader's own message, e.g. a missing libamdhip64). */
#define _GNU_SOURCE
#include "kr_gpu.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef KR_GPU_MODULE_NAME
#define KR_GPU_MODULE_NAME "libkreplay_gpu_hip.so"
#endif
#ifndef KR_GPU_TARGETS
#define KR_GPU_TARGETS "unknown"
#endif

/* X(return type, answer when the module is missing, name, parameters, arguments) */
#define KR_GPU_FORWARDED(X)                                                                         \
    X(int, KR_GPU_ERR_RUNTIME, kr_gpu_device_name, (int device, char *buf, size_t cap),             \
      (device, buf, cap))                                                                           \
    X(int, KR_GPU_ERR_RUNTIME, kr_gpu_device_arch, (int device, int *arch), (device, arch))          \
    X(int, KR_GPU_ERR_RUNTIME, kr_gpu_set_device, (int device), (device))                           \
    X(int, KR_GPU_ERR_RUNTIME, kr_gpu_synchronize, (void), ())                                      \
    X(int, KR_GPU_ERR_RUNTIME, kr_gpu_malloc, (void **ptr, size_t bytes), (ptr, bytes))             \
    X(int, KR_GPU_ERR_RUNTIME, kr_gpu_memcpy_h2d, (void *dst, const void *src, size_t bytes),       \
      (dst, src, bytes))                                                                            \
    X(int, KR_GPU_ERR_RUNTIME, kr_gpu_memcpy_d2h, (void *dst, const void *src, size_t bytes),       \
      (dst, src, bytes))                                                                            \
    X(int, KR_GPU_ERR_RUNTIME, kr_gpu_memcpy_d2d,                                                   \
      (void *dst, const void *src, size_t bytes, kr_gpu_stream_t stream), (dst, src, bytes, stream)) \
    X(int, KR_GPU_ERR_RUNTIME, kr_gpu_memset, (void *dst, int byte, size_t bytes, kr_gpu_stream_t stream), \
      (dst, byte, bytes, stream))                                                                   \
    X(int, KR_GPU_ERR_RUNTIME, kr_gpu_fill_u16,                                                     \
      (uint16_t *dst, uint16_t value, size_t count, kr_gpu_stream_t stream),                        \
      (dst, value, count, stream))                                                                  \
    X(int, KR_GPU_ERR_RUNTIME, kr_gpu_stream_create, (kr_gpu_stream_t *stream), (stream))           \
    X(int, KR_GPU_ERR_RUNTIME, kr_gpu_stream_destroy, (kr_gpu_stream_t stream), (stream))           \
    X(int, KR_GPU_ERR_RUNTIME, kr_gpu_stream_synchronize, (kr_gpu_stream_t stream), (stream))       \
    X(int, KR_GPU_ERR_RUNTIME, kr_gpu_event_create, (kr_gpu_event_t *event), (event))               \
    X(int, KR_GPU_ERR_RUNTIME, kr_gpu_event_destroy, (kr_gpu_event_t event), (event))               \
    X(int, KR_GPU_ERR_RUNTIME, kr_gpu_event_record, (kr_gpu_event_t event, kr_gpu_stream_t stream), \
      (event, stream))                                                                              \
    X(int, KR_GPU_ERR_RUNTIME, kr_gpu_event_elapsed_ms,                                             \
      (kr_gpu_event_t start, kr_gpu_event_t stop, float *ms), (start, stop, ms))                    \
    X(int, KR_GPU_ERR_RUNTIME, kr_gpu_gemm_f32_nt,                                                  \
      (const float *A, const float *B, int64_t M, int64_t N, int64_t K, float *C), (A, B, M, N, K, C)) \
    X(int, KR_GPU_ERR_RUNTIME, kr_gpu_gemm_f64_nt,                                                  \
      (const double *A, const double *B, int64_t M, int64_t N, int64_t K, double *C),               \
      (A, B, M, N, K, C))                                                                           \
    X(int, KR_GPU_ERR_RUNTIME, kr_gpu_gemm_f32_nt_dev,                                              \
      (const float *A, const float *B, int64_t M, int64_t N, int64_t K, float *C,                   \
       kr_gpu_stream_t stream), (A, B, M, N, K, C, stream))                                         \
    X(int, KR_GPU_ERR_RUNTIME, kr_gpu_gemm_f64_nt_dev,                                              \
      (const double *A, const double *B, int64_t M, int64_t N, int64_t K, double *C,                \
       kr_gpu_stream_t stream), (A, B, M, N, K, C, stream))                                         \
    X(int, KR_GPU_ERR_RUNTIME, kr_gpu_mem_info, (size_t *free_bytes, size_t *total_bytes),          \
      (free_bytes, total_bytes))                                                                    \
    X(int, KR_GPU_ERR_RUNTIME, kr_gpu_mxfp4_dequant,                                                \
      (const kr_gpu_mxfp4_t *w, float *out, kr_gpu_stream_t stream), (w, out, stream))              \
    X(int, KR_GPU_ERR_RUNTIME, kr_gpu_bf16_widen,                                                   \
      (const uint16_t *in, float *out, size_t n, kr_gpu_stream_t stream), (in, out, n, stream))     \
    X(int, KR_GPU_ERR_RUNTIME, kr_gpu_f32_widen,                                                    \
      (const float *in, double *out, size_t n, kr_gpu_stream_t stream), (in, out, n, stream))       \
    X(int, KR_GPU_ERR_RUNTIME, kr_gpu_scan_u16,                                                     \
      (const uint16_t *p, size_t n, uint16_t value, int64_t *result, kr_gpu_stream_t stream),       \
      (p, n, value, result, stream))                                                                \
    X(int, KR_GPU_ERR_RUNTIME, kr_gpu_scan_u8,                                                      \
      (const uint8_t *p, size_t n, uint8_t value, int equal, int64_t *result,                       \
       kr_gpu_stream_t stream), (p, n, value, equal, result, stream))                               \
    X(int, KR_GPU_ERR_RUNTIME, kr_gpu_diff_bf16,                                                    \
      (const uint16_t *a, const uint16_t *b, size_t n, int64_t *result, kr_gpu_stream_t stream),    \
      (a, b, n, result, stream))                                                                    \
    X(int, KR_GPU_ERR_RUNTIME, kr_gpu_diff_u8,                                                      \
      (const uint8_t *a, const uint8_t *b, size_t n, int64_t *result, kr_gpu_stream_t stream),      \
      (a, b, n, result, stream))                                                                    \
    X(int, KR_GPU_ERR_RUNTIME, kr_gpu_quant_fp8_token,                                              \
      (const float *x, int64_t M, int64_t K, uint8_t *q, float *scale, kr_gpu_stream_t stream),     \
      (x, M, K, q, scale, stream))                                                                  \
    X(int, KR_GPU_ERR_RUNTIME, kr_gpu_quant_mxfp4,                                                  \
      (const float *x, int64_t M, int64_t K, uint8_t *codes, uint8_t *scales, kr_gpu_stream_t stream), \
      (x, M, K, codes, scales, stream))                                                             \
    X(int, KR_GPU_ERR_RUNTIME, kr_gpu_w4a8_perblock,                                                \
      (const uint8_t *x, int x_fmt, const float *x_scale, int64_t M, const kr_gpu_mxfp4_t *w,       \
       uint16_t *out, kr_gpu_stream_t stream),                                                      \
      (x, x_fmt, x_scale, M, w, out, stream))                                                       \
    X(int, KR_GPU_ERR_RUNTIME, kr_gpu_w4a8_row_ref,                                                 \
      (const kr_gpu_mxfp4_t *w, const uint8_t *case_ref, uint8_t *ref, kr_gpu_stream_t stream),     \
      (w, case_ref, ref, stream))                                                                   \
    X(int, KR_GPU_ERR_RUNTIME, kr_gpu_w4a8_preshift,                                                \
      (const kr_gpu_mxfp4_t *w, const uint8_t *ref, uint8_t *w8, kr_gpu_stream_t stream),           \
      (w, ref, w8, stream))                                                                         \
    X(int, KR_GPU_ERR_RUNTIME, kr_gpu_w4a8_folded,                                                  \
      (const uint8_t *x, int x_fmt, const float *x_scale, int64_t M, const kr_gpu_mxfp4_t *w,       \
       const uint8_t *ref, uint16_t *out, kr_gpu_stream_t stream),                                  \
      (x, x_fmt, x_scale, M, w, ref, out, stream))                                                  \
    X(size_t, 0, kr_gpu_w4a8_decode_scratch_bytes, (int64_t M, int64_t N, int splits), (M, N, splits)) \
    X(int64_t, 0, kr_gpu_w4a8_decode_counters, (int64_t N), (N))                                    \
    X(size_t, 0, kr_gpu_w4a8_decode_layout_bytes, (int64_t N, int64_t K), (N, K))                   \
    X(int, KR_GPU_ERR_RUNTIME, kr_gpu_w4a8_decode_layout,                                           \
      (const kr_gpu_mxfp4_t *w, uint8_t *dec, kr_gpu_stream_t stream), (w, dec, stream))            \
    X(int, KR_GPU_ERR_RUNTIME, kr_gpu_w4a8_decode,                                                  \
      (const uint8_t *x, int x_fmt, const float *x_scale, int64_t M, const kr_gpu_mxfp4_t *w,       \
       const uint8_t *dec, const uint8_t *ref, int splits, float *scratch, size_t scratch_bytes,    \
       int *counters, int64_t n_counters, uint16_t *out, kr_gpu_stream_t stream),                   \
      (x, x_fmt, x_scale, M, w, dec, ref, splits, scratch, scratch_bytes, counters, n_counters,     \
       out, stream))                                                                                \
    X(int, KR_GPU_ERR_RUNTIME, kr_gpu_w4a8_mma,                                                     \
      (const uint8_t *x, const float *x_scale, int64_t M, const uint8_t *w8, const uint8_t *ref,    \
       int e8m0_zero_is_zero, int64_t N, int64_t K, uint16_t *out, kr_gpu_stream_t stream),         \
      (x, x_scale, M, w8, ref, e8m0_zero_is_zero, N, K, out, stream))                               \
    X(int, KR_GPU_ERR_RUNTIME, kr_gpu_w4a8_mma_f32,                                                 \
      (const uint8_t *x, const float *x_scale, int64_t M, const uint8_t *w8, const uint8_t *ref,    \
       int e8m0_zero_is_zero, int64_t N, int64_t K, float *out, kr_gpu_stream_t stream),            \
      (x, x_scale, M, w8, ref, e8m0_zero_is_zero, N, K, out, stream))                               \
    X(int, KR_GPU_ERR_RUNTIME, kr_gpu_w4a8_mma_set_tile, (int bn), (bn))                            \
    X(int, KR_GPU_ERR_RUNTIME, kr_gpu_w4a8_wmma_gfx12,                                              \
      (const uint8_t *x, const float *x_scale, int64_t M, const uint8_t *w8, const uint8_t *ref,    \
       int e8m0_zero_is_zero, int64_t N, int64_t K, uint16_t *out, kr_gpu_stream_t stream),         \
      (x, x_scale, M, w8, ref, e8m0_zero_is_zero, N, K, out, stream))                               \
    X(int, KR_GPU_ERR_RUNTIME, kr_gpu_w4a4_aiter,                                                   \
      (const uint8_t *a_codes, const uint8_t *a_scales, int64_t M, const kr_gpu_mxfp4_t *w,         \
       uint16_t *out, kr_gpu_stream_t stream),                                                      \
      (a_codes, a_scales, M, w, out, stream))                                                       \
    X(int, KR_GPU_ERR_RUNTIME, kr_gpu_bf16_skinny,                                                  \
      (const uint16_t *x, const uint16_t *w, int64_t M, int64_t N, int64_t K, int splits,           \
       uint16_t *out, kr_gpu_stream_t stream),                                                      \
      (x, w, M, N, K, splits, out, stream))                                                         \
    X(int, KR_GPU_ERR_RUNTIME, kr_gpu_fault_launch,                                                 \
      (const char *fault, const uint8_t *x, int x_fmt, const float *x_scale, int64_t M,             \
       const kr_gpu_mxfp4_t *w, const uint8_t *ref, float *scratch, size_t scratch_bytes,           \
       uint16_t *out, kr_gpu_stream_t stream),                                                      \
      (fault, x, x_fmt, x_scale, M, w, ref, scratch, scratch_bytes, out, stream))
/* Resolved, but answered here (below): each has an answer without the module. */
#define KR_GPU_ANSWERED_HERE(X)                                                                     \
    X(int, KR_GPU_ERR_RUNTIME, kr_gpu_free, (void *ptr), (ptr))                                     \
    X(int, KR_GPU_ERR_RUNTIME, kr_gpu_runtime_info, (char *buf, size_t cap), (buf, cap))            \
    X(int, KR_GPU_OK, kr_gpu_device_count, (int *count), (count))                                   \
    X(const char *, "", kr_gpu_last_error, (void), ())

#define KR_GPU_POINTER(ret, missing, name, params, args) static ret(*lazy_##name) params;
KR_GPU_FORWARDED(KR_GPU_POINTER)
KR_GPU_ANSWERED_HERE(KR_GPU_POINTER)

typedef struct {
    pthread_once_t once;
    int attempted;              /* set once a call needed the module */
    int ready;
    char why[PATH_MAX + 512];   /* why the module could not be opened */
} gpu_module_t;

static gpu_module_t g_module = {PTHREAD_ONCE_INIT, 0, 0, ""};

/* The directory of the running executable, with its trailing slash. */
static int exe_dir(char *buf, size_t cap)
{
    ssize_t n = readlink("/proc/self/exe", buf, cap - 1);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    char *slash = strrchr(buf, '/');
    if (!slash)
        return 0;
    slash[1] = '\0';
    return 1;
}

/* KREPLAY_GPU_MODULE when set, else the first that exists of: next to the
 * executable (the build tree), the install's library folder, where the build
 * wrote it (tests run from other folders). */
static void *open_module(char *why, size_t cap)
{
    char dir[PATH_MAX], candidates[3][PATH_MAX + 64];
    int n = 0;
    const char *env = getenv("KREPLAY_GPU_MODULE");
    if (env && env[0]) {
        /* Named by the user: that file or an error, never a silent other one. */
        void *h = dlopen(env, RTLD_NOW | RTLD_LOCAL);
        if (!h)
            snprintf(why, cap, "KREPLAY_GPU_MODULE=%s: %s", env, dlerror());
        return h;
    }
    if (exe_dir(dir, sizeof dir)) {
        snprintf(candidates[n++], sizeof candidates[0], "%s%s", dir, KR_GPU_MODULE_NAME);
#ifdef KR_GPU_MODULE_INSTALL_REL
        snprintf(candidates[n++], sizeof candidates[0], "%s%s/%s", dir, KR_GPU_MODULE_INSTALL_REL,
                 KR_GPU_MODULE_NAME);
#endif
    }
#ifdef KR_GPU_MODULE_BUILD_PATH
    snprintf(candidates[n++], sizeof candidates[0], "%s", KR_GPU_MODULE_BUILD_PATH);
#endif
    why[0] = '\0';
    for (int i = 0; i < n; i++) {
        if (access(candidates[i], F_OK) != 0)
            continue;
        void *h = dlopen(candidates[i], RTLD_NOW | RTLD_LOCAL);
        if (h)
            return h;
        /* Found but not loadable (e.g. libamdhip64 missing): say that, not "not found". */
        snprintf(why, cap, "%s", dlerror());
        return NULL;
    }
    snprintf(why, cap, "the GPU module %s was not found (set KREPLAY_GPU_MODULE to its path)",
             KR_GPU_MODULE_NAME);
    return NULL;
}

static void load_module(void)
{
    __atomic_store_n(&g_module.attempted, 1, __ATOMIC_RELEASE);
    void *h = open_module(g_module.why, sizeof g_module.why);
    if (!h)
        return;
#define KR_GPU_RESOLVE(ret, missing, name, params, args)                                            \
    {                                                                                               \
        void *sym = dlsym(h, #name);                                                                \
        if (!sym) {                                                                                 \
            snprintf(g_module.why, sizeof g_module.why, "the GPU module lacks %s", #name);          \
            return;                                                                                 \
        }                                                                                           \
        memcpy(&lazy_##name, &sym, sizeof sym);                                                     \
    }
    KR_GPU_FORWARDED(KR_GPU_RESOLVE)
    KR_GPU_ANSWERED_HERE(KR_GPU_RESOLVE)
    g_module.ready = 1;
}

static int module_ready(void)
{
    pthread_once(&g_module.once, load_module);
    return g_module.ready;
}

#define KR_GPU_FORWARD(ret, missing, name, params, args)                                            \
    ret name params                                                                                 \
    {                                                                                               \
        if (!module_ready())                                                                        \
            return missing;                                                                         \
        return lazy_##name args;                                                                    \
    }
KR_GPU_FORWARDED(KR_GPU_FORWARD)

const char *kr_gpu_backend(void) { return "hip"; }

const char *kr_gpu_last_error(void)
{
    /* Before the first GPU call nothing has failed: no reason to open the module. */
    if (!__atomic_load_n(&g_module.attempted, __ATOMIC_ACQUIRE))
        return "";
    if (!module_ready())
        return g_module.why;
    return lazy_kr_gpu_last_error();
}

int kr_gpu_free(void *ptr)
{
    if (!ptr)
        return KR_GPU_OK;
    return module_ready() ? lazy_kr_gpu_free(ptr) : KR_GPU_ERR_RUNTIME;
}

/* No module, no runtime: zero devices, the reason in kr_gpu_last_error, as
 * the module itself answers when the driver is missing. */
int kr_gpu_device_count(int *count)
{
    *count = 0;
    return module_ready() ? lazy_kr_gpu_device_count(count) : KR_GPU_OK;
}

int kr_gpu_runtime_info(char *buf, size_t cap)
{
    if (!module_ready()) {
        snprintf(buf, cap, "runtime not loaded (%s), device code %s", g_module.why, KR_GPU_TARGETS);
        return KR_GPU_ERR_RUNTIME;
    }
    return lazy_kr_gpu_runtime_info(buf, cap);
}
