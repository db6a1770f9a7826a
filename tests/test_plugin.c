/* The plugin ABI (kernels/plugin.h) and its loader (kernels/plugin_loader.h).
 *
 * The example plugin (kernels/plugins/examples/example_w4a8.c) is an
 * independent scalar C implementation of the per-block W4A8 order, written
 * from the spec, sharing no code with the registry's w4a8.perblock model: its
 * output must be bit-identical to the model's on synthetic cases of several
 * shapes, both scale layouts, fragment-order cases and both activation
 * sources.  Loading refuses, with messages naming the file: an ABI version
 * mismatch (found and expected versions), a file that is not a shared
 * library, a missing file, a library without the plugin symbol. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "act_prepare.h"
#include "case_io.h"
#include "plugin_loader.h"
#include "registry.h"
#include "replay.h"
#include "synth.h"
#include "test_cases.h"
#include "test_main.h"
#include "test_support.h"


static kr_plugin_t *load_ok(const char *name)
{
    char path[1024];
    test_plugin_file(path, sizeof path, name);
    kr_plugin_t *p = NULL;
    kr_error_t err = {{0}};
    int rc = plugin_load(path, &p, &err);
    if (rc != 0)
        fprintf(stderr, "plugin_load(%s): %s\n", path, err.msg);
    assert_int_equal(rc, 0);
    assert_non_null(p);
    return p;
}

/* The error plugin_load gives for `path` (it must fail). */
/* Loading PATH is refused with a message naming it and holding A and,
 * unless NULL, B and C. */
static void load_fails(const char *path, const char *a, const char *b, const char *c)
{
    kr_plugin_t *p = (kr_plugin_t *)(uintptr_t)1;
    kr_error_t err = {{0}};
    assert_int_equal(plugin_load(path, &p, &err), -1);
    assert_null(p);
    assert_non_null(strstr(err.msg, path));
    fprintf(stderr, "  refused as expected: %s\n", err.msg);
    const char *const phrases[] = {a, b, c};
    for (size_t i = 0; i < sizeof phrases / sizeof phrases[0]; i++)
        if (phrases[i])
            assert_non_null(strstr(err.msg, phrases[i]));
}

/* The built plugin NAME is refused, as load_fails has it. */
static void plugin_load_fails(const char *name, const char *a, const char *b, const char *c)
{
    char path[1024];
    test_plugin_file(path, sizeof path, name);
    load_fails(path, a, b, c);
}

/* ------------------------------------------------------------ listing */

static void test_example_loads_and_lists(void **state)
{
    (void)state;
    kr_plugin_t *p = load_ok("example_w4a8");
    assert_string_equal(plugin_name(p), "example");
    assert_false(plugin_is_gpu(p));
    assert_int_equal(plugin_kernel_count(p), 1);
    const kernel_desc_t *k = plugin_kernel_at(p, 0);
    assert_non_null(k);
    assert_null(plugin_kernel_at(p, 1));
    assert_string_equal(k->name, "example.w4a8_perblock");
    assert_ptr_equal(plugin_kernel_find(p, "example.w4a8_perblock"), k);
    assert_null(plugin_kernel_find(p, "w4a8.perblock"));
    assert_string_equal(k->family, "plugin");
    assert_int_equal(k->op, KERNEL_OP_GEMM);
    assert_int_equal(k->weight_kind, WEIGHT_KIND_MXFP4);
    assert_int_equal(k->k_multiple, 32);
    assert_int_equal(k->m_min, 1);
    assert_int_equal(k->m_max, 0);
    assert_int_equal(k->refs, REF_EXACT | REF_SOURCE);
    assert_true(k->rel_tol_exact > 0 && k->rel_tol_source > 0);
    assert_non_null(k->prepare_act);
    assert_non_null(k->run_cpu);
    assert_non_null(strstr(k->act_format, "e4m3fn"));
    assert_non_null(strstr(k->weight_format, "checkpoint order"));
    assert_non_null(strstr(k->weight_format, "K/32,N"));
    assert_non_null(strstr(k->weight_format, "per-block"));
    assert_non_null(strstr(k->summary, "plugin example"));
    assert_non_null(strstr(k->accumulation, "per 32-block"));
    /* The registry's own descriptors are not plugin kernels. */
    assert_true(kernel_is_plugin(k));
    assert_false(plugin_kernel_is_gpu(k));
    assert_non_null(plugin_kernel_entry(k));
    assert_non_null(plugin_kernel_entry(k)->launch);
    assert_false(kernel_is_plugin(kernel_find("w4a8.perblock")));
    assert_null(plugin_kernel_entry(kernel_find("w4a8.perblock")));
    /* The filter machinery sees it by name. */
    assert_true(kernel_name_matches(k->name, "example.*"));
    char why[128];
    assert_null(kernel_unsupported_reason(k, 7, 48, 128, why, sizeof why));
    assert_non_null(kernel_unsupported_reason(k, 7, 48, 80, why, sizeof why));
    plugin_unload(p);
}

/* ------------------------------------------------------------ bits */

typedef struct {
    int64_t M, N, K;
    scale_layout_t layout;
    weight_order_t order;
    act_source_t act_source;
    uint64_t seed;
} shape_t;

static void inputs_from_case(const case_t *c, const uint8_t *weight, kernel_inputs_t *in)
{
    *in = (kernel_inputs_t){
        .M = c->M, .N = c->N, .K = c->K,
        .x = c->x, .x_fp8 = c->x_fp8, .x_scale = c->x_scale, .x_fp8_format = c->x_fp8_format,
        .weight = {.packed = weight, .scales = c->weight_scale, .layout = c->scale_layout,
                   .e8m0_mode = E8M0_SPEC, .N = c->N, .K = c->K},
        .weight_ref = c->weight_ref, .weight_ref_len = c->weight_ref_len,
    };
}

/* Runs k the way replay does (prepare_act, run_cpu); out is malloc'd. */
static uint16_t *run_kernel(const kernel_desc_t *k, const kernel_inputs_t *in,
                            const kernel_options_t *opt, kernel_run_info_t *info)
{
    kernel_act_t act;
    kr_error_t err = {{0}};
    int rc = k->prepare_act(k, in, opt, &act, &err);
    if (rc)
        fprintf(stderr, "%s prepare_act: %s\n", k->name, err.msg);
    assert_int_equal(rc, 0);
    uint16_t *out = malloc((size_t)in->M * (size_t)in->N * sizeof(uint16_t));
    assert_non_null(out);
    memset(info, 0, sizeof *info);
    rc = k->run_cpu(k, in, &act, opt, out, info, &err);
    if (rc)
        fprintf(stderr, "%s run_cpu: %s\n", k->name, err.msg);
    assert_int_equal(rc, 0);
    kernel_act_free(&act);
    return out;
}

static void test_example_bit_identical_to_perblock_model(void **state)
{
    (void)state;
    kr_plugin_t *p = load_ok("example_w4a8");
    const kernel_desc_t *plug = plugin_kernel_at(p, 0);
    const kernel_desc_t *model = kernel_find("w4a8.perblock");
    const kernel_desc_t *folded = kernel_find("w4a8.folded");
    assert_non_null(model);
    assert_non_null(folded);
    int64_t differ_folded = 0;
    const shape_t shapes[] = {
        {1, 48, 64, SCALE_LAYOUT_NK, WEIGHT_ORDER_CHECKPOINT, ACT_SOURCE_AUTO, 1},
        {5, 64, 128, SCALE_LAYOUT_KN, WEIGHT_ORDER_CHECKPOINT, ACT_SOURCE_AUTO, 2},
        {17, 80, 256, SCALE_LAYOUT_NK, WEIGHT_ORDER_CHECKPOINT, ACT_SOURCE_QUANTIZE, 3},
        {33, 32, 512, SCALE_LAYOUT_KN, WEIGHT_ORDER_FRAGMENT, ACT_SOURCE_RECORDED, 4},
        {3, 130, 192, SCALE_LAYOUT_NK, WEIGHT_ORDER_CHECKPOINT, ACT_SOURCE_AUTO, 5},
        {70, 96, 320, SCALE_LAYOUT_KN, WEIGHT_ORDER_FRAGMENT, ACT_SOURCE_QUANTIZE, 6},
    };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const shape_t *sh = &shapes[s];
        synth_params_t sp = test_synth_params(sh->M, sh->N, sh->K, sh->seed);
        sp.scale_layout = sh->layout;
        sp.weight_order = sh->order;
        case_t c;
        test_synth_or_fail(&sp, &c);
        kr_error_t err = {{0}};
        uint8_t *owned = NULL;
        const uint8_t *w = case_weight_checkpoint(&c, &owned, &err);
        assert_non_null(w);
        kernel_inputs_t in;
        inputs_from_case(&c, w, &in);
        kernel_options_t opt;
        kernel_options_default(&opt);
        opt.act_source = sh->act_source;
        kernel_run_info_t info_model, info_plug;
        uint16_t *ref = run_kernel(model, &in, &opt, &info_model);
        uint16_t *got = run_kernel(plug, &in, &opt, &info_plug);
        kernel_run_info_t info_folded;
        uint16_t *other = run_kernel(folded, &in, &opt, &info_folded);
        const int64_t n = sh->M * sh->N;
        int64_t differ = 0, nonzero = 0, distinct = 0;
        for (int64_t i = 0; i < n; i++) {
            differ += got[i] != ref[i];
            differ_folded += got[i] != other[i];
            nonzero += (ref[i] & 0x7FFF) != 0;
            distinct += i == 0 || ref[i] != ref[i - 1];
        }
        fprintf(stderr, "  M=%lld N=%lld K=%lld %s %s: %lld of %lld differ\n", (long long)sh->M,
                (long long)sh->N, (long long)sh->K, scale_layout_name(sh->layout),
                sh->order == WEIGHT_ORDER_FRAGMENT ? "fragment" : "checkpoint",
                (long long)differ, (long long)n);
        assert_int_equal(differ, 0);
        assert_memory_equal(got, ref, (size_t)n * sizeof(uint16_t));
        /* The comparison means something: a varied, mostly nonzero output. */
        assert_true(nonzero > n / 2);
        assert_true(distinct > n / 4);
        /* Every element written (no 0x7FC1 poison note). */
        assert_string_equal(info_plug.note, "");
        TEST_FREE_ALL(ref, got, other, owned);
        case_free(&c);
    }
    /* Equality is not automatic: another accumulation order (the folded
     * path's single sum over pre-shifted e4m3 weights) gives other bits. */
    fprintf(stderr, "  vs w4a8.folded: %lld elements differ in all\n", (long long)differ_folded);
    assert_true(differ_folded > 0);
    plugin_unload(p);
}

/* A plugin kernel refuses what it cannot take as UNSUPPORTED (prepare_act). */
static void test_example_refuses_fnuz_and_missing_weight(void **state)
{
    (void)state;
    kr_plugin_t *p = load_ok("example_w4a8");
    const kernel_desc_t *k = plugin_kernel_at(p, 0);
    synth_params_t sp;
    synth_params_default(&sp);
    sp.M = 2;
    sp.N = 16;
    sp.K = 64;
    case_t c;
    test_synth_or_fail(&sp, &c);
    kr_error_t err = {{0}};
    kernel_inputs_t in;
    inputs_from_case(&c, c.weight, &in);
    kernel_options_t opt;
    kernel_options_default(&opt);
    opt.act_source = ACT_SOURCE_RECORDED;
    in.x_fp8_format = FP8_E4M3FNUZ;
    kernel_act_t act;
    assert_int_equal(k->prepare_act(k, &in, &opt, &act, &err), -1);
    assert_non_null(strstr(err.msg, "e4m3fn"));
    in.x_fp8_format = FP8_E4M3FN;
    in.weight.packed = NULL;
    assert_int_equal(k->prepare_act(k, &in, &opt, &act, &err), -1);
    assert_non_null(strstr(err.msg, "no MXFP4 weight"));
    case_free(&c);
    plugin_unload(p);
}

/* ------------------------------------------------------------ refusals */

static void test_wrong_abi_version(void **state)
{
    (void)state;
    char found[64], expected[64];
    snprintf(found, sizeof found, "plugin ABI version %u", KREPLAY_PLUGIN_ABI_VERSION + 1);
    snprintf(expected, sizeof expected, "implements ABI version %u", KREPLAY_PLUGIN_ABI_VERSION);
    plugin_load_fails("wrong_abi", found, expected, "plugin.h");
}

static void test_not_a_shared_library(void **state)
{
    (void)state;
    char path[1024];
    test_tmp_path(path, sizeof path, "not-a-library.so");
    assert_int_equal(test_write_text(path, "this is a text file, not an ELF shared object\n"), 0);
    load_fails(path, "not a loadable shared library", NULL, NULL);
    remove(path);

    /* A file that does not exist. */
    test_tmp_path(path, sizeof path, "no-such-plugin.so");
    load_fails(path, "No such file", NULL, NULL);

    /* A directory. */
    snprintf(path, sizeof path, "%s", KREPLAY_TEST_TMP);
    load_fails(path, "directory", NULL, NULL);
}

static void test_missing_symbol(void **state)
{
    (void)state;
    plugin_load_fails("no_symbol", "no symbol \"" KREPLAY_PLUGIN_SYMBOL "\"", "not a kreplay plugin",
                      NULL);
}

/* The deliberately broken plugins still load: they fail only when launched. */
static void test_broken_plugins_load(void **state)
{
    (void)state;
    const char *names[] = {"crash", "hang", "abort"};
    for (int i = 0; i < 3; i++) {
        kr_plugin_t *p = load_ok(names[i]);
        assert_int_equal(plugin_kernel_count(p), 1);
        assert_non_null(strstr(plugin_kernel_at(p, 0)->name, names[i]));
        plugin_unload(p);
    }
}

KR_TEST_MAIN(
    test_example_loads_and_lists, test_example_bit_identical_to_perblock_model,
    test_example_refuses_fnuz_and_missing_weight, test_wrong_abi_version,
    test_not_a_shared_library, test_missing_symbol, test_broken_plugins_load);
