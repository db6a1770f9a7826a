/* An example kreplay plugin: a CPU W4A8 kernel on the per-block-rescale path
 * (weight_ref NULL), written from the specification alone -- it shares no
 * code with kreplay's models, only the header kernels/plugin.h.
 *
 * The specification (the MXFP4 dispatch's per-block path, as stated in the
 * header comment of kernels/cpu/w4a8_perblock.c), per output (m, n), all
 * IEEE fp32, no FMA:
 *     acc = +0
 *     for each 32-block b in increasing k:
 *         s = +0; for k in the block, increasing: s += fp8(x[m][k]) * e2m1(w[n][k])
 *         acc += s * 2^(E[n][b] - 127)
 *     out[m][n] = bf16_rne(acc * x_scale[m])
 * Formats: x e4m3fn (bias 7, subnormal step 2^-9, 0x7F/0xFF NaN); w e2m1
 * packed two per byte, element 2j in the low nibble of byte j of row n
 * ([N, K/2], checkpoint order); E e8m0 in [K/32, N] (2^(E-127), 0xFF NaN);
 * bf16 rounding to nearest even, NaN -> 0x7FC0 with its sign.
 *
 * Build (outside kreplay):  cc -O2 -ffp-contract=off -fPIC -shared -o libexample.so example_w4a8.c -lm
 * Use:                      kreplay replay --plugin ./libexample.so --kernels 'example.*' CASE.h5 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "plugin.h"

static const char *g_error = "";

static float e4m3fn_value(uint8_t c)
{
    const int sign = c >> 7, e = (c >> 3) & 15, m = c & 7;
    if (e == 15 && m == 7)
        return sign ? -NAN : NAN;
    /* normal: (1 + m/8) * 2^(e-7) = (8 + m) * 2^(e-10); subnormal: m * 2^-9 */
    const float v = e == 0 ? ldexpf((float)m, -9) : ldexpf((float)(8 + m), e - 10);
    return sign ? -v : v;
}

static float e2m1_value(uint8_t c)
{
    static const float mag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    return (c & 8) ? -mag[c & 7] : mag[c & 7];
}

static float e8m0_value(uint8_t e)
{
    return e == 0xFF ? NAN : ldexpf(1.0f, (int)e - 127);   /* exact, 2^-127 included */
}

static uint16_t bf16_rne(float v)
{
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    if (isnan(v))
        return (uint16_t)((u >> 16 & 0x8000u) | 0x7FC0u);
    return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

static int example_launch(const void *x_fp8, const void *weight, const void *weight_scale,
                          const void *weight_ref, const float *x_scale, void *out, int64_t M,
                          int64_t N, int64_t K, void *stream)
{
    const uint8_t *x = x_fp8, *w = weight, *es = weight_scale;
    uint16_t *o = out;
    if (stream) {
        g_error = "this is a CPU plugin: stream must be NULL";
        return 1;
    }
    if (weight_ref) {
        g_error = "only the per-block path (weight_ref NULL) is implemented";
        return 2;
    }
    if (M < 1 || N < 1 || K < 32 || K % 32) {
        g_error = "bad shape: need M, N >= 1 and K a multiple of 32";
        return 3;
    }
    float xlut[256];
    for (int c = 0; c < 256; c++)
        xlut[c] = e4m3fn_value((uint8_t)c);
    const int64_t nb = K / 32;
    float *wrow = malloc((size_t)K * sizeof(float));
    float *brow = malloc((size_t)nb * sizeof(float));
    if (!wrow || !brow) {
        free(wrow);
        free(brow);
        g_error = "out of memory";
        return 4;
    }
    for (int64_t n = 0; n < N; n++) {
        for (int64_t k = 0; k < K; k++) {
            const uint8_t byte = w[n * (K / 2) + k / 2];
            wrow[k] = e2m1_value((k & 1) ? (uint8_t)(byte >> 4) : (uint8_t)(byte & 15));
        }
        for (int64_t b = 0; b < nb; b++)
            brow[b] = e8m0_value(es[b * N + n]);
        for (int64_t m = 0; m < M; m++) {
            const uint8_t *xr = x + m * K;
            float acc = 0.0f;
            for (int64_t b = 0; b < nb; b++) {
                float s = 0.0f;
                for (int64_t k = 32 * b; k < 32 * b + 32; k++)
                    s += xlut[xr[k]] * wrow[k];
                acc += s * brow[b];
            }
            o[m * N + n] = bf16_rne(acc * x_scale[m]);
        }
    }
    free(wrow);
    free(brow);
    g_error = "";
    return 0;
}

static const char *example_last_error(void)
{
    return g_error;
}

static const kreplay_kernel_t example_kernels[] = {{
    .name = "example.w4a8_perblock",
    .summary = "example plugin: W4A8 per-block path, scalar C from the spec",
    .accumulation = "per 32-block: s += x*w over k ascending; acc += s * 2^(E-127) over blocks "
                    "ascending; out = bf16(acc * x_scale[m])",
    .act_format = KREPLAY_ACT_FP8_E4M3FN_TOKEN,
    .weight_order = KREPLAY_WEIGHT_CHECKPOINT,
    .scale_layout = KREPLAY_SCALES_KN,
    .weight_ref = KREPLAY_WREF_NONE,
    .k_multiple = 32,
    .launch = example_launch,
}};

KREPLAY_PLUGIN_EXPORT const kreplay_plugin_t kreplay_plugin = {
    .abi_version = KREPLAY_PLUGIN_ABI_VERSION,
    .struct_size = sizeof(kreplay_plugin_t),
    .name = "example",
    .flags = 0,
    .kernel_count = 1,
    .kernels = example_kernels,
    .last_error = example_last_error,
};
