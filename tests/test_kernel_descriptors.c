/* The typed fields of every descriptor: operand formats consistent with
 * the element formats' definitions (OCP MX / OCP FP8 / bfloat16 mantissa
 * widths, written out here, not read from the code), the GPU twins and the
 * comparison roles the runner, compare and the report rely on, and the
 * split-K the CPU model and its GPU twin share (the skinny dispatch's
 * measured table as production states it). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <string.h>

#include "gpu_run.h"
#include "registry.h"
#include "test_main.h"

/* Explicit mantissa bits by definition: e2m1 1, e4m3 3, e5m2 2, bf16 7, fp32 23. */
static int mantissa_by_definition(elem_format_t e)
{
    switch (e) {
    case ELEM_E2M1: return 1;
    case ELEM_E4M3FN: return 3;
    case ELEM_E4M3FNUZ: return 3;
    case ELEM_E5M2: return 2;
    case ELEM_BF16: return 7;
    case ELEM_FP32: return 23;
    case ELEM_NONE: return -1;
    }
    return -2;
}

static void check_operand(const kernel_desc_t *k, const operand_format_t *f, const char *which)
{
    if (f->mantissa_bits != mantissa_by_definition(f->elem))
        fail_msg("%s: %s %s declares %d mantissa bits", k->name, which, elem_format_name(f->elem),
                 f->mantissa_bits);
    /* MX block scaling is one e8m0 per 32 elements along K, and K must hold whole blocks */
    if ((f->scale == SCALE_E8M0_PER_BLOCK) != (f->block == 32))
        fail_msg("%s: %s block %d with scale %s", k->name, which, f->block, scale_kind_name(f->scale));
    if (f->block > 0 && k->k_multiple % f->block != 0)
        fail_msg("%s: %s blocks of %d but K %% %d", k->name, which, f->block, k->k_multiple);
}

static void test_operand_formats(void **state)
{
    (void)state;
    for (int i = 0; i < kernel_count(); i++) {
        const kernel_desc_t *k = kernel_at(i);
        if (k->act.elem == ELEM_NONE)
            fail_msg("%s: no activation format", k->name);
        check_operand(k, &k->act, "activations");
        check_operand(k, &k->weight, "weight");
        if (k->op == KERNEL_OP_QUANT && k->weight.elem != ELEM_NONE)
            fail_msg("%s: a quantizer with a weight format", k->name);
        if (k->op == KERNEL_OP_GEMM) {
            const elem_format_t want = k->weight_kind == WEIGHT_KIND_BF16 ? ELEM_BF16 : ELEM_E2M1;
            if (k->weight.elem != want)
                fail_msg("%s: weight_kind and weight format %s disagree", k->name,
                         elem_format_name(k->weight.elem));
        }
    }
    /* by hand: the three activation kinds of the registry */
    assert_int_equal(kernel_find("w4a8.folded")->act.elem, ELEM_E4M3FN);
    assert_int_equal(kernel_find("w4a8.folded")->act.scale, SCALE_PER_TOKEN);
    assert_int_equal(kernel_find("w4a4.aiter")->act.elem, ELEM_E2M1);
    assert_int_equal(kernel_find("w4a4.aiter")->act.block, 32);
    assert_int_equal(kernel_find("bf16.skinny")->act.elem, ELEM_BF16);
    assert_int_equal(kernel_find("ref_linear")->act.elem, ELEM_BF16);
    assert_int_equal(kernel_find("ref_linear")->weight.elem, ELEM_E2M1);
    assert_true(kernel_is_w4a8(kernel_find("w4a8.partitioned")));
    assert_false(kernel_is_w4a8(kernel_find("w4a4.aiter")));
    assert_false(kernel_is_w4a8(kernel_find("quant.fp8_token")));
    assert_false(kernel_is_w4a8(kernel_find("ref_linear")));
}

/* The GPU twins: exactly the kernels kr_gpu.h has a SIMT kernel for, and the
 * matrix units for the folded path only. */
static void test_gpu_twins(void **state)
{
    (void)state;
    static const char *const twins[] = {"w4a8.perblock", "w4a8.folded", "w4a8.decode", "w4a4.aiter",
                                        "bf16.skinny",   "bf16.sequential", "quant.fp8_token", "quant.mxfp4"};
    int n_twins = 0;
    for (int i = 0; i < kernel_count(); i++) {
        const kernel_desc_t *k = kernel_at(i);
        int listed = 0;
        for (size_t t = 0; t < sizeof twins / sizeof twins[0]; t++)
            listed |= !strcmp(k->name, twins[t]);
        n_twins += listed;
        if (listed != (k->gpu_entry != KERNEL_GPU_NONE) || listed != gpu_kernel_supported(k->name, GPU_VARIANT_SIMT))
            fail_msg("%s: GPU twin %d, expected %d", k->name, k->gpu_entry != KERNEL_GPU_NONE, listed);
        const int matrix = !strcmp(k->name, "w4a8.folded");
        assert_int_equal(gpu_kernel_supported(k->name, GPU_VARIANT_MATRIX), matrix);
        assert_int_equal(k->gpu_matrix, matrix);
    }
    assert_int_equal(n_twins, (int)(sizeof twins / sizeof twins[0]));
    assert_int_equal(kernel_find("bf16.sequential")->gpu_entry, kernel_find("bf16.skinny")->gpu_entry);
    assert_false(gpu_kernel_supported("no.such.kernel", GPU_VARIANT_SIMT));
    assert_false(gpu_kernel_runs(NULL, GPU_VARIANT_SIMT));
}

static void test_compare_roles(void **state)
{
    (void)state;
    static const struct {
        compare_role_t role;
        const char *name;
    } roles[] = {
        {COMPARE_ROLE_W4A8_PRODUCTION, "w4a8.folded"},
        {COMPARE_ROLE_W4A8_MODEL, "w4a8.perblock"},
        {COMPARE_ROLE_W4A4_EMULATION, "w4a4.aiter"},
        {COMPARE_ROLE_BF16_LAYER, "bf16.sequential"},
    };
    for (size_t r = 0; r < sizeof roles / sizeof roles[0]; r++) {
        assert_non_null(kernel_for_role(roles[r].role));
        assert_string_equal(kernel_for_role(roles[r].role)->name, roles[r].name);
        int holders = 0;
        for (int i = 0; i < kernel_count(); i++)
            holders += kernel_at(i)->compare_role == roles[r].role;
        assert_int_equal(holders, 1);
    }
    assert_null(kernel_for_role(COMPARE_ROLE_NONE));
}

static int splits(const char *name, int64_t M, int64_t N, int64_t K, int decode_splits)
{
    const kernel_desc_t *k = kernel_find(name);
    assert_non_null(k);
    assert_non_null(k->split_k);
    kernel_options_t o;
    kernel_options_default(&o);
    o.decode_splits = decode_splits;
    kr_error_t err = {{0}};
    const int sk = k->split_k(k, M, N, K, &o, &err);
    if (sk == 0)
        assert_true(err.msg[0] != '\0');
    return sk;
}

/* The skinny dispatch's tables: _CFG (256, 2048) -> 16; _CFG_TAXED (48, 5120),
 * (96, 5120), (1280, 5120), (256, 5120) -> 8; any other shape declined
 * unless decode_splits names SK (with K % (16 SK) == 0).  The decode kernel:
 * decode_splits, else 4.  r4d's _r4d_cfg: 8 if M <= 16 else 4, halved while
 * K % (SK * 32). */
static void test_split_k(void **state)
{
    (void)state;
    assert_int_equal(splits("bf16.skinny", 8, 256, 2048, 0), 16);
    assert_int_equal(splits("bf16.skinny", 8, 48, 5120, 0), 8);
    assert_int_equal(splits("bf16.skinny", 8, 96, 5120, 0), 8);
    assert_int_equal(splits("bf16.skinny", 8, 1280, 5120, 0), 8);
    assert_int_equal(splits("bf16.skinny", 8, 256, 5120, 0), 8);
    assert_int_equal(splits("bf16.skinny", 8, 512, 3072, 0), 0);
    assert_int_equal(splits("bf16.skinny", 8, 512, 3072, 4), 4);
    assert_int_equal(splits("bf16.skinny", 8, 512, 3072, 5), 0);     /* 3072 % 80 != 0 */
    assert_int_equal(splits("bf16.skinny", 8, 256, 2048, 2), 2);     /* the override wins */
    assert_int_equal(splits("bf16.sequential", 8, 512, 3072, 0), 1);
    assert_int_equal(splits("bf16.sequential", 8, 512, 3072, 4), 1);
    assert_int_equal(splits("w4a8.decode", 8, 512, 3072, 0), 4);
    assert_int_equal(splits("w4a8.decode", 8, 512, 3072, 2), 2);
    assert_int_equal(splits("w4a8.decode", 8, 512, 3072, -1), 0);
    assert_int_equal(splits("w4a8.r4d", 16, 512, 3072, 0), 8);
    assert_int_equal(splits("w4a8.r4d", 17, 512, 3072, 0), 4);
    assert_int_equal(splits("w4a8.r4d", 16, 512, 64, 0), 2);        /* 64 % 256, % 128 != 0 */
    assert_null(kernel_find("w4a8.folded")->split_k);
}

KR_TEST_MAIN(test_operand_formats, test_gpu_twins, test_compare_roles, test_split_k);
