/* An example kreplay plugin: a CPU W4A8 kernel on the per-block-rescale path
 * (weight_ref NULL), written from the specification alone -- it shares no
 * code with kreplay's models, only the public headers kernels/plugin.h and
 * kernels/plugin_util.h (the formats below, decoded from their definitions,
 * and the exported structure).
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
 * Build (outside kreplay):  cc -O2 -ffp-contract=off -fPIC -shared -I<kreplay>/kernels -o libexample.so example_w4a8.c -lm
 * Use:                      kreplay replay --plugin ./libexample.so --kernels 'example.*' CASE.h5 */
#include <stdint.h>
#include <stdlib.h>

#include "plugin_util.h"

static KREPLAY_LAUNCH(example_launch)
{
    const uint8_t *x = x_fp8, *w = weight, *es = weight_scale;
    uint16_t *o = out;
    if (stream)
        return kreplay_fail("this is a CPU plugin: stream must be NULL", 1);
    if (weight_ref)
        return kreplay_fail("only the per-block path (weight_ref NULL) is implemented", 2);
    if (M < 1 || N < 1 || K < 32 || K % 32)
        return kreplay_fail("bad shape: need M, N >= 1 and K a multiple of 32", 3);
    float xlut[256];
    for (int c = 0; c < 256; c++)
        xlut[c] = kreplay_e4m3fn_value((uint8_t)c);
    const int64_t nb = K / 32;
    float *wrow = malloc((size_t)K * sizeof(float));
    float *brow = malloc((size_t)nb * sizeof(float));
    if (!wrow || !brow) {
        free(wrow);
        free(brow);
        return kreplay_fail("out of memory", 4);
    }
    for (int64_t n = 0; n < N; n++) {
        for (int64_t k = 0; k < K; k++)
            wrow[k] = kreplay_e2m1_value(kreplay_e2m1_code(w + n * (K / 2), k));
        for (int64_t b = 0; b < nb; b++)
            brow[b] = kreplay_e8m0_value(es[b * N + n]);
        for (int64_t m = 0; m < M; m++) {
            const uint8_t *xr = x + m * K;
            float acc = 0.0f;
            for (int64_t b = 0; b < nb; b++) {
                float s = 0.0f;
                for (int64_t k = 32 * b; k < 32 * b + 32; k++)
                    s += xlut[xr[k]] * wrow[k];
                acc += s * brow[b];
            }
            o[m * N + n] = kreplay_bf16_rne(acc * x_scale[m]);
        }
    }
    free(wrow);
    free(brow);
    return kreplay_ok();
}

KREPLAY_PLUGIN_ONE_KERNEL("example", kreplay_last_error,
                          .name = "example.w4a8_perblock",
                          .summary = "example plugin: W4A8 per-block path, scalar C from the spec",
                          .accumulation = "per 32-block: s += x*w over k ascending; acc += s * 2^(E-127) "
                                          "over blocks ascending; out = bf16(acc * x_scale[m])",
                          KREPLAY_W4A8_PERBLOCK_OPERANDS,
                          .k_multiple = 32,
                          .launch = example_launch);
