/* The device a GPU run computes on: a GPU through kernels/gpu/kr_gpu.h, or
 * the stand-in, which keeps its "device" buffers in host memory and runs
 * each GPU twin as its CPU model (gpu_launch.h).  The stand-in is what the
 * GPU worker is without a GPU runtime: CI runs the worker's protocol, its
 * crash and restart logic and a GPU gate on it; its rows say "stand-in".
 *
 * Every call returns a kr_gpu_status_t; gpu_dev_error() says why the last
 * one failed.  Calls are ordered on the device's one stream; the scans and
 * downloads wait for it. */
#ifndef KR_GPU_DEVICE_H
#define KR_GPU_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include "kr_error.h"
#include "kr_gpu.h"

typedef struct {
    int standin;                /* host memory, CPU models */
    int index;                  /* the GPU's index (the runtime's numbering) */
    char name[128];             /* the device's name, as rows give it */
    char backend[16];           /* "cuda", "hip", "stand-in" */
    size_t mem_free, mem_total; /* at open (the stand-in: 0, 0) */
    int count;                  /* devices the runtime sees (the stand-in: 1) */
    kr_gpu_stream_t stream;
    kr_gpu_event_t ev0, ev1;
    double t0;                  /* stand-in's clock */
    int64_t *scan;              /* device int64[4]: the scans' results */
} gpu_device_t;

/* The stand-in is asked for with KREPLAY_GPU_STANDIN=1 (tests, CI). */
int gpu_device_standin_requested(void);

/* Opens GPU `index` (or the stand-in): selects it, creates the stream.
 * Returns 0, or -1 with err naming the device and the runtime's error. */
int gpu_device_open(gpu_device_t *d, int standin, int index, kr_error_t *err);
void gpu_device_close(gpu_device_t *d);

const char *gpu_dev_error(const gpu_device_t *d);

int gpu_dev_alloc(const gpu_device_t *d, void **p, size_t bytes);
void gpu_dev_free(const gpu_device_t *d, void *p);
int gpu_dev_upload(const gpu_device_t *d, void *dst, const void *src, size_t bytes);
int gpu_dev_download(const gpu_device_t *d, void *dst, const void *src, size_t bytes);
int gpu_dev_copy(const gpu_device_t *d, void *dst, const void *src, size_t bytes);
int gpu_dev_fill_u8(const gpu_device_t *d, void *dst, int byte, size_t bytes);
int gpu_dev_fill_u16(const gpu_device_t *d, uint16_t *dst, uint16_t value, size_t count);
int gpu_dev_sync(const gpu_device_t *d);

/* Elements equal to value, and the first one's index (-1: none). */
int gpu_dev_scan_u16(const gpu_device_t *d, const uint16_t *p, size_t n, uint16_t value,
                     int64_t *count, int64_t *first);
/* Bytes == value (equal) or != value (!equal), the first's and the last's index
 * (-1, -1: none). */
int gpu_dev_scan_u8(const gpu_device_t *d, const uint8_t *p, size_t n, uint8_t value, int equal,
                    int64_t *count, int64_t *first, int64_t *last);
/* bf16 elements that differ (NaN == NaN), and the largest ULP distance among them. */
int gpu_dev_diff_bf16(const gpu_device_t *d, const uint16_t *a, const uint16_t *b, size_t n,
                      int64_t *count, uint64_t *max_ulp);
int gpu_dev_diff_u8(const gpu_device_t *d, const uint8_t *a, const uint8_t *b, size_t n,
                    int64_t *count);

/* Times the work queued between the two calls, in milliseconds. */
int gpu_dev_clock_start(gpu_device_t *d);
int gpu_dev_clock_stop(gpu_device_t *d, double *ms);

/* GPU only (the stand-in computes references with reference/gemm_ref.h). */
int gpu_dev_dequant(const gpu_device_t *d, const kr_gpu_mxfp4_t *w, float *out);
int gpu_dev_bf16_widen(const gpu_device_t *d, const uint16_t *in, float *out, size_t n);
int gpu_dev_f32_widen(const gpu_device_t *d, const float *in, double *out, size_t n);
int gpu_dev_gemm_f32(const gpu_device_t *d, const float *A, const float *B, int64_t M, int64_t N,
                     int64_t K, float *C);
int gpu_dev_gemm_f64(const gpu_device_t *d, const double *A, const double *B, int64_t M,
                     int64_t N, int64_t K, double *C);

#endif
