/* The malformed-input corpus, built at test time under the
 * build tree's tests/tmp from a small valid synthetic case, dump.pt and the
 * default suite (tests/malformed/README.md lists it): truncated files, wrong
 * dtypes, wrong shapes, dimensions whose product overflows, zero sizes,
 * NaN/Inf everywhere, an unwritable output directory, a .pt with a bad
 * pickle, bad suites.  Each bad input must give exit code 2 and one
 * "kreplay: error: <path>: ..." line naming the file, no crash or sanitizer
 * report, and no report left looking complete in the -o directory.
 * NaN/Inf-everywhere inputs are valid: they give exit 0/1 and the verdict
 * POISONED_INPUT.
 * ctest-labels: malformed */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <hdf5.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zip.h>

#include "test_main.h"
#include "test_support.h"

#define PT_FIXTURE KREPLAY_SOURCE_DIR "/tests/fixtures/pt/dump.pt"
#define DEFAULT_SUITE KREPLAY_SOURCE_DIR "/cases/suites/default.yaml"
#define CM 2
#define CN 32
#define CK 64

static char g_dir[1024];   /* this run's corpus directory */
static char g_good[1200];  /* a valid case: M=2, N=32, K=64, MXFP4 weight, x and x_fp8 */

static int exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

static void corpus_path(char *buf, size_t cap, const char *name)
{
    snprintf(buf, cap, "%s/%s", g_dir, name);
}

#define write_text(path, text) assert_int_equal(test_write_text(path, text), 0)

/* No crash, no sanitizer report, no HDF5 error stack on the output. */
static void assert_clean_output(const char *out)
{
    static const char *bad[] = {"AddressSanitizer", "runtime error:", "LeakSanitizer",
                                "Segmentation fault", "Aborted", "core dumped",
                                "HDF5-DIAG", "Assertion", "double free"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (strstr(out, bad[i])) {
            fprintf(stderr, "output holds '%s':\n%s\n", bad[i], out);
            fail();
        }
    }
}

/* Exit 2 and a "kreplay: error: " line that names `path`. */
static void expect_error(const char *args, const char *path)
{
    char *out = NULL;
    int rc = test_run_kreplay(args, &out);
    assert_non_null(out);
    const char *line = strstr(out, "kreplay: error: ");
    int named = 0;
    while (line) {
        const char *eol = strchr(line, '\n');
        size_t len = eol ? (size_t)(eol - line) : strlen(line);
        char *l = strndup(line, len);
        named |= strstr(l, path) != NULL;
        free(l);
        line = strstr(line + 1, "kreplay: error: ");
    }
    if (rc != 2 || !named) {
        fprintf(stderr, "kreplay %s\n  exit %d (expected 2), error line naming %s: %s\n%s\n",
                args, rc, path, named ? "yes" : "NO", out);
    }
    assert_clean_output(out);
    assert_int_equal(rc, 2);
    assert_true(named);
    free(out);
}

/* `command 'path'` fails with an error line naming `path`. */
static void expect_error_on(const char *command, const char *path)
{
    char args[4096];
    snprintf(args, sizeof args, "%s '%s'", command, path);
    expect_error(args, path);
}

/* ---- building the corpus ---- */

static void copy_file(const char *from, const char *to, long keep)
{
    FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
    assert_non_null(in);
    assert_non_null(out);
    char buf[65536];
    size_t n;
    long total = 0;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0) {
        if (keep >= 0 && total + (long)n > keep)
            n = (size_t)(keep - total);
        fwrite(buf, 1, n, out);
        total += (long)n;
        if (keep >= 0 && total >= keep)
            break;
    }
    fclose(in);
    assert_int_equal(fclose(out), 0);
}

static long file_size(const char *p)
{
    struct stat st;
    assert_int_equal(stat(p, &st), 0);
    return (long)st.st_size;
}

/* A copy of the good case, to be altered. */
static void derive(char *buf, size_t cap, const char *name)
{
    corpus_path(buf, cap, name);
    copy_file(g_good, buf, -1);
}

static void set_attr_i64(const char *path, const char *name, long long v)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    assert_true(f >= 0);
    if (H5Aexists(f, name) > 0)
        assert_true(H5Adelete(f, name) >= 0);
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(f, name, H5T_STD_I64LE, sp, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(a >= 0);
    int64_t x = v;
    assert_true(H5Awrite(a, H5T_NATIVE_INT64, &x) >= 0);
    H5Aclose(a);
    H5Sclose(sp);
    H5Fclose(f);
}

/* Replaces dataset `name` by one of file type `ftype` and the given dims,
 * filled with zero bytes (its attributes are lost: the type check must come
 * first or the attribute check must catch it: either is a clean error). */
static void replace_dataset(const char *path, const char *name, hid_t ftype, int rank,
                            const hsize_t *dims)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    assert_true(f >= 0);
    if (H5Lexists(f, name, H5P_DEFAULT) > 0)
        assert_true(H5Ldelete(f, name, H5P_DEFAULT) >= 0);
    hid_t sp = H5Screate_simple(rank, dims, NULL);
    hid_t d = H5Dcreate2(f, name, ftype, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(d >= 0);
    hsize_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= dims[i];
    if (n > 0) {
        size_t bytes = (size_t)n * H5Tget_size(ftype);
        void *z = calloc(1, bytes);
        assert_true(H5Dwrite(d, ftype, H5S_ALL, H5S_ALL, H5P_DEFAULT, z) >= 0);
        free(z);
    }
    H5Dclose(d);
    H5Sclose(sp);
    H5Fclose(f);
}

/* Overwrites every element of an existing dataset (same type and shape)
 * with the one value `elem` of `size` bytes in memory type `memtype`. */
static void fill_dataset(const char *path, const char *name, hid_t memtype, const void *elem,
                         size_t size)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    assert_true(f >= 0);
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
    assert_true(d >= 0);
    hid_t sp = H5Dget_space(d);
    hssize_t n = H5Sget_simple_extent_npoints(sp);
    unsigned char *buf = malloc((size_t)n * size);
    for (hssize_t i = 0; i < n; i++)
        memcpy(buf + (size_t)i * size, elem, size);
    assert_true(H5Dwrite(d, memtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) >= 0);
    free(buf);
    H5Sclose(sp);
    H5Dclose(d);
    H5Fclose(f);
}

static void fill_f32(const char *path, const char *name, float v)
{
    fill_dataset(path, name, H5T_NATIVE_FLOAT, &v, sizeof v);
}

static void fill_u8(const char *path, const char *name, uint8_t v)
{
    fill_dataset(path, name, H5T_NATIVE_UINT8, &v, sizeof v);
}

static int setup(void **state)
{
    (void)state;
    test_tmp_path(g_dir, sizeof g_dir, "malformed");
    if (mkdir(g_dir, 0755) != 0)
        return -1;
    char args[2048], *out = NULL;
    snprintf(args, sizeof args, "synth --shape %dx%d --m %d --out '%s' --name good", CN, CK, CM, g_dir);
    int rc = test_run_kreplay(args, &out);
    if (rc != 0) {
        fprintf(stderr, "kreplay %s: exit %d\n%s\n", args, rc, out ? out : "");
        free(out);
        return -1;
    }
    free(out);
    snprintf(g_good, sizeof g_good, "%s/good.h5", g_dir);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    return exists(g_good) ? 0 : -1;
}

/* ---- the cases ---- */

static void test_good_case_is_good(void **state)
{
    (void)state;
    char args[2048], *out = NULL;
    snprintf(args, sizeof args, "inspect '%s'", g_good);
    assert_int_equal(test_run_kreplay(args, &out), 0);
    assert_clean_output(out);
    free(out);
}

static void test_truncated(void **state)
{
    (void)state;
    const long keep[] = {0, 7, 100, 512, 2048, -2 /* half */, -3 /* all but 16 */};
    long size = file_size(g_good);
    char path[1200];
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++) {
        long k = keep[i] == -2 ? size / 2 : keep[i] == -3 ? size - 16 : keep[i];
        char name[64];
        snprintf(name, sizeof name, "truncated_%ld.h5", k);
        corpus_path(path, sizeof path, name);
        copy_file(g_good, path, k);
        expect_error_on("inspect", path);
        expect_error_on("replay", path);
    }
}

/* A copy of the good case with dataset `ds` replaced (see replace_dataset). */
struct dataset_swap {
    const char *name, *ds;
    hid_t type;
    int rank;
    hsize_t dims[3];
};

static void expect_swaps_rejected(const struct dataset_swap *cases, size_t n)
{
    char path[1200];
    for (size_t i = 0; i < n; i++) {
        derive(path, sizeof path, cases[i].name);
        replace_dataset(path, cases[i].ds, cases[i].type, cases[i].rank, cases[i].dims);
        expect_error_on("replay", path);
        expect_error_on("inspect", path);
    }
}

static void test_wrong_dtypes(void **state)
{
    (void)state;
    const struct dataset_swap cases[] = {
        {"dtype_x_scale_f64.h5", "x_scale", H5T_IEEE_F64LE, 1, {CM, 0}},
        {"dtype_x_fp8_i8.h5", "x_fp8", H5T_STD_I8LE, 2, {CM, CK}},
        {"dtype_x_fp8_u16.h5", "x_fp8", H5T_STD_U16LE, 2, {CM, CK}},
        {"dtype_weight_i8.h5", "weight", H5T_STD_I8LE, 2, {CN, CK / 2}},
        {"dtype_weight_scale_f32.h5", "weight_scale", H5T_IEEE_F32LE, 2, {CN, CK / 32}},
        {"dtype_x_i32.h5", "x", H5T_STD_I32LE, 2, {CM, CK}},
        {"dtype_out_f32.h5", "out", H5T_IEEE_F32LE, 2, {CM, CN}},
        {"dtype_weight_ref_f32.h5", "weight_ref", H5T_IEEE_F32LE, 1, {CN, 0}},
    };
    expect_swaps_rejected(cases, sizeof cases / sizeof cases[0]);
}

static void test_wrong_shapes(void **state)
{
    (void)state;
    const struct dataset_swap cases[] = {
        {"shape_x_fp8_wide.h5", "x_fp8", H5T_STD_U8LE, 2, {CM, CK + 32, 0}},
        {"shape_x_fp8_rank3.h5", "x_fp8", H5T_STD_U8LE, 3, {CM, CK, 1}},
        {"shape_x_fp8_rank1.h5", "x_fp8", H5T_STD_U8LE, 1, {CM * CK, 0, 0}},
        {"shape_x_scale_long.h5", "x_scale", H5T_IEEE_F32LE, 1, {CM + 1, 0, 0}},
        {"shape_weight_unpacked.h5", "weight", H5T_STD_U8LE, 2, {CN, CK, 0}},
        {"shape_weight_half_n.h5", "weight", H5T_STD_U8LE, 2, {CN / 2, CK, 0}},
        {"shape_weight_scale_k16.h5", "weight_scale", H5T_STD_U8LE, 2, {CN, CK / 16, 0}},
        {"shape_weight_ref_3.h5", "weight_ref", H5T_STD_U8LE, 1, {3, 0, 0}},
        {"shape_x_fp8_zero.h5", "x_fp8", H5T_STD_U8LE, 2, {0, CK, 0}},
        {"shape_weight_zero.h5", "weight", H5T_STD_U8LE, 2, {CN, 0, 0}},
    };
    expect_swaps_rejected(cases, sizeof cases / sizeof cases[0]);
}

static void test_bad_dims(void **state)
{
    (void)state;
    struct { const char *name, *attr; long long v; } cases[] = {
        {"dims_M_zero.h5", "M", 0},
        {"dims_N_zero.h5", "N", 0},
        {"dims_K_zero.h5", "K", 0},
        {"dims_M_negative.h5", "M", -2},
        {"dims_K_not_32.h5", "K", 48},
        {"dims_M_2p40.h5", "M", 1LL << 40},
        /* M*K = 2^61 * 64 overflows int64 */
        {"dims_MK_overflow.h5", "M", 1LL << 61},
        {"dims_N_max.h5", "N", 0x7fffffffffffffffLL},
        {"dims_K_overflow.h5", "K", 0x7fffffffffffffe0LL},
    };
    char path[1200];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        derive(path, sizeof path, cases[i].name);
        set_attr_i64(path, cases[i].attr, cases[i].v);
        expect_error_on("replay", path);
        expect_error_on("inspect", path);
    }
    /* Zero sizes everywhere: M = 0 and every M-sized dataset empty. */
    derive(path, sizeof path, "dims_all_zero_M.h5");
    set_attr_i64(path, "M", 0);
    hsize_t d2[2] = {0, CK}, d1[1] = {0};
    replace_dataset(path, "x_fp8", H5T_STD_U8LE, 2, d2);
    replace_dataset(path, "x", H5T_IEEE_F32LE, 2, d2);
    replace_dataset(path, "x_scale", H5T_IEEE_F32LE, 1, d1);
    expect_error_on("replay", path);
}

/* Valid input that is poisoned: exit 0 or 1, the verdict POISONED_INPUT. */
static void expect_poisoned(const char *path)
{
    char args[4096], *out = NULL;
    snprintf(args, sizeof args, "replay --json '%s'", path);
    int rc = test_run_kreplay(args, &out);
    if ((rc != 0 && rc != 1) || !strstr(out, "POISONED_INPUT"))
        fprintf(stderr, "kreplay %s: exit %d\n%.4000s\n", args, rc, out);
    assert_clean_output(out);
    assert_true(rc == 0 || rc == 1);
    assert_non_null(strstr(out, "POISONED_INPUT"));
    free(out);
    snprintf(args, sizeof args, "inspect '%s'", path);
    rc = test_run_kreplay(args, &out);
    assert_clean_output(out);
    assert_true(rc == 0 || rc == 1);
    free(out);
}

static void test_nan_inf_everywhere(void **state)
{
    (void)state;
    char path[1200];
    derive(path, sizeof path, "nan_x.h5");
    fill_f32(path, "x", NAN);
    fill_u8(path, "x_fp8", 0x7f);   /* e4m3fn NaN */
    expect_poisoned(path);
    derive(path, sizeof path, "inf_x.h5");
    fill_f32(path, "x", INFINITY);
    expect_poisoned(path);
    derive(path, sizeof path, "nan_x_scale.h5");
    fill_f32(path, "x_scale", NAN);
    fill_f32(path, "x", NAN);
    expect_poisoned(path);
    derive(path, sizeof path, "inf_x_scale.h5");
    fill_f32(path, "x_scale", INFINITY);
    fill_f32(path, "x", -INFINITY);
    expect_poisoned(path);
    derive(path, sizeof path, "nan_everything.h5");
    fill_f32(path, "x", NAN);
    fill_u8(path, "x_fp8", 0xff);   /* e4m3fn -NaN */
    fill_f32(path, "x_scale", NAN);
    fill_u8(path, "weight_scale", 0xff);   /* e8m0 NaN */
    expect_poisoned(path);
}

/* No report.html / results.json claiming a complete run in DIR: both absent,
 * or results.json marked incomplete ("incomplete": true at the top) or
 * holding a row that names the bad input. */
static int json_names(json_t *v, const char *needle)
{
    if (json_is_string(v))
        return strstr(json_string_value(v), needle) != NULL;
    if (json_is_array(v)) {
        size_t i;
        json_t *x;
        json_array_foreach(v, i, x) if (json_names(x, needle)) return 1;
    }
    if (json_is_object(v)) {
        const char *k;
        json_t *x;
        json_object_foreach(v, k, x) if (json_names(x, needle)) return 1;
    }
    return 0;
}

static void assert_no_complete_report(const char *dir, const char *bad)
{
    char json[1400], html[1400];
    snprintf(json, sizeof json, "%s/results.json", dir);
    snprintf(html, sizeof html, "%s/report.html", dir);
    if (!exists(json) && !exists(html))
        return;
    int marked = 0;
    json_t *root = exists(json) ? json_load_file(json, 0, NULL) : NULL;
    if (root) {
        const char *base = strrchr(bad, '/');
        base = base ? base + 1 : bad;
        marked = json_is_true(json_object_get(root, "incomplete")) ||
                 json_names(json_object_get(root, "results"), base);
        json_decref(root);
    }
    if (!marked) {
        fprintf(stderr, "%s holds a report that looks complete (results.json %s, not marked "
                "incomplete nor naming %s)\n", dir, exists(json) ? "present" : "absent", bad);
        fail();
    }
}

static void test_partial_reports(void **state)
{
    (void)state;
    char bad[1200], dir[1200], args[4096];
    corpus_path(bad, sizeof bad, "partial_bad.h5");
    copy_file(g_good, bad, file_size(g_good) / 2);
    /* the bad case first, then last */
    corpus_path(dir, sizeof dir, "partial_out_first");
    snprintf(args, sizeof args, "replay -o '%s' '%s' '%s'", dir, bad, g_good);
    expect_error(args, bad);
    assert_no_complete_report(dir, bad);
    corpus_path(dir, sizeof dir, "partial_out_last");
    snprintf(args, sizeof args, "replay -o '%s' '%s' '%s'", dir, g_good, bad);
    expect_error(args, bad);
    assert_no_complete_report(dir, bad);
}

static void test_unwritable_output(void **state)
{
    (void)state;
    char file[1200], dir[1400], args[4096];
    /* A path under a regular file: ENOTDIR even for root. */
    corpus_path(file, sizeof file, "a_regular_file");
    write_text(file, "x\n");
    snprintf(dir, sizeof dir, "%s/out", file);
    snprintf(args, sizeof args, "replay -o '%s' '%s'", dir, g_good);
    expect_error(args, dir);
    snprintf(args, sizeof args, "gate '%s' -o '%s'", DEFAULT_SUITE, dir);
    expect_error(args, dir);
    char h5[1400];
    snprintf(h5, sizeof h5, "%s/x.h5", file);
    snprintf(args, sizeof args, "import '%s' -o '%s'", PT_FIXTURE, h5);
    expect_error(args, h5);
    /* /proc refuses new files to everyone. */
    snprintf(args, sizeof args, "replay -o /proc/kreplay-malformed-out '%s'", g_good);
    expect_error(args, "/proc/kreplay-malformed-out");
}

/* dump.pt with its data.pkl replaced by `pkl` (n bytes). */
static void pt_with_pickle(const char *path, const void *pkl, size_t n)
{
    copy_file(PT_FIXTURE, path, -1);
    int ze = 0;
    zip_t *z = zip_open(path, 0, &ze);
    assert_non_null(z);
    zip_source_t *src = zip_source_buffer(z, pkl, n, 0);
    assert_non_null(src);
    assert_true(zip_file_add(z, "dump/data.pkl", src, ZIP_FL_OVERWRITE) >= 0);
    assert_int_equal(zip_close(z), 0);
}

static void expect_import_error(const char *pt, const char *name)
{
    char h5[1400], args[4096];
    snprintf(h5, sizeof h5, "%s/%s.h5", g_dir, name);
    snprintf(args, sizeof args, "import '%s' -o '%s'", pt, h5);
    expect_error(args, pt);
    assert_false(exists(h5));
    expect_error_on("replay", pt);
}

static void test_bad_pt(void **state)
{
    (void)state;
    char path[1200];
    /* the fixture must be what pt_with_pickle expects */
    int ze = 0;
    zip_t *z = zip_open(PT_FIXTURE, ZIP_RDONLY, &ze);
    assert_non_null(z);
    assert_true(zip_name_locate(z, "dump/data.pkl", 0) >= 0);
    zip_close(z);

    static const unsigned char garbage[] = "\x80\x02this is not a pickle\xff\xfe";
    static const unsigned char no_stop[] = {0x80, 0x02, '}', 'q', 0x00};  /* PROTO 2, EMPTY_DICT, BINPUT, no STOP */
    static const unsigned char not_dict[] = {0x80, 0x02, 'K', 0x05, '.'};  /* the int 5 */
    static const unsigned char empty_dict[] = {0x80, 0x02, '}', '.'};
    const struct { const char *name; const unsigned char *pkl; size_t n; } pickles[] = {
        {"pt_garbage_pickle", garbage, sizeof garbage - 1},
        {"pt_pickle_no_stop", no_stop, sizeof no_stop},
        {"pt_pickle_int", not_dict, sizeof not_dict},
        {"pt_pickle_empty_dict", empty_dict, sizeof empty_dict},
        {"pt_empty_pickle", (const unsigned char *)"", 0},
    };
    for (size_t i = 0; i < sizeof pickles / sizeof pickles[0]; i++) {
        snprintf(path, sizeof path, "%s/%s.pt", g_dir, pickles[i].name);
        pt_with_pickle(path, pickles[i].pkl, pickles[i].n);
        expect_import_error(path, pickles[i].name);
    }

    long size = file_size(PT_FIXTURE);
    const long keep[] = {0, 30, 1000, -2};
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++) {
        long k = keep[i] == -2 ? size - 22 : keep[i];   /* -2: no end-of-central-directory */
        char name[64];
        snprintf(name, sizeof name, "pt_truncated_%ld", k);
        char p[1200];
        snprintf(p, sizeof p, "%s/%s.pt", g_dir, name);
        copy_file(PT_FIXTURE, p, k);
        expect_import_error(p, name);
    }
    corpus_path(path, sizeof path, "pt_text.pt");
    write_text(path, "not a zip\n");
    expect_import_error(path, "pt_text");
}

static void test_bad_suites(void **state)
{
    (void)state;
    struct { const char *name, *text; } cases[] = {
        {"suite_unknown_key.yaml", "suite: s\ncases:\n  - synth: {shapes: [64x128], m: [1]}\nfrobnicate: 3\n"},
        {"suite_unknown_nested_key.yaml", "suite: s\ncases:\n  - synth: {shapes: [64x128], m: [1], colour: red}\n"},
        {"suite_no_cases.yaml", "suite: s\n"},
        {"suite_empty.yaml", ""},
        {"suite_syntax.yaml", "suite: [s\ncases: {\n"},
        {"suite_unknown_shape.yaml", "suite: s\ncases:\n  - synth: {shapes: [no_such_layer], m: [1]}\n"},
        {"suite_zero_shape.yaml", "suite: s\ncases:\n  - synth: {shapes: [0x128], m: [1]}\n"},
        {"suite_overflow_shape.yaml", "suite: s\ncases:\n  - synth: {shapes: [9223372036854775807x9223372036854775807], m: [1]}\n"},
        {"suite_zero_m.yaml", "suite: s\ncases:\n  - synth: {shapes: [64x128], m: [0]}\n"},
        {"suite_huge_m.yaml", "suite: s\ncases:\n  - synth: {shapes: [64x128], m: [99999999999999999999]}\n"},
        {"suite_no_files.yaml", "suite: s\ncases:\n  - files: [\"nothing_here_*.h5\"]\n"},
        {"suite_bad_kernel.yaml", "suite: s\ncases:\n  - synth: {shapes: [64x128], m: [1]}\nkernels: [\"nosuch.*\"]\n"},
        /* a cycle: the suite names itself as its policy */
        {"suite_self_policy.yaml", "suite: s\ncases:\n  - synth: {shapes: [64x128], m: [1]}\npolicy: suite_self_policy.yaml\n"},
        {"suite_anchor_alias.yaml", "suite: &a s\ncases: *a\n"},
    };
    char path[1200], dir[1400], args[4096];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        corpus_path(path, sizeof path, cases[i].name);
        write_text(path, cases[i].text);
        snprintf(dir, sizeof dir, "%s.run", path);
        snprintf(args, sizeof args, "gate '%s' -o '%s'", path, dir);
        expect_error(args, path);
        assert_no_complete_report(dir, path);
    }
    /* A suite over a directory holding one bad case among good ones. */
    char cdir[1200];
    corpus_path(cdir, sizeof cdir, "suite_cases");
    assert_int_equal(mkdir(cdir, 0755), 0);
    char good[1400], bad[1400];
    snprintf(good, sizeof good, "%s/a_good.h5", cdir);
    snprintf(bad, sizeof bad, "%s/b_truncated.h5", cdir);
    copy_file(g_good, good, -1);
    copy_file(g_good, bad, file_size(g_good) / 2);
    corpus_path(path, sizeof path, "suite_bad_case.yaml");
    write_text(path, "suite: s\ncases:\n  - files: [\"suite_cases/*.h5\"]\nreruns: 1\n");
    snprintf(dir, sizeof dir, "%s.run", path);
    snprintf(args, sizeof args, "gate '%s' -o '%s'", path, dir);
    expect_error(args, bad);
    assert_no_complete_report(dir, bad);
}

KR_TEST_MAIN_SETUP(setup, NULL,
    test_good_case_is_good, test_truncated, test_wrong_dtypes, test_wrong_shapes, test_bad_dims,
    test_nan_inf_everywhere, test_partial_reports, test_unwritable_output, test_bad_pt,
    test_bad_suites);
