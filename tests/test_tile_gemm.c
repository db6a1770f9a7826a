/* The tiled CPU models (w4a8.perblock, w4a4.aiter, ref_linear,
 * bf16.sequential, bf16.skinny) against plain scalar loops written from
 * their headers' accumulation order, bit for bit, over shapes and thread
 * counts that drive every way tile_gemm cuts the work: whole and half-width
 * tiles, a last tile of any width, row ranges, more rows than a task keeps
 * at once, K longer than one chunk and not a multiple of it, split ranges
 * that straddle chunks; both scale layouts, both e8m0 modes, and operands
 * with NaN, Inf, subnormal and extreme scales.  The loops here decode with
 * the spec formulas (no table, no shared helper). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats.h"
#include "registry.h"
#include "test_cases.h"
#include "test_main.h"
#include "test_support.h"

/* ------------------------------------------------------------------ */
/* Spec formulas                                                       */
/* ------------------------------------------------------------------ */

static float spec_e2m1(uint8_t c)
{
    static const float mag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    return (c & 8) ? -mag[c & 7] : mag[c & 7];
}

static float spec_e4m3fn(uint8_t c)
{
    const int e = (c >> 3) & 15, m = c & 7;
    if ((c & 0x7F) == 0x7F)
        return f32_from_bits(0x7FC00000u | ((uint32_t)(c & 0x80) << 24));
    const float v = e == 0 ? ldexpf((float)m, -9) : ldexpf((float)(8 + m), e - 10);
    return (c & 0x80) ? -v : v;
}

static float spec_e8m0(uint8_t b, e8m0_mode_t mode)
{
    if (b == 0xFF)
        return NAN;
    if (b == 0 && mode == E8M0_ZERO_IS_ZERO)
        return 0.0f;
    return ldexpf(1.0f, (int)b - 127);
}

static uint16_t spec_bf16(float x)
{
    const uint32_t u = f32_bits(x);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u)
        return (uint16_t)(0x7FC0u | ((u >> 16) & 0x8000u));
    return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

/* ------------------------------------------------------------------ */
/* Cases                                                               */
/* ------------------------------------------------------------------ */

typedef struct {
    int64_t M, N, K;
    uint8_t *codes;         /* [N][K] e2m1 codes */
    uint8_t *packed;        /* [N][K/2] */
    uint8_t *scales;        /* [N][K/32] or [K/32][N] by layout */
    scale_layout_t layout;
    e8m0_mode_t mode;
    uint8_t *x_fp8;         /* [M][K] e4m3fn */
    float *x_scale;         /* [M] */
    float *x;               /* [M][K] bf16-exact fp32 */
    uint16_t *wb;           /* [N][K] bf16 */
} gcase_t;

static uint8_t scale_byte(const gcase_t *c, int64_t n, int64_t b)
{
    return c->layout == SCALE_LAYOUT_NK ? c->scales[n * (c->K / 32) + b]
                                        : c->scales[b * c->N + n];
}

/* hostile: some NaN/Inf operands, scale bytes 0 and 255, subnormal scales. */
static void gcase_make(gcase_t *c, uint64_t seed, int64_t M, int64_t N, int64_t K, int hostile)
{
    test_rng_t r = {seed};
    memset(c, 0, sizeof *c);
    c->M = M;
    c->N = N;
    c->K = K;
    c->layout = seed % 2 ? SCALE_LAYOUT_KN : SCALE_LAYOUT_NK;
    c->mode = seed % 3 == 0 ? E8M0_ZERO_IS_ZERO : E8M0_SPEC;
    c->codes = malloc((size_t)(N * K));
    c->packed = malloc((size_t)(N * K / 2));
    c->scales = malloc((size_t)(N * K / 32));
    c->x_fp8 = malloc((size_t)(M * K));
    c->x_scale = malloc((size_t)M * sizeof(float));
    c->x = malloc((size_t)(M * K) * sizeof(float));
    c->wb = malloc((size_t)(N * K) * sizeof(uint16_t));
    assert_true(c->codes && c->packed && c->scales && c->x_fp8 && c->x_scale && c->x && c->wb);
    for (int64_t i = 0; i < N * K; i++)
        c->codes[i] = (uint8_t)(test_rng_u64(&r) & 15);
    for (int64_t i = 0; i < N * K / 2; i++)
        c->packed[i] = (uint8_t)(c->codes[2 * i] | c->codes[2 * i + 1] << 4);
    for (int64_t i = 0; i < N * K / 32; i++) {
        uint8_t e = (uint8_t)(115 + test_rng_u64(&r) % 20);
        if (hostile) {
            const uint64_t pick = test_rng_u64(&r) % 64;
            e = pick == 0 ? 0 : pick == 1 ? 255 : pick == 2 ? 254 : pick == 3 ? 1 : e;
        }
        c->scales[i] = e;
    }
    for (int64_t i = 0; i < M * K; i++) {
        uint8_t q = (uint8_t)test_rng_u64(&r);
        if (!hostile && (q & 0x7F) == 0x7F)
            q ^= 1;
        c->x_fp8[i] = q;
        float v = (float)test_rng_normal(&r);
        if (hostile && test_rng_u64(&r) % 500 == 0)
            v = test_rng_u64(&r) % 2 ? NAN : -INFINITY;
        c->x[i] = f32_from_bits(f32_bits(v) & 0xFFFF0000u);         /* bf16-exact */
    }
    for (int64_t m = 0; m < M; m++)
        c->x_scale[m] = ldexpf(1.0f + (float)test_rng_uniform(&r), (int)(test_rng_u64(&r) % 30) - 20);
    for (int64_t i = 0; i < N * K; i++) {
        uint16_t h = (uint16_t)(f32_bits((float)(0.05 * test_rng_normal(&r))) >> 16);
        if (hostile && test_rng_u64(&r) % 700 == 0)
            h = test_rng_u64(&r) % 2 ? 0x7F80 : 0x0001;         /* Inf, a subnormal */
        c->wb[i] = h;
    }
}

static void gcase_free(gcase_t *c)
{
    TEST_FREE_ALL(c->codes, c->packed, c->scales, c->x_fp8, c->x_scale, c->x, c->wb);
}

static kernel_inputs_t gcase_inputs(const gcase_t *c)
{
    kernel_inputs_t in = test_mxfp4_inputs(c->M, c->N, c->K, c->packed, c->scales, c->layout, c->mode);
    in.x = c->x;
    in.x_fp8 = c->x_fp8;
    in.x_scale = c->x_scale;
    in.weight_bf16 = c->wb;
    return in;
}

/* ------------------------------------------------------------------ */
/* Oracles: the accumulation orders of the models' headers             */
/* ------------------------------------------------------------------ */

/* w4a8.perblock on the recorded fp8 operands. */
static void oracle_perblock(const gcase_t *c, uint16_t *out)
{
    for (int64_t m = 0; m < c->M; m++)
        for (int64_t n = 0; n < c->N; n++) {
            float acc = 0.0f;
            for (int64_t b = 0; b < c->K / 32; b++) {
                float s = 0.0f;
                for (int64_t k = 32 * b; k < 32 * b + 32; k++)
                    s += spec_e4m3fn(c->x_fp8[m * c->K + k]) * spec_e2m1(c->codes[n * c->K + k]);
                acc += s * spec_e8m0(scale_byte(c, n, b), c->mode);
            }
            out[m * c->N + n] = spec_bf16(acc * c->x_scale[m]);
        }
}

/* w4a4.aiter on the operands its prepare_act made (codes and scale bytes). */
static void oracle_w4a4(const gcase_t *c, const kernel_act_t *act, uint16_t *out)
{
    const int64_t nb = c->K / 32;
    for (int64_t m = 0; m < c->M; m++)
        for (int64_t n = 0; n < c->N; n++) {
            float acc = 0.0f;
            for (int64_t b = 0; b < nb; b++) {
                float s = 0.0f;
                for (int64_t k = 32 * b; k < 32 * b + 32; k++)
                    s += spec_e2m1(act->codes[m * c->K + k]) * spec_e2m1(c->codes[n * c->K + k]);
                acc += s * (spec_e8m0(act->block_scale[m * nb + b], E8M0_SPEC) *
                            spec_e8m0(scale_byte(c, n, b), c->mode));
            }
            out[m * c->N + n] = spec_bf16(acc);
        }
}

/* ref_linear: w = e2m1 * pow(2, E - 127) (byte 255 -> 2^128 = Inf), one sum. */
static void oracle_ref_linear(const gcase_t *c, uint16_t *out)
{
    for (int64_t m = 0; m < c->M; m++)
        for (int64_t n = 0; n < c->N; n++) {
            float acc = 0.0f;
            for (int64_t k = 0; k < c->K; k++) {
                const float w = spec_e2m1(c->codes[n * c->K + k]) *
                                ldexpf(1.0f, (int)scale_byte(c, n, k / 32) - 127);
                acc += c->x[m * c->K + k] * w;
            }
            out[m * c->N + n] = spec_bf16(acc);
        }
}

/* bf16 GEMMs: SK equal ranges, each summed from +0, reduced in split order. */
static void oracle_bf16(const gcase_t *c, int64_t sk, uint16_t *out)
{
    const int64_t span = c->K / sk;
    for (int64_t m = 0; m < c->M; m++)
        for (int64_t n = 0; n < c->N; n++) {
            float acc = 0.0f;
            for (int64_t s = 0; s < sk; s++) {
                float part = 0.0f;
                for (int64_t k = s * span; k < (s + 1) * span; k++)
                    part += c->x[m * c->K + k] * f32_from_bits((uint32_t)c->wb[n * c->K + k] << 16);
                acc = s == 0 ? part : acc + part;
            }
            out[m * c->N + n] = spec_bf16(acc);
        }
}

/* ------------------------------------------------------------------ */
/* Running the models                                                  */
/* ------------------------------------------------------------------ */

static long long compare(const uint16_t *got, const uint16_t *want, int64_t count,
                         const char *what, const gcase_t *c, int threads)
{
    long long bad = 0;
    for (int64_t i = 0; i < count; i++) {
        const int got_nan = (got[i] & 0x7FFF) > 0x7F80, want_nan = (want[i] & 0x7FFF) > 0x7F80;
        /* a NaN's sign is not pinned by the C source (tile_dot.h) */
        if (got_nan && want_nan)
            continue;
        if (got[i] != want[i]) {
            if (bad == 0)
                print_error("%s M=%lld N=%lld K=%lld threads=%d: element %lld is %04x, want %04x\n",
                            what, (long long)c->M, (long long)c->N, (long long)c->K, threads,
                            (long long)i, got[i], want[i]);
            bad++;
        }
    }
    return bad;
}

/* Runs kernel `name` with `threads` and compares with `want` (NULL: the
 * w4a4 oracle on the kernel's own operands). */
static long long check_kernel(const char *name, const gcase_t *c, int threads, int decode_splits,
                              const uint16_t *want)
{
    const kernel_desc_t *k = kernel_find(name);
    assert_non_null(k);
    kernel_inputs_t in = gcase_inputs(c);
    kernel_options_t opt;
    kernel_options_default(&opt);
    opt.threads = threads;
    opt.decode_splits = decode_splits;
    opt.act_source = ACT_SOURCE_AUTO;
    kernel_act_t act;
    kr_error_t err;
    assert_int_equal(k->prepare_act(k, &in, &opt, &act, &err), 0);
    uint16_t *out = malloc((size_t)(c->M * c->N) * sizeof(uint16_t));
    uint16_t *oracle = NULL;
    assert_non_null(out);
    memset(out, 0xAB, (size_t)(c->M * c->N) * sizeof(uint16_t));
    kernel_run_info_t info;
    memset(&info, 0, sizeof info);
    assert_int_equal(k->run_cpu(k, &in, &act, &opt, out, &info, &err), 0);
    if (!want) {
        oracle = malloc((size_t)(c->M * c->N) * sizeof(uint16_t));
        assert_non_null(oracle);
        oracle_w4a4(c, &act, oracle);
        want = oracle;
    }
    const long long bad = compare(out, want, c->M * c->N, name, c, threads);
    kernel_act_free(&act);
    free(out);
    free(oracle);
    return bad;
}

static const int thread_counts[] = {1, 2, 3, 5};

static long long check_case(const gcase_t *c)
{
    long long bad = 0;
    uint16_t *want = malloc((size_t)(c->M * c->N) * sizeof(uint16_t));
    assert_non_null(want);
    for (size_t t = 0; t < sizeof thread_counts / sizeof thread_counts[0]; t++) {
        const int threads = thread_counts[t];
        if (c->K % 64 == 0) {
            oracle_perblock(c, want);
            bad += check_kernel("w4a8.perblock", c, threads, 0, want);
        }
        bad += check_kernel("w4a4.aiter", c, threads, 0, NULL);
        oracle_ref_linear(c, want);
        bad += check_kernel("ref_linear", c, threads, 0, want);
        oracle_bf16(c, 1, want);
        bad += check_kernel("bf16.sequential", c, threads, 0, want);
        /* split counts whose ranges end inside a chunk, on its end, or span several */
        static const int splits[] = {1, 2, 3, 5};
        for (size_t s = 0; s < sizeof splits / sizeof splits[0]; s++)
            if (c->K % (16 * splits[s]) == 0) {
                oracle_bf16(c, splits[s], want);
                bad += check_kernel("bf16.skinny", c, threads, splits[s], want);
            }
    }
    free(want);
    return bad;
}

static void test_shapes(void **state)
{
    (void)state;
    /* M: one row, a few, a row block and one more, a task's worth and more;
     * N: half tiles, a partial last tile, many tiles; K: under, at and over
     * a chunk (256), not a multiple of it. */
    static const int64_t shapes[][3] = {
        {1, 16, 64},   {1, 48, 5120}, {2, 40, 320},   {7, 96, 768},  {8, 33, 256},
        {9, 130, 512}, {17, 48, 1280}, {31, 80, 1536}, {64, 96, 832}, {130, 24, 256},
        {300, 48, 640}, {17, 512, 256}, {6, 256, 2048},
    };
    long long bad = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        gcase_t c;
        gcase_make(&c, 1000 + s, shapes[s][0], shapes[s][1], shapes[s][2], 0);
        bad += check_case(&c);
        gcase_free(&c);
    }
    assert_int_equal(bad, 0);
}

static void test_hostile_operands(void **state)
{
    (void)state;
    static const int64_t shapes[][3] = {{3, 48, 512}, {20, 70, 1024}, {9, 32, 256}};
    long long bad = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (uint64_t seed = 0; seed < 3; seed++) {
            gcase_t c;
            gcase_make(&c, 2000 + 10 * s + seed, shapes[s][0], shapes[s][1], shapes[s][2], 1);
            bad += check_case(&c);
            gcase_free(&c);
        }
    assert_int_equal(bad, 0);
}

KR_TEST_MAIN(test_shapes, test_hostile_operands);
