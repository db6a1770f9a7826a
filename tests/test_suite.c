/* Suite files (harness/gate/suite.h): the default suite, every field of a full
 * suite, relative globs, one clear "PATH:LINE:" error per kind of bad suite,
 * and inputs that must not crash the loader. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "load_error.h"
#include "registry.h"
#include "suite.h"
#include "test_main.h"
#include "test_support.h"
#include "yaml_util.h"

static void write_file(const char *path, const char *text)
{
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
}

static void make_dir(const char *path)
{
    assert_int_equal(mkdir(path, 0755), 0);
}

/* A fresh directory holding cases/a.h5, cases/b.h5, cases/sub/c.h5,
 * policies/p.yaml and suites/ (where the suites under test go). */
static void make_tree(char *root, size_t cap)
{
    char p[2048];
    test_tmp_path(root, cap, "suite");
    make_dir(root);
    snprintf(p, sizeof p, "%s/cases", root);
    make_dir(p);
    snprintf(p, sizeof p, "%s/cases/sub", root);
    make_dir(p);
    snprintf(p, sizeof p, "%s/suites", root);
    make_dir(p);
    snprintf(p, sizeof p, "%s/policies", root);
    make_dir(p);
    const char *files[] = {"cases/a.h5", "cases/b.h5", "cases/sub/c.h5", "cases/notes.txt",
                           "policies/p.yaml"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", root, files[i]);
        write_file(p, "x");
    }
}

static void test_default_suite(void **state)
{
    (void)state;
    suite_t s;
    kr_error_t err = {{0}};
    int rc = suite_load(KREPLAY_SOURCE_DIR "/cases/suites/default.yaml", &s, &err);
    if (rc)
        fprintf(stderr, "%s\n", err.msg);
    assert_int_equal(rc, 0);
    assert_string_equal(s.name, "default");
    /* the bundled samples, sorted, with "suites/../samples" cleaned away */
    assert_int_equal(s.n_files, 5);
    for (int i = 0; i < s.n_files; i++) {
        assert_non_null(strstr(s.files[i], "/cases/samples/"));
        assert_null(strstr(s.files[i], ".."));
        assert_true(strlen(s.files[i]) > 3 && !strcmp(s.files[i] + strlen(s.files[i]) - 3, ".h5"));
        if (i)
            assert_true(strcmp(s.files[i - 1], s.files[i]) < 0);
    }
    assert_int_equal(s.n_synth, 1);
    const suite_synth_t *ss = &s.synth[0];
    assert_string_equal(ss->shapes, "gdn_in_proj_ba_tp2,gdn_in_proj_ba_tp1,moe_gate,512x3072");
    assert_int_equal(ss->n_shapes, 4);
    assert_int_equal(ss->shape_list[0].N, 48);
    assert_int_equal(ss->shape_list[2].N, 256);
    assert_int_equal(ss->shape_list[3].K, 3072);
    assert_int_equal(ss->n_m, 4);
    assert_int_equal(ss->m[3], 300);
    assert_int_equal(ss->n_seeds, 1);
    assert_int_equal(ss->seeds[0], 1);
    assert_int_equal(suite_synth_count(ss), 16);
    assert_string_equal(s.kernels, "");
    assert_int_equal(s.refs, REF_EXACT | REF_SOURCE);
    assert_int_equal(s.n_bands, 4);
    assert_int_equal(s.reruns, 3);
    assert_string_equal(s.device, "cpu");
    assert_non_null(s.policy_path);
    assert_non_null(strstr(s.policy_path, "cases/policies/default.yaml"));
    assert_int_equal(access(s.policy_path, R_OK), 0);
    assert_int_equal(strlen(s.hash), 16);
    suite_free(&s);
    assert_null(s.files);
}

static const char full_suite[] =
    "suite: full-1\n"                                         /* 1 */
    "description: \"every field\"\n"                          /* 2 */
    "cases:\n"                                                /* 3 */
    "  - files: [\"../cases/*.h5\", \"../cases/a.h5\"]\n"     /* 4: a.h5 twice */
    "  - synth:\n"                                            /* 5 */
    "      shapes: [gdn_in_proj_ba_tp2, moe_gate, 5120x3072]\n"
    "      m: [1, 17, 64, 300]\n"
    "      seeds: [1, 2]\n"
    "      outliers: 7\n"
    "      outlier_gain: 50.5\n"
    "      token_spread: 0.75\n"
    "      weight_spread: 2\n"
    "      nan_block: \"17x128@1024\"\n"
    "      zero_rows: 3\n"
    "      scale_layout: kn\n"
    "      fragment_order: true\n"
    "      weight_format: both\n"
    "  - files: [../cases/sub]\n"                             /* a directory: its *.h5 */
    "  - synth: {shapes: [mlp_down], m: [4096]}\n"
    "kernels: [\"w4a8.*\", w4a4.aiter]\n"
    "references: [exact]\n"
    "bands:\n"
    "  decode: [1, 32]\n"
    "  prefill: [33, 1000]\n"
    "  tiled: [1001, null]\n"
    "reruns: 5\n"
    "device: gpu\n"
    "policy: ../policies/p.yaml\n";

static void test_full_suite(void **state)
{
    (void)state;
    char root[1024], path[2048], want[2048];
    make_tree(root, sizeof root);
    snprintf(path, sizeof path, "%s/suites/full.yaml", root);
    write_file(path, full_suite);

    suite_t s;
    kr_error_t err = {{0}};
    int rc = suite_load(path, &s, &err);
    if (rc)
        fprintf(stderr, "%s\n", err.msg);
    assert_int_equal(rc, 0);
    assert_string_equal(s.path, path);
    assert_string_equal(s.name, "full-1");
    assert_string_equal(s.description, "every field");
    /* resolved against the suite's directory, sorted, deduplicated; notes.txt is no case */
    assert_int_equal(s.n_files, 3);
    snprintf(want, sizeof want, "%s/cases/a.h5", root);
    assert_string_equal(s.files[0], want);
    snprintf(want, sizeof want, "%s/cases/b.h5", root);
    assert_string_equal(s.files[1], want);
    snprintf(want, sizeof want, "%s/cases/sub/c.h5", root);
    assert_string_equal(s.files[2], want);

    assert_int_equal(s.n_synth, 2);
    const suite_synth_t *ss = &s.synth[0];
    assert_int_equal(ss->line, 5);
    assert_string_equal(ss->shapes, "gdn_in_proj_ba_tp2,moe_gate,5120x3072");
    assert_int_equal(ss->n_shapes, 3);
    assert_string_equal(ss->shape_list[0].name, "gdn_in_proj_ba_tp2");
    assert_int_equal(ss->shape_list[0].N, 48);
    assert_int_equal(ss->shape_list[0].K, 5120);
    assert_int_equal(ss->shape_list[1].N, 256);
    assert_int_equal(ss->shape_list[1].K, 2048);
    assert_string_equal(ss->shape_list[2].name, "gdn_out_proj"); /* NxK in the catalogue keeps its name */
    assert_int_equal(ss->n_m, 4);
    const long long ms[] = {1, 17, 64, 300};
    for (int i = 0; i < 4; i++)
        assert_int_equal(ss->m[i], ms[i]);
    assert_int_equal(ss->n_seeds, 2);
    assert_int_equal(ss->seeds[0], 1);
    assert_int_equal(ss->seeds[1], 2);
    assert_int_equal(ss->base.outlier_channels, 7);
    assert_true(ss->base.outlier_gain == 50.5);
    assert_true(ss->base.token_spread == 0.75);
    assert_true(ss->base.weight_exp_spread == 2.0);
    assert_int_equal(ss->base.nan_rows, 17);
    assert_int_equal(ss->base.nan_cols, 128);
    assert_int_equal(ss->base.nan_col0, 1024);
    assert_int_equal(ss->base.zero_rows, 3);
    assert_int_equal(ss->base.scale_layout, SCALE_LAYOUT_KN);
    assert_int_equal(ss->base.weight_order, WEIGHT_ORDER_FRAGMENT);
    assert_int_equal(ss->base.weight_format, SYNTH_WEIGHT_BOTH);
    assert_int_equal(ss->weight_format_given, 1);
    assert_int_equal(suite_synth_count(ss), 3 * 4 * 2);
    /* case order: shape-major, then m, then seed */
    synth_params_t p;
    assert_int_equal(suite_synth_params(ss, 0, &p), 0);
    assert_int_equal(p.N, 48);
    assert_int_equal(p.M, 1);
    assert_int_equal(p.seed, 1);
    assert_int_equal(suite_synth_params(ss, 1, &p), 0);
    assert_int_equal(p.M, 1);
    assert_int_equal(p.seed, 2);
    assert_int_equal(suite_synth_params(ss, 2 * 4 * 2 + 2 * 3 + 1, &p), 0); /* shape 2, m 300, seed 2 */
    assert_int_equal(p.N, 5120);
    assert_int_equal(p.K, 3072);
    assert_int_equal(p.M, 300);
    assert_int_equal(p.seed, 2);
    assert_int_equal(p.outlier_channels, 7);
    assert_int_equal(p.weight_format, SYNTH_WEIGHT_BOTH);
    assert_string_equal(p.layer, "gdn_out_proj");
    assert_int_equal(suite_synth_params(ss, 24, &p), -1);

    /* the flow-style item: defaults, and the weight format from the catalogue */
    const suite_synth_t *s2 = &s.synth[1];
    assert_int_equal(s2->n_shapes, 1);
    assert_int_equal(s2->n_seeds, 1);
    assert_int_equal(s2->seeds[0], 1);
    assert_int_equal(s2->weight_format_given, 0);
    assert_int_equal(s2->base.outlier_channels, 4);
    assert_int_equal(s2->base.weight_order, WEIGHT_ORDER_CHECKPOINT);
    assert_int_equal(suite_synth_params(s2, 0, &p), 0);
    assert_int_equal(p.M, 4096);
    assert_int_equal(p.N, 5120);
    assert_int_equal(p.K, 8704);
    assert_int_equal(p.weight_format, SYNTH_WEIGHT_MXFP4);

    assert_string_equal(s.kernels, "w4a8.*,w4a4.aiter");
    assert_true(kernel_name_matches("w4a8.perblock", s.kernels));
    assert_false(kernel_name_matches("quant.mxfp4", s.kernels));
    assert_int_equal(s.refs, REF_EXACT);
    assert_int_equal(s.n_bands, 3);
    assert_string_equal(s.bands[0].name, "decode");
    assert_int_equal(s.bands[0].lo, 1);
    assert_int_equal(s.bands[0].hi, 32);
    assert_string_equal(s.bands[1].name, "prefill");
    assert_int_equal(s.bands[1].lo, 33);
    assert_int_equal(s.bands[1].hi, 1000);
    assert_string_equal(s.bands[2].name, "tiled");
    assert_int_equal(s.bands[2].lo, 1001);
    assert_int_equal(s.bands[2].hi, 0);
    assert_string_equal(suite_band_of(&s, 1), "decode");
    assert_string_equal(suite_band_of(&s, 32), "decode");
    assert_string_equal(suite_band_of(&s, 33), "prefill");
    assert_string_equal(suite_band_of(&s, 1001), "tiled");
    assert_string_equal(suite_band_of(&s, 1000000), "tiled");
    assert_string_equal(suite_band_of(&s, 0), "none");
    assert_int_equal(s.reruns, 5);
    assert_string_equal(s.device, "gpu");
    snprintf(want, sizeof want, "%s/policies/p.yaml", root);
    assert_string_equal(s.policy_path, want);
    char h[17];
    kr_fnv1a64_hex(full_suite, strlen(full_suite), h);
    assert_string_equal(s.hash, h);
    suite_free(&s);
}

/* A suite given by a relative path resolves its globs against its own
 * directory, not the working directory. */
static void test_relative_paths(void **state)
{
    (void)state;
    char root[1024], path[2048], cwd[4096];
    make_tree(root, sizeof root);
    snprintf(path, sizeof path, "%s/suites/rel.yaml", root);
    write_file(path, "suite: rel\ncases:\n  - files: [\"../cases/?.h5\", ./../cases/sub/*.h5]\n"
                     "policy: ../policies/p.yaml\n");
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(chdir(root), 0);
    suite_t s;
    kr_error_t err = {{0}};
    int rc = suite_load("suites/rel.yaml", &s, &err);
    assert_int_equal(chdir(cwd), 0);
    if (rc)
        fprintf(stderr, "%s\n", err.msg);
    assert_int_equal(rc, 0);
    assert_int_equal(s.n_files, 3);
    assert_string_equal(s.files[0], "cases/a.h5");
    assert_string_equal(s.files[1], "cases/b.h5");
    assert_string_equal(s.files[2], "cases/sub/c.h5");
    assert_string_equal(s.policy_path, "policies/p.yaml");
    /* defaults */
    assert_int_equal(s.n_synth, 0);
    assert_int_equal(s.refs, REF_EXACT | REF_SOURCE);
    assert_int_equal(s.n_bands, 4);
    assert_string_equal(suite_band_of(&s, 64), "decode");
    assert_string_equal(suite_band_of(&s, 65), "mid");
    assert_string_equal(suite_band_of(&s, 2047), "prefill");
    assert_string_equal(suite_band_of(&s, 2048), "tiled");
    assert_int_equal(s.reruns, 3);
    assert_string_equal(s.device, "cpu");
    assert_string_equal(s.description, "");
    suite_free(&s);

    char buf[64];
    const char *cases[][2] = {{"a/./b/../c", "a/c"}, {"./x", "x"}, {"../../y", "../../y"},
                              {"/a/../../b", "/b"},  {"a//b/", "a/b"}, {"a/..", "."}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(buf, sizeof buf, "%s", cases[i][0]);
        suite_clean_path(buf);
        assert_string_equal(buf, cases[i][1]);
    }
}

/* Every kind of bad suite: -1, one line "PATH:LINE: ..." with the line of
 * the fault and a phrase that says what is wrong. */
static const test_bad_yaml_t bad_suites[] = {
    /* unknown keys, anywhere */
    {"suite: x\ncases:\n  - files: [\"../cases/*.h5\"]\nkernals: [\"w4a8.*\"]\n", 4, "unknown key 'kernals' in the suite"},
    {"suite: x\ncases:\n  - files: [\"../cases/*.h5\"]\n    glob: 1\n", 4, "unknown key 'glob' in cases[0]"},
    {"suite: x\ncases:\n  - synth:\n      shapes: [moe_gate]\n      m: [1]\n      outlier: 3\n", 6,
     "unknown key 'outlier' in cases[0].synth"},
    {"suite: x\ncases:\n  - files: [\"../cases/*.h5\"]\nbands:\n  decode: [1, 64]\n  decdoe: [65, 100]\n", 6,
     "unknown key 'decdoe' in bands"},
    {"suite: x\ncases:\n  - files: [\"../cases/*.h5\"]\nreruns: 1\nreruns: 2\n", 5, "duplicate key 'reruns'"},
    /* wrong types */
    {"suite: x\ncases:\n  - files: [\"../cases/*.h5\"]\nreruns: three\n", 4, "reruns: expected an integer, got 'three'"},
    {"suite: x\ncases:\n  - files: [\"../cases/*.h5\"]\nreruns: \"3\"\n", 4, "reruns: expected an integer, got the quoted string"},
    {"suite: x\ncases:\n  - synth:\n      shapes: [moe_gate]\n      m: [1, x, 3]\n", 5,
     "cases[0].synth.m[1]: expected an integer, got 'x'"},
    {"suite: x\ncases:\n  - synth:\n      shapes: [moe_gate]\n      m: [1]\n\n      outlier_gain: abc\n", 7,
     "cases[0].synth.outlier_gain: expected a number, got 'abc'"},
    {"suite: x\ncases:\n  - synth:\n      shapes: [moe_gate]\n      m: [1]\n      fragment_order: yes\n", 6,
     "expected true or false, got 'yes'"},
    {"suite: x\ncases:\n  files: [\"../cases/*.h5\"]\n", 3, "cases: expected a list, got a mapping"},
    {"suite: x\ncases:\n  - files: \"../cases/*.h5\"\n", 3, "cases[0].files: expected a list"},
    {"suite: [x]\ncases:\n  - files: [\"../cases/*.h5\"]\n", 1, "suite: expected a string, got a list"},
    {"suite: x\ncases:\n  - files: [\"../cases/*.h5\"]\ndevice: tpu\n", 4, "device: expected cpu or gpu, got 'tpu'"},
    {"suite: x\ncases:\n  - files: [\"../cases/*.h5\"]\nreferences: [exakt]\n", 4, "expected exact or source"},
    {"suite: x\ncases:\n  - files: [\"../cases/*.h5\"]\nbands:\n  decode: [1, 64]\n  mid: [60, 255]\n", 6,
     "overlaps decode"},
    {"suite: x\ncases:\n  - files: [\"../cases/*.h5\"]\nbands:\n  decode: 64\n", 5, "bands.decode: expected [lo, hi]"},
    {"suite: x\ncases:\n  - files: [\"../cases/*.h5\"]\n    synth: {shapes: [moe_gate], m: [1]}\n", 3,
     "both files and synth"},
    {"suite: x\ncases:\n  - synth:\n      shapes: [moe_gate]\n      m: [1]\n      nan_block: \"17x128@4000\"\n", 6,
     "outside K=2048 of shape moe_gate"},
    {"suite: x\ncases:\n  - synth:\n      shapes: [moe_gate]\n      m: [1]\n      nan_block: 17x\n", 6,
     "expected \"RxC@C0\""},
    /* missing required keys */
    {"suite: x\ndescription: no cases\n", 1, "missing required key 'cases'"},
    {"description: no name\ncases:\n  - files: [\"../cases/*.h5\"]\n", 1, "missing required key 'suite'"},
    {"suite: x\ncases:\n  - synth:\n      m: [1]\n", 4, "missing required key 'shapes'"},
    {"suite: x\ncases:\n  - synth:\n      shapes: [moe_gate]\n", 4, "missing required key 'm'"},
    /* names that resolve to nothing */
    {"suite: x\ncases:\n  - files: [\"../cases/*.h5\"]\nkernels:\n  - \"w4a8.*\"\n  - \"w4a9.*\"\n", 6,
     "kernels[1]: 'w4a9.*' matches no kernel in the registry"},
    {"suite: x\ncases:\n  - synth:\n      shapes:\n        - moe_gate\n        - no_such_layer\n      m: [1]\n", 6,
     "unknown shape 'no_such_layer'"},
    {"suite: x\ncases:\n  - files: [\"../cases/*.h5\"]\n  - files:\n      - \"../cases/*.h5\"\n      - \"../nothing/*.h5\"\n",
     6, "cases[1].files[1]: '../nothing/*.h5' matches no file"},
    {"suite: x\ncases:\n  - files: [\"../cases/*.txt5\"]\n", 3, "matches no file"},
    {"suite: x\ncases:\n  - files: [\"../cases/*.h5\"]\npolicy: ../policies/missing.yaml\n", 4,
     "policy: '../policies/missing.yaml' (resolved to"},
    /* YAML syntax */
    {"suite: x\ncases:\n  - files: [\"../cases/*.h5\"\nreruns: 3\n", 4, "YAML syntax error"},
    {"suite: x\n  bad: indent\n", 2, "YAML syntax error: mapping values are not allowed"},
    {"suite: x\ncases: *nothing\n", 2, "YAML syntax error: found undefined alias"},
    {"suite: x\ncases: []\n---\nsuite: y\n", 3, "a second YAML document"},
    {"", 1, "empty file"},
    {"# only a comment\n", 1, "empty file"},
    {"- suite: x\n", 1, "the suite: expected a mapping, got a list"},
};

static void test_bad_suites(void **state)
{
    (void)state;
    char root[1024], path[2048];
    make_tree(root, sizeof root);
    snprintf(path, sizeof path, "%s/suites/bad.yaml", root);
    for (size_t i = 0; i < sizeof bad_suites / sizeof bad_suites[0]; i++) {
        write_file(path, bad_suites[i].yaml);
        suite_t s;
        kr_error_t err = {{0}};
        int rc = suite_load(path, &s, &err);
        test_expect_load_error("suite", i, &bad_suites[i], path, rc, err.msg);
        assert_null(s.name); /* zeroed on failure */
        assert_int_equal(s.n_files, 0);
    }
    /* a missing file */
    suite_t s;
    kr_error_t err = {{0}};
    snprintf(path, sizeof path, "%s/suites/none.yaml", root);
    assert_int_equal(suite_load(path, &s, &err), -1);
    assert_non_null(strstr(err.msg, path));
    assert_non_null(strstr(err.msg, "cannot open"));
}

/* Inputs a fuzzer would try: deep nesting (flow and block), alias cycles,
 * NUL bytes, invalid UTF-8, huge lists, and random mutations of a valid
 * suite.  Each must load or fail with a message; none may crash or hang. */
static void test_hostile_inputs(void **state)
{
    (void)state;
    const char *name = KREPLAY_SOURCE_DIR "/cases/suites/hostile.yaml";
    suite_t s;
    kr_error_t err;

    const size_t depth = 200000;
    char *deep = malloc(2 * depth + 64);
    assert_non_null(deep);
    int o = sprintf(deep, "suite: x\ncases: ");
    memset(deep + o, '[', depth);
    memset(deep + o + depth, ']', depth);
    size_t len = (size_t)o + 2 * depth;
    assert_int_equal(suite_load_bytes(name, deep, len, &s, &err), -1);
    assert_non_null(strstr(err.msg, "nested more than"));
    assert_non_null(strstr(err.msg, ":2: "));
    /* unbalanced: only openers */
    assert_int_equal(suite_load_bytes(name, deep, (size_t)o + depth, &s, &err), -1);
    free(deep);

    char block[40000];
    size_t b = 0;
    for (int i = 0; i < 100; i++) {
        for (int j = 0; j < i; j++)
            block[b++] = ' ';
        b += (size_t)sprintf(block + b, "a:\n");
    }
    assert_int_equal(suite_load_bytes(name, block, b, &s, &err), -1);
    assert_non_null(strstr(err.msg, ":33: nested more than 32"));

    const char *odd[] = {
        "suite: x\ncases: &a [*a]\n",
        "suite: &n x\ncases:\n  - &i {synth: {shapes: [moe_gate], m: &m [1, *m]}}\n",
        "suite: x\ncases:\n  - synth: {shapes: [moe_gate], m: [1], seeds: &s [*s]}\n",
        "? [a, b]\n: c\n",
        "suite: x\ncases:\n  - {? {a: 1} : 2}\n",
        "suite: \"a\\0b\"\ncases: []\n",
        "suite: x\ncases: [\xff\xfe]\n",
        "\xef\xbb\xbfsuite: x\n",
        "suite: x\ncases:\n  - synth: {shapes: [\"moe_gate,mlp_down\"], m: [1]}\n",
        "suite: x\ncases:\n  - synth: {shapes: [\"\"], m: [1]}\n",
        "suite: x\ncases:\n  - synth: {shapes: [moe_gate], m: [99999999999999999999999]}\n",
        "suite: x\ncases:\n  - synth: {shapes: [moe_gate], m: [1], outlier_gain: 1e999}\n",
        "suite: x\ncases:\n  - synth: {shapes: [moe_gate], m: [1], outlier_gain: .nan}\n",
        "suite: x\ncases:\n  - synth: {shapes: [0x64], m: [1]}\n",
        "suite: x\ncases:\n  - synth: {shapes: [7x65], m: [1]}\n",
        "suite: x\nbands: {decode: [5, 2]}\ncases: []\n",
        "suite: x\nbands: {decode: [1, 2, 3]}\ncases: []\n",
        "suite: x\nkernels: [\"w4a8.*,zzz\"]\ncases: []\n",
        "suite: x\ncases:\n  - files: [\"/nonexistent/dir/*.h5\"]\n",
        "%YAML 1.1\n---\nsuite: x\n",
        "suite: !!binary aGVsbG8=\ncases: []\n",
        "{{{{{{{{{{",
        "]]]]",
        "'",
        "suite: x\ncases:\n  - synth: {shapes: [moe_gate], m: [1], weight_format: bf16, fragment_order: true}\n",
    };
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++) {
        memset(&err, 0, sizeof err);
        int rc = suite_load_bytes(name, odd[i], strlen(odd[i]), &s, &err);
        if (rc == 0)
            suite_free(&s);
        else
            assert_non_null(strstr(err.msg, name));
        if (rc != -1)
            fprintf(stderr, "odd #%zu loaded\n", i);
        assert_int_equal(rc, -1); /* none of these is a valid suite */
    }
    /* embedded NUL inside the byte count */
    const char nul[] = "suite: x\0\ncases: []\n";
    assert_int_equal(suite_load_bytes(name, nul, sizeof nul - 1, &s, &err), -1);

    /* a list longer than the helpers walk */
    size_t cap = 200000;
    char *many = malloc(cap);
    assert_non_null(many);
    size_t n = (size_t)sprintf(many, "suite: x\ncases:\n  - synth:\n      shapes: [moe_gate]\n      m: [");
    for (int i = 0; i < 5000; i++)
        n += (size_t)sprintf(many + n, "%d, ", i + 1);
    n += (size_t)sprintf(many + n, "1]\n");
    assert_int_equal(suite_load_bytes(name, many, n, &s, &err), -1);
    assert_non_null(strstr(err.msg, "expected"));
    free(many);

    /* random mutations of the default suite: bytes flipped, dropped, duplicated */
    FILE *fp = fopen(KREPLAY_SOURCE_DIR "/cases/suites/default.yaml", "rb");
    assert_non_null(fp);
    char base[8192];
    size_t blen = fread(base, 1, sizeof base, fp);
    fclose(fp);
    assert_int_equal(suite_load_bytes(name, base, blen, &s, &err), 0);
    suite_free(&s);
    test_rng_t rng = {12345};
    static const char alphabet[] = "[]{}:-,#&*!|>'\"%@` \n\t0x.\\?";
    char buf[8400];
    int ok = 0, failed = 0;
    for (int iter = 0; iter < 3000; iter++) {
        size_t l = blen;
        memcpy(buf, base, l);
        int edits = 1 + (int)(test_rng_u64(&rng) % 4);
        for (int e = 0; e < edits && l > 1; e++) {
            size_t at = (size_t)(test_rng_u64(&rng) % l);
            switch (test_rng_u64(&rng) % 4) {
            case 0: buf[at] = alphabet[test_rng_u64(&rng) % (sizeof alphabet - 1)]; break;
            case 1: buf[at] = (char)(test_rng_u64(&rng) & 0xff); break;
            case 2: memmove(buf + at, buf + at + 1, l - at - 1); l--; break;
            default:
                if (l + 1 < sizeof buf) {
                    memmove(buf + at + 1, buf + at, l - at);
                    l++;
                }
            }
        }
        memset(&err, 0, sizeof err);
        if (suite_load_bytes(name, buf, l, &s, &err) == 0) {
            ok++;
            suite_free(&s);
        } else {
            failed++;
            assert_true(err.msg[0] != 0);
            assert_null(strchr(err.msg, '\n'));
        }
    }
    assert_true(failed > 0);
    assert_int_equal(ok + failed, 3000);
}

KR_TEST_MAIN(
    test_default_suite, test_full_suite, test_relative_paths, test_bad_suites,
    test_hostile_inputs);
