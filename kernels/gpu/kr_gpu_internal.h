// What the launch sources of kr_gpu share on the host side (not part of the
// C API, kr_gpu.h): the runtime and launch status checks, the stream cast and
// grid arithmetic, the MXFP4 weight descriptor checks.  One error record for
// the whole library (kr_gpu_last_error, kr_gpu_runtime.hip): every source
// writes it through kr_gpu_internal_fail, so a launch source and the runtime
// wrappers need nothing else of each other.  Host code only: include it under
// !KR_GPU_BARE, after vendor.h.
#ifndef KR_GPU_INTERNAL_H
#define KR_GPU_INTERNAL_H

#include <stdio.h>

#include "kr_gpu.h"

extern "C" int kr_gpu_internal_fail(int status, const char *what, const char *detail);

static inline int kr_fail_rt(const char *what, hipError_t e)
{
    char detail[256];
    snprintf(detail, sizeof detail, "%s (%d)", hipGetErrorString(e), (int)e);
    return kr_gpu_internal_fail(KR_GPU_ERR_RUNTIME, what, detail);
}

static inline int kr_fail_arg(const char *what) { return kr_gpu_internal_fail(KR_GPU_ERR_ARG, what, NULL); }

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

static inline int kr_check_w(const kr_gpu_mxfp4_t *w, const char *who)
{
    if (!w || !w->packed || !w->scales || w->N <= 0 || w->K <= 0 || w->K % 32 != 0)
        return kr_gpu_internal_fail(KR_GPU_ERR_ARG, who, "bad MXFP4 weight descriptor");
    return KR_GPU_OK;
}

// A weight and an M that fits the grid's y dimension (one block row per m).
static inline int kr_check_w_rows(const kr_gpu_mxfp4_t *w, int64_t M, const char *who)
{
    int st = kr_check_w(w, who);
    if (st)
        return st;
    if (M <= 0 || M > 65535)
        return kr_gpu_internal_fail(KR_GPU_ERR_ARG, who, "M out of range");
    return KR_GPU_OK;
}

#endif
