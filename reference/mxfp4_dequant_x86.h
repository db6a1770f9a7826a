/* The x86 vector kernels behind mxfp4_dequant_rows_isa (internal to
 * reference/).  Each has the contract of mxfp4_dequant_rows and must only be
 * called when the CPU supports its instruction set. */
#ifndef KR_MXFP4_DEQUANT_X86_H
#define KR_MXFP4_DEQUANT_X86_H

#if defined(__x86_64__)
#include <stdint.h>

#include "formats.h"
#include "mxfp4_weight.h"

void mxfp4_dequant_rows_avx2(const uint8_t *packed, const uint8_t *scales, scale_layout_t layout,
                             int64_t N, int64_t K, int64_t n0, int64_t n1, e8m0_mode_t mode,
                             float *out);
void mxfp4_dequant_rows_avx512(const uint8_t *packed, const uint8_t *scales,
                               scale_layout_t layout, int64_t N, int64_t K, int64_t n0,
                               int64_t n1, e8m0_mode_t mode, float *out);
#endif

#endif
