/* MXFP4 weights: packed e2m1 [N, K/2] (element 2j in the LOW nibble, 2j+1 in
 * the high nibble) with e8m0 block scales in either layout, and the WPERM
 * fragment-order permutation of the MXFP4 dispatch (permute_w / unpermute_w). */
#ifndef KR_MXFP4_WEIGHT_H
#define KR_MXFP4_WEIGHT_H

#include <stdint.h>

#include "formats.h"

typedef enum {
    SCALE_LAYOUT_NK = 0, /* [N, K/32]: the checkpoint's layout */
    SCALE_LAYOUT_KN,     /* [K/32, N]: what the production kernel reads after its one-time transpose */
} scale_layout_t;

const char *scale_layout_name(scale_layout_t l);            /* "N,K/32" / "K/32,N" */
int scale_layout_from_name(const char *name, scale_layout_t *out);

/* Scale byte of row n, block b, in either layout. */
static inline uint8_t mxfp4_scale_at(const uint8_t *scales, scale_layout_t layout,
                                     int64_t N, int64_t K, int64_t n, int64_t b)
{
    return layout == SCALE_LAYOUT_NK ? scales[n * (K / 32) + b] : scales[b * N + n];
}

/* e2m1 code (0..15) of element (n, k) of a checkpoint-order packed weight. */
static inline uint8_t mxfp4_code_at(const uint8_t *packed, int64_t K, int64_t n, int64_t k)
{
    uint8_t byte = packed[n * (K / 2) + k / 2];
    return (k & 1) ? (uint8_t)(byte >> 4) : (uint8_t)(byte & 0x0F);
}

/* Row n of W, dequantized to fp32: out[k] = e2m1(code) * 2^(E[n][k/32] - 127).
 * This is the definition (a per-block table, as the dispatch's _exact_ref;
 * negative codes are the sign flips of positive ones, so a NaN scale gives a
 * NaN with the code's sign); the vector kernels in mxfp4_dequant.h are tested
 * bit-equal to it. */
void mxfp4_dequant_row(const uint8_t *packed, const uint8_t *scales, scale_layout_t layout,
                       int64_t N, int64_t K, int64_t n, e8m0_mode_t mode, float *out);

/* Packs codes [N, K] (one per byte) into [N, K/2]. */
void mxfp4_pack(const uint8_t *codes, int64_t N, int64_t K, uint8_t *packed);

/* Scale matrix transpose between layouts. */
void mxfp4_scales_transpose(const uint8_t *in, scale_layout_t in_layout, int64_t N, int64_t K,
                            uint8_t *out);

/* WPERM (RADIANCE_MXFP4_WPERM).  permute_w: [N, K/2] checkpoint order ->
 * fragment order: view(N/16, 16, K/16, 2, 4).permute(0, 2, 3, 1, 4).
 * unpermute_w is its inverse.  Need N % 16 == 0 and K % 16 == 0; return -1
 * otherwise, 0 on success.  in and out must not alias. */
int wperm_permute(const uint8_t *in, int64_t N, int64_t K, uint8_t *out);
int wperm_unpermute(const uint8_t *in, int64_t N, int64_t K, uint8_t *out);

#endif
