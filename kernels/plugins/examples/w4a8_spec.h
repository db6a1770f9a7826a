/* The W4A8 per-block path from its specification, for the example plugins
 * that get the arithmetic right and something else wrong (misbehaving.c).
 * Plain C on kernels/plugin.h's formats (decoded by kernels/plugin_util.h),
 * sharing nothing with kreplay's models; the same order as example_w4a8.c, per output (m, n), IEEE fp32,
 * no FMA:
 *     acc = +0; for each 32-block b ascending:
 *         s = +0; for k in the block ascending: s += fp8(x[m][k]) * e2m1(w[n][k])
 *         acc += s * 2^(E[b][n] - 127)
 *     out[m][n] = bf16_rne(acc * x_scale[m])
 * Weights [N, K/2] in checkpoint order (element 2j in the low nibble of byte
 * j), scales [K/32, N]. */
#ifndef KR_EXAMPLE_W4A8_SPEC_H
#define KR_EXAMPLE_W4A8_SPEC_H

#include <stdint.h>

#include "plugin_util.h"

/* The per-block sum of one output over the 32-blocks [b0, b1), before
 * x_scale: the part of acc a split over K contributes. */
static inline float spec_partial(const uint8_t *x, const uint8_t *w, const uint8_t *es, int64_t m,
                                 int64_t n, int64_t N, int64_t K, int64_t b0, int64_t b1)
{
    const uint8_t *xr = x + m * K, *wr = w + n * (K / 2);
    float acc = 0.0f;
    for (int64_t b = b0; b < b1; b++) {
        float s = 0.0f;
        for (int64_t k = 32 * b; k < 32 * b + 32; k++)
            s += kreplay_e4m3fn_value(xr[k]) * kreplay_e2m1_value(kreplay_e2m1_code(wr, k));
        acc += s * kreplay_e8m0_value(es[b * N + n]);
    }
    return acc;
}

/* Output rows [m0, m1) of the whole product, in the specified order. */
static inline void spec_rows(const uint8_t *x, const uint8_t *w, const uint8_t *es,
                             const float *x_scale, uint16_t *out, int64_t m0, int64_t m1, int64_t N,
                             int64_t K)
{
    for (int64_t m = m0; m < m1; m++)
        for (int64_t n = 0; n < N; n++)
            out[m * N + n] = kreplay_bf16_rne(spec_partial(x, w, es, m, n, N, K, 0, K / 32) * x_scale[m]);
}

#endif
