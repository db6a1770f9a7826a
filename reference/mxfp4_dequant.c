/* Kernel choice and threading for the MXFP4 dequantization (see
 * mxfp4_dequant.h).  The choice is made on every call from the CPU's
 * feature bits and the environment: no state is kept. */
#include "mxfp4_dequant.h"

#include <stdlib.h>
#include <string.h>

#include "mxfp4_dequant_x86.h"
#include "ref_parallel.h"

static const char *const isa_names[] = {
    [MXFP4_DEQUANT_AUTO] = "auto",
    [MXFP4_DEQUANT_SCALAR] = "scalar",
    [MXFP4_DEQUANT_AVX2] = "avx2",
    [MXFP4_DEQUANT_AVX512] = "avx512",
};

const char *mxfp4_dequant_isa_name(mxfp4_dequant_isa_t isa)
{
    if (isa >= MXFP4_DEQUANT_AUTO && isa <= MXFP4_DEQUANT_AVX512)
        return isa_names[isa];
    return "unknown";
}

int mxfp4_dequant_isa_available(mxfp4_dequant_isa_t isa)
{
    switch (isa) {
    case MXFP4_DEQUANT_AUTO:
    case MXFP4_DEQUANT_SCALAR:
        return 1;
#if defined(__x86_64__)
    case MXFP4_DEQUANT_AVX2:
        return __builtin_cpu_supports("avx2");
    case MXFP4_DEQUANT_AVX512:
        return __builtin_cpu_supports("avx512f");
#else
    case MXFP4_DEQUANT_AVX2:
    case MXFP4_DEQUANT_AVX512:
        return 0;
#endif
    }
    return 0;
}

mxfp4_dequant_isa_t mxfp4_dequant_isa_resolve(mxfp4_dequant_isa_t isa)
{
    if (isa != MXFP4_DEQUANT_AUTO)
        return mxfp4_dequant_isa_available(isa) ? isa : MXFP4_DEQUANT_SCALAR;
    const char *forced = getenv("KREPLAY_DEQUANT_ISA");
    if (forced) {
        for (int i = MXFP4_DEQUANT_SCALAR; i <= MXFP4_DEQUANT_AVX512; i++)
            if (strcmp(forced, isa_names[i]) == 0 &&
                mxfp4_dequant_isa_available((mxfp4_dequant_isa_t)i))
                return (mxfp4_dequant_isa_t)i;
    }
    if (mxfp4_dequant_isa_available(MXFP4_DEQUANT_AVX512))
        return MXFP4_DEQUANT_AVX512;
    if (mxfp4_dequant_isa_available(MXFP4_DEQUANT_AVX2))
        return MXFP4_DEQUANT_AVX2;
    return MXFP4_DEQUANT_SCALAR;
}

static void dequant_rows_scalar(const uint8_t *packed, const uint8_t *scales,
                                scale_layout_t layout, int64_t N, int64_t K, int64_t n0,
                                int64_t n1, e8m0_mode_t mode, float *out)
{
    for (int64_t n = n0; n < n1; n++)
        mxfp4_dequant_row(packed, scales, layout, N, K, n, mode, out + (n - n0) * K);
}

void mxfp4_dequant_rows_isa(mxfp4_dequant_isa_t isa, const uint8_t *packed,
                            const uint8_t *scales, scale_layout_t layout, int64_t N, int64_t K,
                            int64_t n0, int64_t n1, e8m0_mode_t mode, float *out)
{
    switch (mxfp4_dequant_isa_resolve(isa)) {
#if defined(__x86_64__)
    case MXFP4_DEQUANT_AVX512:
        mxfp4_dequant_rows_avx512(packed, scales, layout, N, K, n0, n1, mode, out);
        return;
    case MXFP4_DEQUANT_AVX2:
        mxfp4_dequant_rows_avx2(packed, scales, layout, N, K, n0, n1, mode, out);
        return;
#endif
    default:
        dequant_rows_scalar(packed, scales, layout, N, K, n0, n1, mode, out);
        return;
    }
}

typedef struct {
    mxfp4_dequant_isa_t isa; /* already resolved: every thread runs the same kernel */
    const uint8_t *packed, *scales;
    scale_layout_t layout;
    int64_t N, K, n0;
    e8m0_mode_t mode;
    float *out;
} dequant_job_t;

static void dequant_range(void *arg, int64_t begin, int64_t end)
{
    const dequant_job_t *job = arg;
    mxfp4_dequant_rows_isa(job->isa, job->packed, job->scales, job->layout, job->N, job->K,
                           begin, end, job->mode, job->out + (begin - job->n0) * job->K);
}

/* Elements one thread should at least get: about 1 MiB of fp32 output, a few
 * hundred microseconds of work against tens for starting the thread. */
#define DEQUANT_MIN_ELEMS_PER_THREAD (256 * 1024)

void mxfp4_dequant_rows_parallel(mxfp4_dequant_isa_t isa, const uint8_t *packed,
                                 const uint8_t *scales, scale_layout_t layout, int64_t N,
                                 int64_t K, int64_t n0, int64_t n1, e8m0_mode_t mode, int threads,
                                 float *out)
{
    dequant_job_t job = {.isa = mxfp4_dequant_isa_resolve(isa), .packed = packed,
                         .scales = scales, .layout = layout, .N = N, .K = K, .n0 = n0,
                         .mode = mode, .out = out};
    const int64_t min_rows = (DEQUANT_MIN_ELEMS_PER_THREAD + K - 1) / K;
    ref_parallel_ranges(n0, n1, min_rows, threads, dequant_range, &job);
}

void mxfp4_dequant_rows(const uint8_t *packed, const uint8_t *scales, scale_layout_t layout,
                        int64_t N, int64_t K, int64_t n0, int64_t n1, e8m0_mode_t mode,
                        float *out)
{
    mxfp4_dequant_rows_isa(MXFP4_DEQUANT_AUTO, packed, scales, layout, N, K, n0, n1, mode, out);
}
