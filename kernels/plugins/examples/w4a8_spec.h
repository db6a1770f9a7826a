/* The W4A8 per-block path from its specification, for the example plugins
 * that get the arithmetic right and something else wrong (misbehaving.c).
 * Plain C on kernels/plugin.h's formats, sharing nothing with kreplay's
 * models; the same order as example_w4a8.c, per output (m, n), IEEE fp32,
 * no FMA:
 *     acc = +0; for each 32-block b ascending:
 *         s = +0; for k in the block ascending: s += fp8(x[m][k]) * e2m1(w[n][k])
 *         acc += s * 2^(E[b][n] - 127)
 *     out[m][n] = bf16_rne(acc * x_scale[m])
 * Weights [N, K/2] in checkpoint order (element 2j in the low nibble of byte
 * j), scales [K/32, N]. */
#ifndef KR_EXAMPLE_W4A8_SPEC_H
#define KR_EXAMPLE_W4A8_SPEC_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline float spec_e4m3fn(uint8_t c)
{
    const int sign = c >> 7, e = (c >> 3) & 15, m = c & 7;
    if (e == 15 && m == 7)
        return sign ? -NAN : NAN;
    const float v = e == 0 ? ldexpf((float)m, -9) : ldexpf((float)(8 + m), e - 10);
    return sign ? -v : v;
}

static inline float spec_e2m1(uint8_t c)
{
    static const float mag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    return (c & 8) ? -mag[c & 7] : mag[c & 7];
}

static inline float spec_e8m0(uint8_t e)
{
    return e == 0xFF ? NAN : ldexpf(1.0f, (int)e - 127);
}

static inline uint16_t spec_bf16_rne(float v)
{
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    if (isnan(v))
        return (uint16_t)((u >> 16 & 0x8000u) | 0x7FC0u);
    return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

/* The per-block sum of one output over the 32-blocks [b0, b1), before
 * x_scale: the part of acc a split over K contributes. */
static inline float spec_partial(const uint8_t *x, const uint8_t *w, const uint8_t *es, int64_t m,
                                 int64_t n, int64_t N, int64_t K, int64_t b0, int64_t b1)
{
    const uint8_t *xr = x + m * K, *wr = w + n * (K / 2);
    float acc = 0.0f;
    for (int64_t b = b0; b < b1; b++) {
        float s = 0.0f;
        for (int64_t k = 32 * b; k < 32 * b + 32; k++) {
            const uint8_t byte = wr[k / 2];
            s += spec_e4m3fn(xr[k]) * spec_e2m1((k & 1) ? (uint8_t)(byte >> 4) : (uint8_t)(byte & 15));
        }
        acc += s * spec_e8m0(es[b * N + n]);
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
            out[m * N + n] = spec_bf16_rne(spec_partial(x, w, es, m, n, N, K, 0, K / 32) * x_scale[m]);
}

#endif
