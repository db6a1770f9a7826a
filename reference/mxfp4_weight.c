#include "mxfp4_weight.h"

#include <string.h>

static const char *const scale_layout_names[] = {
    [SCALE_LAYOUT_NK] = "N,K/32",
    [SCALE_LAYOUT_KN] = "K/32,N",
};

const char *scale_layout_name(scale_layout_t l)
{
    if (l == SCALE_LAYOUT_NK || l == SCALE_LAYOUT_KN)
        return scale_layout_names[l];
    return "unknown";
}

int scale_layout_from_name(const char *name, scale_layout_t *out)
{
    for (int l = SCALE_LAYOUT_NK; l <= SCALE_LAYOUT_KN; l++) {
        if (name && strcmp(name, scale_layout_names[l]) == 0) {
            *out = (scale_layout_t)l;
            return 0;
        }
    }
    return -1;
}

static const float e2m1_magnitudes[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

/* The sixteen values a block can hold: e2m1 * 2^(E - 127), each an exact
 * fp32 product (a 2-bit significand times a power of two; 2^-128 and 2^-127
 * are subnormal but exact; only 2 * 2^127 and above round, to Inf).  Built
 * once per 32 elements so the inner loop is two table loads per byte.
 *
 * Codes 8-15 are the negations of codes 0-7 rather than products of their
 * own: for every non-NaN scale that is the same value (rounding is
 * sign-symmetric, and -0 comes out as -0), and for the NaN scale (0xFF) it
 * pins the sign of the NaN, which a multiply would leave to the compiler
 * (compilers may rewrite (-a) * s as -(a * s)).  So a NaN scale gives the
 * scale's NaN for codes 0-7 and the same NaN with the sign set for 8-15, and
 * the vector kernels (mxfp4_dequant.h) reproduce exactly that. */
static void block_value_table(uint8_t scale_byte, e8m0_mode_t mode, float table[16])
{
    float scale = e8m0_decode(scale_byte, mode);
    for (int c = 0; c < 8; c++) {
        table[c] = e2m1_magnitudes[c] * scale;
        table[c + 8] = -table[c];
    }
}

void mxfp4_dequant_row(const uint8_t *packed, const uint8_t *scales, scale_layout_t layout,
                       int64_t N, int64_t K, int64_t n, e8m0_mode_t mode, float *out)
{
    const int64_t blocks = K / 32;
    const uint8_t *row = packed + n * (K / 2);
    float table[16];
    for (int64_t b = 0; b < blocks; b++) {
        block_value_table(mxfp4_scale_at(scales, layout, N, K, n, b), mode, table);
        const uint8_t *bytes = row + b * 16;
        float *o = out + b * 32;
        for (int j = 0; j < 16; j++) {
            uint8_t byte = bytes[j];
            o[2 * j] = table[byte & 0x0F];
            o[2 * j + 1] = table[byte >> 4];
        }
    }
}

void mxfp4_pack(const uint8_t *codes, int64_t N, int64_t K, uint8_t *packed)
{
    for (int64_t n = 0; n < N; n++) {
        const uint8_t *c = codes + n * K;
        uint8_t *p = packed + n * (K / 2);
        for (int64_t j = 0; j < K / 2; j++)
            p[j] = (uint8_t)((c[2 * j] & 0x0F) | ((c[2 * j + 1] & 0x0F) << 4));
    }
}

void mxfp4_scales_transpose(const uint8_t *in, scale_layout_t in_layout, int64_t N, int64_t K,
                            uint8_t *out)
{
    const int64_t blocks = K / 32;
    for (int64_t n = 0; n < N; n++) {
        for (int64_t b = 0; b < blocks; b++) {
            if (in_layout == SCALE_LAYOUT_NK)
                out[b * N + n] = in[n * blocks + b];
            else
                out[n * blocks + b] = in[b * N + n];
        }
    }
}

/* permute_w's view(nt, 16, ks, 2, 4): byte (tile, row, kstep, half, byte4) of
 * the checkpoint layout sits at ((tile*16 + row)*ks + kstep)*8 + half*4 + byte4;
 * after permute(0, 2, 3, 1, 4) it sits at
 * ((tile*ks + kstep)*2 + half)*64 + row*4 + byte4.  The 4-byte groups move as
 * units, so the loops copy them whole. */
static int wperm_apply(const uint8_t *in, int64_t N, int64_t K, uint8_t *out, int to_fragment)
{
    if (N <= 0 || K <= 0 || N % 16 != 0 || K % 16 != 0)
        return -1;
    const int64_t tiles = N / 16, ksteps = K / 16;
    for (int64_t tile = 0; tile < tiles; tile++) {
        for (int64_t row = 0; row < 16; row++) {
            for (int64_t kstep = 0; kstep < ksteps; kstep++) {
                for (int64_t half = 0; half < 2; half++) {
                    int64_t checkpoint = ((tile * 16 + row) * ksteps + kstep) * 8 + half * 4;
                    int64_t fragment = ((tile * ksteps + kstep) * 2 + half) * 64 + row * 4;
                    if (to_fragment)
                        memcpy(out + fragment, in + checkpoint, 4);
                    else
                        memcpy(out + checkpoint, in + fragment, 4);
                }
            }
        }
    }
    return 0;
}

int wperm_permute(const uint8_t *in, int64_t N, int64_t K, uint8_t *out)
{
    return wperm_apply(in, N, K, out, 1);
}

int wperm_unpermute(const uint8_t *in, int64_t N, int64_t K, uint8_t *out)
{
    return wperm_apply(in, N, K, out, 0);
}
