/* MXFP4 weights: dequantization against the _exact_ref formula written out
 * per element, both scale layouts, packing, and the WPERM permutation
 * against an independent model of torch's view + permute + contiguous and
 * against permute_w's docstring ("slot l of tile (nt, ks) is
 * W[nt][l&15][ks][4*(l>>4) .. +4]"). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mxfp4_dequant.h"
#include "mxfp4_weight.h"
#include "spec_formats.h"
#include "test_main.h"
#include "test_support.h"

/* _exact_ref's table and scale, evaluated in double. */
static double exact_ref_value(uint8_t code, uint8_t scale_byte, e8m0_mode_t mode)
{
    const double mag = spec_e2m1(code & 7);
    /* rounded to fp32 as _exact_ref's product is: 4 * 2^126 overflows to Inf */
    return (double)(float)(((code & 8) ? -mag : mag) * spec_e8m0(scale_byte, mode));
}

static void test_layout_names(void **state)
{
    (void)state;
    scale_layout_t l;
    assert_string_equal(scale_layout_name(SCALE_LAYOUT_NK), "N,K/32");
    assert_string_equal(scale_layout_name(SCALE_LAYOUT_KN), "K/32,N");
    assert_int_equal(scale_layout_from_name("N,K/32", &l), 0);
    assert_int_equal(l, SCALE_LAYOUT_NK);
    assert_int_equal(scale_layout_from_name("K/32,N", &l), 0);
    assert_int_equal(l, SCALE_LAYOUT_KN);
    assert_int_equal(scale_layout_from_name("NK", &l), -1);
}

/* Two rows, K = 64, packed by hand: low nibble is the even element. */
static void test_hand_packed_rows(void **state)
{
    (void)state;
    enum { N = 2, K = 64 };
    uint8_t packed[N * K / 2] = {0};
    packed[0] = 0x72;        /* k0 = code 2 (1.0), k1 = code 7 (6.0) */
    packed[1] = 0x9F;        /* k2 = code F (-6), k3 = code 9 (-0.5) */
    packed[16] = 0x31;       /* k32 = code 1 (0.5), k33 = code 3 (1.5) */
    packed[32 + 0] = 0x8C;   /* row 1: k0 = code C (-2), k1 = code 8 (-0) */
    packed[32 + 31] = 0x5D;  /* row 1: k62 = code D (-3), k63 = code 5 (3) */
    const uint8_t scales_nk[N * 2] = {127, 125,   /* row 0: 1, 2^-2 */
                                      130, 0};    /* row 1: 8, 2^-127 or 0 */
    uint8_t scales_kn[2 * N];
    mxfp4_scales_transpose(scales_nk, SCALE_LAYOUT_NK, N, K, scales_kn);
    const uint8_t want_kn[4] = {127, 130, 125, 0};
    assert_memory_equal(scales_kn, want_kn, 4);

    float nk[K], kn[K];
    mxfp4_dequant_row(packed, scales_nk, SCALE_LAYOUT_NK, N, K, 0, E8M0_SPEC, nk);
    mxfp4_dequant_row(packed, scales_kn, SCALE_LAYOUT_KN, N, K, 0, E8M0_SPEC, kn);
    assert_memory_equal(nk, kn, sizeof nk);
    assert_true(nk[0] == 1.0f);
    assert_true(nk[1] == 6.0f);
    assert_true(nk[2] == -6.0f);
    assert_true(nk[3] == -0.5f);
    assert_true(nk[4] == 0.0f);
    assert_true(nk[32] == 0.125f);
    assert_true(nk[33] == 0.375f);

    mxfp4_dequant_row(packed, scales_nk, SCALE_LAYOUT_NK, N, K, 1, E8M0_SPEC, nk);
    mxfp4_dequant_row(packed, scales_kn, SCALE_LAYOUT_KN, N, K, 1, E8M0_SPEC, kn);
    assert_memory_equal(nk, kn, sizeof nk);
    assert_true(nk[0] == -16.0f);
    assert_true(nk[1] == 0.0f && signbit(nk[1]));
    assert_true(nk[62] == -3.0f * 0x1p-127f);
    assert_true(nk[63] == 3.0f * 0x1p-127f);
    mxfp4_dequant_row(packed, scales_nk, SCALE_LAYOUT_NK, N, K, 1, E8M0_ZERO_IS_ZERO, nk);
    assert_true(nk[62] == 0.0f && nk[63] == 0.0f);
    assert_true(nk[0] == -16.0f);
}

static void test_random_dequant_vs_formula(void **state)
{
    (void)state;
    enum { N = 48, K = 256, B = K / 32 };
    uint8_t *codes = malloc(N * K), *packed = malloc(N * K / 2);
    uint8_t scales_nk[N * B], scales_kn[N * B], round_trip[N * B];
    float *rows = malloc(sizeof(float) * N * K), row[K];
    test_rng_t rng = {0x3E16ull};
    for (int i = 0; i < N * K; i++)
        codes[i] = (uint8_t)(test_rng_u64(&rng) & 0xF);
    for (int i = 0; i < N * B; i++)
        scales_nk[i] = (uint8_t)(test_rng_u64(&rng) % 255); /* 0..254 */
    scales_nk[5] = 0;
    scales_nk[6] = 0xFF;
    mxfp4_pack(codes, N, K, packed);
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++) {
            assert_int_equal(mxfp4_code_at(packed, K, n, k), codes[n * K + k]);
            uint8_t byte = packed[n * (K / 2) + k / 2];
            assert_int_equal((k & 1) ? byte >> 4 : byte & 0xF, codes[n * K + k]);
        }
    mxfp4_scales_transpose(scales_nk, SCALE_LAYOUT_NK, N, K, scales_kn);
    for (int n = 0; n < N; n++)
        for (int b = 0; b < B; b++)
            assert_int_equal(scales_kn[b * N + n], scales_nk[n * B + b]);
    mxfp4_scales_transpose(scales_kn, SCALE_LAYOUT_KN, N, K, round_trip);
    assert_memory_equal(round_trip, scales_nk, sizeof round_trip);

    for (int mode = E8M0_SPEC; mode <= E8M0_ZERO_IS_ZERO; mode++) {
        mxfp4_dequant_rows(packed, scales_kn, SCALE_LAYOUT_KN, N, K, 0, N, (e8m0_mode_t)mode,
                           rows);
        for (int n = 0; n < N; n++) {
            mxfp4_dequant_row(packed, scales_nk, SCALE_LAYOUT_NK, N, K, n, (e8m0_mode_t)mode, row);
            for (int k = 0; k < K; k++) {
                double want = exact_ref_value(codes[n * K + k], scales_nk[n * B + k / 32],
                                              (e8m0_mode_t)mode);
                if (isnan(want)) {
                    assert_true(isnan(row[k]) && isnan(rows[n * K + k]));
                } else {
                    assert_true((double)row[k] == want);
                    assert_true((double)rows[n * K + k] == want);
                }
            }
        }
        /* a sub-range lands at the start of out */
        mxfp4_dequant_rows(packed, scales_nk, SCALE_LAYOUT_NK, N, K, 7, 9, (e8m0_mode_t)mode, rows);
        mxfp4_dequant_row(packed, scales_nk, SCALE_LAYOUT_NK, N, K, 8, (e8m0_mode_t)mode, row);
        assert_memory_equal(rows + K, row, sizeof row);
    }
    TEST_FREE_ALL(codes, packed, rows);
}

/* torch semantics, generically: `in` viewed with shape dims[5] (contiguous),
 * permuted by perm, made contiguous.  out[o] = in[sum idx[i] * stride[perm[i]]]. */
static void torch_view_permute(const uint8_t *in, const int64_t dims[5], const int perm[5],
                               uint8_t *out)
{
    int64_t stride[5], shape[5], pstride[5], idx[5] = {0};
    stride[4] = 1;
    for (int i = 3; i >= 0; i--)
        stride[i] = stride[i + 1] * dims[i + 1];
    int64_t total = 1;
    for (int i = 0; i < 5; i++) {
        shape[i] = dims[perm[i]];
        pstride[i] = stride[perm[i]];
        total *= dims[i];
    }
    for (int64_t o = 0; o < total; o++) {
        int64_t src = 0;
        for (int i = 0; i < 5; i++)
            src += idx[i] * pstride[i];
        out[o] = in[src];
        for (int i = 4; i >= 0; i--) {
            if (++idx[i] < shape[i])
                break;
            idx[i] = 0;
        }
    }
}

static void test_wperm(void **state)
{
    (void)state;
    const int64_t Ns[] = {16, 32, 48, 128, 256};
    const int64_t Ks[] = {16, 32, 64, 96, 256};
    test_rng_t rng = {0x9E43ull};
    for (size_t a = 0; a < sizeof Ns / sizeof Ns[0]; a++) {
        for (size_t b = 0; b < sizeof Ks / sizeof Ks[0]; b++) {
            int64_t N = Ns[a], K = Ks[b], bytes = N * K / 2, nt = N / 16, ks = K / 16;
            uint8_t *w = malloc(bytes), *frag = malloc(bytes), *back = malloc(bytes),
                    *model = malloc(bytes);
            for (int64_t i = 0; i < bytes; i++)
                w[i] = (uint8_t)test_rng_u64(&rng);
            assert_int_equal(wperm_permute(w, N, K, frag), 0);

            const int64_t pdims[5] = {nt, 16, ks, 2, 4};
            const int pperm[5] = {0, 2, 3, 1, 4};
            torch_view_permute(w, pdims, pperm, model);
            assert_memory_equal(frag, model, bytes);

            /* the docstring's lane view: 32 uint32 slots per (tile, kstep) */
            for (int64_t t = 0; t < nt; t++)
                for (int64_t s = 0; s < ks; s++)
                    for (int l = 0; l < 32; l++)
                        for (int byte = 0; byte < 4; byte++) {
                            int64_t n = 16 * t + (l & 15);
                            int64_t kbyte = s * 8 + 4 * (l >> 4) + byte;
                            assert_int_equal(frag[((t * ks + s) * 32 + l) * 4 + byte],
                                             w[n * (K / 2) + kbyte]);
                        }

            assert_int_equal(wperm_unpermute(frag, N, K, back), 0);
            assert_memory_equal(back, w, bytes);
            const int64_t udims[5] = {nt, ks, 2, 16, 4};
            const int uperm[5] = {0, 3, 1, 2, 4};
            torch_view_permute(frag, udims, uperm, model);
            assert_memory_equal(model, w, bytes);

            /* unpermute then permute is the identity too */
            assert_int_equal(wperm_unpermute(w, N, K, frag), 0);
            assert_int_equal(wperm_permute(frag, N, K, back), 0);
            assert_memory_equal(back, w, bytes);
            TEST_FREE_ALL(w, frag, back, model);
        }
    }
    uint8_t in[512] = {0}, out[512];
    assert_int_equal(wperm_permute(in, 8, 32, out), -1);
    assert_int_equal(wperm_permute(in, 16, 24, out), -1);
    assert_int_equal(wperm_unpermute(in, 24, 16, out), -1);
    assert_int_equal(wperm_unpermute(in, 16, 8, out), -1);
    assert_int_equal(wperm_permute(in, 0, 32, out), -1);
    assert_int_equal(wperm_permute(in, 16, -16, out), -1);
}

KR_TEST_MAIN(test_layout_names, test_hand_packed_rows, test_random_dequant_vs_formula, test_wperm);
