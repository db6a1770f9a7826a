/* W4A8 test cases for the W4A8 model tests: see w4a8_cases.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "act_prepare.h"
#include "formats.h"
#include "spec_formats.h"
#include "test_cases.h"
#include "test_support.h"
#include "w4a8_cases.h"

/* RNE of v onto the e4m3fn grid (subnormal step 2^-9, 3 fraction bits),
 * saturating at +-448: the folded pre-shift, computed in double. */
double spec_e4m3_round(double v)
{
    if (v == 0)
        return v;
    double a = fabs(v), q;
    if (a < ldexp(1.0, -6)) {
        q = ldexp(1.0, -9);
    } else {
        int ex;
        frexp(a, &ex);              /* a = f * 2^ex, f in [0.5, 1) */
        q = ldexp(1.0, ex - 1 - 3);
    }
    double r = nearbyint(a / q) * q;  /* default rounding mode: ties to even */
    if (r > 448)
        r = 448;
    return v < 0 ? -r : r;
}

void tcase_alloc(tcase_t *c, int64_t M, int64_t N, int64_t K)
{
    memset(c, 0, sizeof *c);
    c->M = M;
    c->N = N;
    c->K = K;
    c->wcodes = calloc((size_t)(N * K), 1);
    c->packed = calloc((size_t)(N * K / 2), 1);
    c->scales = calloc((size_t)(N * K / 32), 1);
    c->x = calloc((size_t)(M * K), 1);
    c->xs = calloc((size_t)M, sizeof(float));
}

void tcase_pack(tcase_t *c)
{
    for (int64_t n = 0; n < c->N; n++)
        for (int64_t j = 0; j < c->K / 2; j++)
            c->packed[n * (c->K / 2) + j] =
                (uint8_t)((c->wcodes[n * c->K + 2 * j] & 15) | (c->wcodes[n * c->K + 2 * j + 1] << 4));
}

void tcase_free(tcase_t *c)
{
    TEST_FREE_ALL(c->wcodes, c->packed, c->scales, c->x, c->xs, c->wref, c->parts, c->parts_scale);
    memset(c, 0, sizeof *c);
}

static uint8_t random_fp8(test_rng_t *r)
{
    for (;;) {
        uint8_t c = (uint8_t)test_rng_u64(r);
        if ((c & 0x7F) != 0x7F)
            return c;
    }
}

/* Random case: per row a top exponent in [110, 140]; every block's exponent is
 * top - U{0..spread}, block 0 pinned to top so the row max is known. */
void tcase_random(tcase_t *c, uint64_t seed, int64_t M, int64_t N, int64_t K, int spread)
{
    test_rng_t r = {seed};
    tcase_alloc(c, M, N, K);
    for (int64_t i = 0; i < N * K; i++)
        c->wcodes[i] = (uint8_t)(test_rng_u64(&r) & 15);
    for (int64_t n = 0; n < N; n++) {
        int top = 110 + (int)(test_rng_u64(&r) % 31);
        for (int64_t b = 0; b < K / 32; b++)
            c->scales[n * (K / 32) + b] =
                (uint8_t)(b == 0 ? top : top - (int)(test_rng_u64(&r) % (uint64_t)(spread + 1)));
    }
    tcase_pack(c);
    for (int64_t i = 0; i < M * K; i++)
        c->x[i] = random_fp8(&r);
    for (int64_t m = 0; m < M; m++)
        c->xs[m] = (float)ldexp(1.0 + test_rng_uniform(&r), -10 + (int)(test_rng_u64(&r) % 6));
}

/* Adds 3 different activation copies (copy 0 is also the recorded x_fp8). */
void tcase_add_parts(tcase_t *c, uint64_t seed)
{
    test_rng_t r = {seed};
    const int64_t MK = c->M * c->K;
    c->parts = malloc((size_t)(3 * MK));
    c->parts_scale = malloc((size_t)(3 * c->M) * sizeof(float));
    memcpy(c->parts, c->x, (size_t)MK);
    memcpy(c->parts_scale, c->xs, (size_t)c->M * sizeof(float));
    for (int64_t i = MK; i < 3 * MK; i++)
        c->parts[i] = random_fp8(&r);
    for (int64_t i = c->M; i < 3 * c->M; i++)
        c->parts_scale[i] = (float)(0.001 + 0.01 * test_rng_uniform(&r));
}

kernel_inputs_t tcase_inputs(const tcase_t *c)
{
    kernel_inputs_t in =
        test_mxfp4_inputs(c->M, c->N, c->K, c->packed, c->scales, SCALE_LAYOUT_NK, E8M0_SPEC);
    in.x_fp8 = c->x;
    in.x_scale = c->xs;
    if (c->wref) {
        in.weight_ref = c->wref;
        in.weight_ref_len = c->N;
    }
    if (c->parts) {
        in.x_fp8_parts = c->parts;
        in.x_scale_parts = c->parts_scale;
        in.parts = 3;
    }
    return in;
}

/* Runs a model; returns its rc.  note (256 bytes) gets the note, or the error. */
int run_model_in(const kernel_desc_t *k, const kernel_inputs_t *in, int decode_splits,
                        const int64_t bounds[2], uint16_t *out, char *note)
{
    kernel_options_t opt;
    kernel_options_default(&opt);
    opt.decode_splits = decode_splits;
    if (bounds) {
        opt.partition_bounds[0] = bounds[0];
        opt.partition_bounds[1] = bounds[1];
    }
    kernel_act_t act;
    kr_error_t err;
    assert_int_equal(k->prepare_act(k, in, &opt, &act, &err), 0);
    kernel_run_info_t info;
    memset(&info, 0, sizeof info);
    int rc = k->run_cpu(k, in, &act, &opt, out, &info, &err);
    if (note)
        snprintf(note, 256, "%.255s", rc ? err.msg : info.note);
    kernel_act_free(&act);
    return rc;
}

uint16_t *run_model(const kernel_desc_t *k, const tcase_t *c, int decode_splits, char *note)
{
    kernel_inputs_t in = tcase_inputs(c);
    uint16_t *out = malloc((size_t)(c->M * c->N) * sizeof(uint16_t));
    int rc = run_model_in(k, &in, decode_splits, NULL, out, note);
    if (rc)
        fail_msg("%s failed: %s", k->name, note ? note : "");
    return out;
}

int row_ref(const tcase_t *c, int64_t n)
{
    if (c->wref)
        return c->wref[n];
    int r = 0;
    for (int64_t b = 0; b < c->K / 32; b++)
        if (c->scales[n * (c->K / 32) + b] > r)
            r = c->scales[n * (c->K / 32) + b];
    return r;
}


/* The split-K order in plain scalar C, from the spec: w8 by spec_e4m3_round,
 * partial[s] over SK equal K ranges ascending, acc = partial[0] + ... in
 * split order, epilogue x_scale * 2^(ref-127) first.  sk = 1 is folded. */
uint16_t *oracle_split(const tcase_t *c, int sk)
{
    const int64_t M = c->M, N = c->N, K = c->K, span = K / sk;
    uint16_t *out = malloc((size_t)(M * N) * sizeof(uint16_t));
    float *w8 = malloc((size_t)K * sizeof(float));
    float partial[64];
    for (int64_t n = 0; n < N; n++) {
        const int ref = row_ref(c, n);
        for (int64_t k = 0; k < K; k++)
            w8[k] = (float)spec_e4m3_round(
                ldexp(spec_e2m1(c->wcodes[n * K + k]), c->scales[n * (K / 32) + k / 32] - ref));
        for (int64_t m = 0; m < M; m++) {
            for (int s = 0; s < sk; s++) {
                float p = 0.0f;
                for (int64_t k = s * span; k < (s + 1) * span; k++)
                    p = p + (float)spec_e4m3fn(c->x[m * K + k]) * w8[k];
                partial[s] = p;
            }
            float acc = partial[0];
            for (int s = 1; s < sk; s++)
                acc = acc + partial[s];
            const float f = c->xs[m] * (float)ldexp(1.0, ref - 127);
            out[m * N + n] = spec_bf16_rne(acc * f);
        }
    }
    free(w8);
    return out;
}

void assert_same_bits(const uint16_t *a, const uint16_t *b, int64_t count, const char *what)
{
    for (int64_t i = 0; i < count; i++)
        if (a[i] != b[i])
            fail_msg("%s: element %lld differs: 0x%04x vs 0x%04x", what, (long long)i, a[i], b[i]);
}
