/* Fast MXFP4 weight dequantization: the same values as mxfp4_dequant_row,
 * bit for bit, from an AVX-512 or AVX2 kernel picked at run time, and spread
 * over threads for whole chunks of rows.
 *
 * mxfp4_dequant_row (mxfp4_weight.h) stays the definition: a 16-entry table
 * per block, the eight e2m1 magnitudes times 2^(E-127) (one fp32 multiply
 * each) and their sign flips for codes 8-15.  The vector kernels build that
 * same table with the same multiply and sign flip, then look the codes up
 * with a permute instead of a load.  An e2m1 value times 2^(E-127) is exact
 * down to 2^-128, so only the overflow to Inf and the NaN scale involve any
 * rounding at all, and both come out of the multiply the same way.  Under
 * flush-to-zero or denormals-are-zero both paths see the same MXCSR, so they
 * still agree with each other. */
#ifndef KR_MXFP4_DEQUANT_H
#define KR_MXFP4_DEQUANT_H

#include <stdint.h>

#include "formats.h"
#include "mxfp4_weight.h"

typedef enum {
    MXFP4_DEQUANT_AUTO = 0, /* the best this CPU runs, unless KREPLAY_DEQUANT_ISA says otherwise */
    MXFP4_DEQUANT_SCALAR,   /* mxfp4_dequant_row, row after row */
    MXFP4_DEQUANT_AVX2,
    MXFP4_DEQUANT_AVX512,   /* AVX-512F */
} mxfp4_dequant_isa_t;

/* "auto", "scalar", "avx2", "avx512". */
const char *mxfp4_dequant_isa_name(mxfp4_dequant_isa_t isa);

/* 1 when this build and this CPU (and its OS) can run `isa`; AUTO and SCALAR
 * always can. */
int mxfp4_dequant_isa_available(mxfp4_dequant_isa_t isa);

/* What AUTO runs: KREPLAY_DEQUANT_ISA=scalar|avx2|avx512 when set to a name
 * this CPU can run (to rule the vector kernels out while chasing a
 * difference), otherwise the widest available. */
mxfp4_dequant_isa_t mxfp4_dequant_isa_resolve(mxfp4_dequant_isa_t isa);

/* Rows [n0, n1) of W into out[(n1-n0), K], on the calling thread, with the
 * given kernel (resolved as above; an unavailable one falls back to the
 * scalar path).  K must be a multiple of 32. */
void mxfp4_dequant_rows_isa(mxfp4_dequant_isa_t isa, const uint8_t *packed,
                            const uint8_t *scales, scale_layout_t layout, int64_t N, int64_t K,
                            int64_t n0, int64_t n1, e8m0_mode_t mode, float *out);

/* Rows [n0, n1) dequantized into out[(n1-n0), K] row-major, on the calling
 * thread, by the fastest kernel this CPU runs: the same bits as
 * mxfp4_dequant_row (mxfp4_weight.h) on every row. */
void mxfp4_dequant_rows(const uint8_t *packed, const uint8_t *scales, scale_layout_t layout,
                        int64_t N, int64_t K, int64_t n0, int64_t n1, e8m0_mode_t mode,
                        float *out);

/* The same, with the rows split into contiguous ranges over `threads`
 * threads (<= 0: ref_thread_count()).  Small ranges stay on the calling
 * thread: starting a thread costs more than dequantizing a few hundred
 * thousand elements.  The result does not depend on the thread count. */
void mxfp4_dequant_rows_parallel(mxfp4_dequant_isa_t isa, const uint8_t *packed,
                                 const uint8_t *scales, scale_layout_t layout, int64_t N,
                                 int64_t K, int64_t n0, int64_t n1, e8m0_mode_t mode, int threads,
                                 float *out);

#endif
