#include "gpu_device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kr_string.h"

/* The bf16 ULP distance and its NaN / Inf rules, as the runner compares
 * reruns on the host (harness/results/metrics.h). */
#include "metrics.h"

#define STANDIN_ENV "KREPLAY_GPU_STANDIN"

int gpu_device_standin_requested(void)
{
    const char *e = getenv(STANDIN_ENV);
    return e && !strcmp(e, "1");
}

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The stand-in's errors: only allocation can fail. */
static const char standin_oom[] = "stand-in: out of host memory";

const char *gpu_dev_error(const gpu_device_t *d)
{
    return d->standin ? standin_oom : kr_gpu_last_error();
}

static int open_gpu(gpu_device_t *d, int index, kr_error_t *err)
{
    int n = 0, st;
    if (strcmp(kr_gpu_backend(), "none") == 0)
        return kr_fail(err, "no GPU support built (KREPLAY_GPU=OFF, or neither hipcc nor nvcc "
                            "found); %s=1 runs the stand-in", STANDIN_ENV);
    if (kr_gpu_device_count(&n) != KR_GPU_OK || n <= 0)
        return kr_fail(err, "no %s device (%s)", strcmp(kr_gpu_backend(), "hip") ? "CUDA" : "ROCm",
                       kr_gpu_last_error());
    if (index < 0 || index >= n)
        return kr_fail(err, "GPU %d: this host has %d GPU(s), numbered 0 to %d", index, n, n - 1);
    if ((st = kr_gpu_set_device(index)) != KR_GPU_OK ||
        (st = kr_gpu_stream_create(&d->stream)) != KR_GPU_OK ||
        (st = kr_gpu_event_create(&d->ev0)) != KR_GPU_OK ||
        (st = kr_gpu_event_create(&d->ev1)) != KR_GPU_OK ||
        (st = kr_gpu_malloc((void **)&d->scan, 4 * sizeof(int64_t))) != KR_GPU_OK)
        return kr_fail(err, "GPU %d: %s: %s", index, kr_gpu_status_name(st), kr_gpu_last_error());
    if (kr_gpu_device_name(index, d->name, sizeof d->name) != KR_GPU_OK)
        kr_strlcpy(d->name, "?", sizeof d->name);
    (void)kr_gpu_mem_info(&d->mem_free, &d->mem_total);
    kr_strlcpy(d->backend, kr_gpu_backend(), sizeof d->backend);
    d->count = n;
    return 0;
}

int gpu_device_open(gpu_device_t *d, int standin, int index, kr_error_t *err)
{
    memset(d, 0, sizeof *d);
    d->standin = standin;
    d->index = index;
    if (!standin)
        return open_gpu(d, index, err);
    snprintf(d->name, sizeof d->name, "stand-in %d (CPU models)", index);
    d->count = 1;
    kr_strlcpy(d->backend, "stand-in", sizeof d->backend);
    return 0;
}

void gpu_device_close(gpu_device_t *d)
{
    if (!d->standin) {
        kr_gpu_free(d->scan);
        kr_gpu_event_destroy(d->ev0);
        kr_gpu_event_destroy(d->ev1);
        kr_gpu_stream_destroy(d->stream);
    }
    memset(d, 0, sizeof *d);
}

int gpu_dev_alloc(const gpu_device_t *d, void **p, size_t bytes)
{
    if (!d->standin)
        return kr_gpu_malloc(p, bytes);
    *p = malloc(bytes ? bytes : 1);
    return *p ? KR_GPU_OK : KR_GPU_ERR_RUNTIME;
}

void gpu_dev_free(const gpu_device_t *d, void *p)
{
    if (d->standin)
        free(p);
    else
        kr_gpu_free(p);
}

int gpu_dev_upload(const gpu_device_t *d, void *dst, const void *src, size_t bytes)
{
    if (!d->standin)
        return kr_gpu_memcpy_h2d(dst, src, bytes);
    memcpy(dst, src, bytes);
    return KR_GPU_OK;
}

int gpu_dev_download(const gpu_device_t *d, void *dst, const void *src, size_t bytes)
{
    if (!d->standin)
        return kr_gpu_memcpy_d2h(dst, src, bytes);
    memcpy(dst, src, bytes);
    return KR_GPU_OK;
}

int gpu_dev_copy(const gpu_device_t *d, void *dst, const void *src, size_t bytes)
{
    if (!d->standin)
        return kr_gpu_memcpy_d2d(dst, src, bytes, d->stream);
    memcpy(dst, src, bytes);
    return KR_GPU_OK;
}

int gpu_dev_fill_u8(const gpu_device_t *d, void *dst, int byte, size_t bytes)
{
    if (!d->standin)
        return kr_gpu_memset(dst, byte, bytes, d->stream);
    memset(dst, byte, bytes);
    return KR_GPU_OK;
}

int gpu_dev_fill_u16(const gpu_device_t *d, uint16_t *dst, uint16_t value, size_t count)
{
    if (!d->standin)
        return kr_gpu_fill_u16(dst, value, count, d->stream);
    for (size_t i = 0; i < count; i++)
        dst[i] = value;
    return KR_GPU_OK;
}

int gpu_dev_sync(const gpu_device_t *d)
{
    return d->standin ? KR_GPU_OK : kr_gpu_stream_synchronize(d->stream);
}

/* The scan's slots, once the stream has finished. */
static int fetch_scan(const gpu_device_t *d, int st, int64_t out[4])
{
    if (st == KR_GPU_OK)
        st = kr_gpu_stream_synchronize(d->stream);
    if (st == KR_GPU_OK)
        st = kr_gpu_memcpy_d2h(out, d->scan, 4 * sizeof(int64_t));
    return st;
}

/* The stand-in's scans, into the same slots as the device's. */
static int standin_scan_u16(const uint16_t *p, size_t n, uint16_t value, int64_t r[4])
{
    for (size_t i = 0; i < n; i++)
        if (p[i] == value && r[0]++ == 0)
            r[1] = (int64_t)i;
    return KR_GPU_OK;
}

static int standin_scan_u8(const uint8_t *p, size_t n, uint8_t value, int equal, int64_t r[4])
{
    for (size_t i = 0; i < n; i++)
        if ((p[i] == value) == (equal != 0)) {
            if (r[0]++ == 0)
                r[1] = (int64_t)i;
            r[2] = (int64_t)i;
        }
    return KR_GPU_OK;
}

static int standin_diff_bf16(const uint16_t *a, const uint16_t *b, size_t n, int64_t r[4])
{
    for (size_t i = 0; i < n; i++) {
        if (a[i] == b[i])
            continue;
        const uint64_t u = bf16_ulp_distance(a[i], b[i]);
        if (u == UINT64_MAX && (a[i] & 0x7FFF) > 0x7F80 && (b[i] & 0x7FFF) > 0x7F80)
            continue;   /* two NaNs agree */
        r[0]++;
        if (u != UINT64_MAX && (int64_t)u > r[1])
            r[1] = (int64_t)u;
    }
    return KR_GPU_OK;
}

int gpu_dev_scan_u16(const gpu_device_t *d, const uint16_t *p, size_t n, uint16_t value,
                     int64_t *count, int64_t *first)
{
    int64_t r[4] = {0, -1, -1, 0};
    const int st = d->standin ? standin_scan_u16(p, n, value, r)
                              : fetch_scan(d, kr_gpu_scan_u16(p, n, value, d->scan, d->stream), r);
    *count = r[0];
    *first = r[0] ? r[1] : -1;
    return st;
}

int gpu_dev_scan_u8(const gpu_device_t *d, const uint8_t *p, size_t n, uint8_t value, int equal,
                    int64_t *count, int64_t *first, int64_t *last)
{
    int64_t r[4] = {0, -1, -1, 0};
    const int st = d->standin ? standin_scan_u8(p, n, value, equal, r)
                              : fetch_scan(d, kr_gpu_scan_u8(p, n, value, equal, d->scan, d->stream), r);
    *count = r[0];
    *first = r[0] ? r[1] : -1;
    *last = r[0] ? r[2] : -1;
    return st;
}

int gpu_dev_diff_bf16(const gpu_device_t *d, const uint16_t *a, const uint16_t *b, size_t n,
                      int64_t *count, uint64_t *max_ulp)
{
    int64_t r[4] = {0, 0, 0, 0};
    const int st = d->standin ? standin_diff_bf16(a, b, n, r)
                              : fetch_scan(d, kr_gpu_diff_bf16(a, b, n, d->scan, d->stream), r);
    *count = r[0];
    *max_ulp = (uint64_t)r[1];
    return st;
}

int gpu_dev_diff_u8(const gpu_device_t *d, const uint8_t *a, const uint8_t *b, size_t n,
                    int64_t *count)
{
    int64_t r[4] = {0, 0, 0, 0};
    int st = KR_GPU_OK;
    if (d->standin)
        for (size_t i = 0; i < n; i++)
            r[0] += a[i] != b[i];
    else
        st = fetch_scan(d, kr_gpu_diff_u8(a, b, n, d->scan, d->stream), r);
    *count = r[0];
    return st;
}

int gpu_dev_clock_start(gpu_device_t *d)
{
    if (d->standin) {
        d->t0 = now_seconds();
        return KR_GPU_OK;
    }
    return kr_gpu_event_record(d->ev0, d->stream);
}

int gpu_dev_clock_stop(gpu_device_t *d, double *ms)
{
    if (d->standin) {
        *ms = 1e3 * (now_seconds() - d->t0);
        return KR_GPU_OK;
    }
    float f = 0;
    int st = kr_gpu_event_record(d->ev1, d->stream);
    if (st == KR_GPU_OK)
        st = kr_gpu_event_elapsed_ms(d->ev0, d->ev1, &f);
    *ms = f;
    return st;
}

int gpu_dev_dequant(const gpu_device_t *d, const kr_gpu_mxfp4_t *w, float *out)
{
    return d->standin ? KR_GPU_ERR_UNSUPPORTED : kr_gpu_mxfp4_dequant(w, out, d->stream);
}

int gpu_dev_bf16_widen(const gpu_device_t *d, const uint16_t *in, float *out, size_t n)
{
    return d->standin ? KR_GPU_ERR_UNSUPPORTED : kr_gpu_bf16_widen(in, out, n, d->stream);
}

int gpu_dev_f32_widen(const gpu_device_t *d, const float *in, double *out, size_t n)
{
    return d->standin ? KR_GPU_ERR_UNSUPPORTED : kr_gpu_f32_widen(in, out, n, d->stream);
}

int gpu_dev_gemm_f32(const gpu_device_t *d, const float *A, const float *B, int64_t M, int64_t N,
                     int64_t K, float *C)
{
    return d->standin ? KR_GPU_ERR_UNSUPPORTED : kr_gpu_gemm_f32_nt_dev(A, B, M, N, K, C, d->stream);
}

int gpu_dev_gemm_f64(const gpu_device_t *d, const double *A, const double *B, int64_t M,
                     int64_t N, int64_t K, double *C)
{
    return d->standin ? KR_GPU_ERR_UNSUPPORTED : kr_gpu_gemm_f64_nt_dev(A, B, M, N, K, C, d->stream);
}
