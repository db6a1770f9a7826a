/* Case files (harness/case/case_io.h, cases/SCHEMA.md): round trips through the
 * writer and reader, the layouts and plain arrays the reader accepts, the
 * validator, and the writer's atomicity.  The reader's refusals and the
 * weight_bf16 dataset are tested in test_case_io_refusals.c.  Files the
 * writer would not make are built with the HDF5 C API directly
 * (support/raw_h5.c); random cases come from support/case_files.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "case_files.h"
#include "case_image.h"
#include "case_io.h"
#include "case_mapping.h"
#include "formats.h"        /* f32_bits, f32_from_bits */
#include "raw_h5.h"
#include "test_cases.h"
#include "test_main.h"
#include "test_support.h"

/* ------------------------------------------------------------ round trips */

static void test_round_trip_nk_bf16_checkpoint(void **st)
{
    (void)st;
    case_spec_t s = {.M = 5, .N = 48, .K = 64, .layout = SCALE_LAYOUT_NK,
                     .x_storage = X_STORED_BF16, .with_fp8 = 1, .fp8_format = FP8_E4M3FN,
                     .order = WEIGHT_ORDER_CHECKPOINT, .ref_len = 48, .with_outputs = 1,
                     .with_prov = 1};
    round_trip(&s, 1, "rt-nk");
}

static void test_round_trip_kn_f32_fragment(void **st)
{
    (void)st;
    case_spec_t s = {.M = 3, .N = 32, .K = 96, .layout = SCALE_LAYOUT_KN,
                     .x_storage = X_STORED_F32, .with_fp8 = 1, .fp8_format = FP8_E4M3FNUZ,
                     .order = WEIGHT_ORDER_FRAGMENT, .ref_len = 2, .with_outputs = 1,
                     .with_prov = 1};
    round_trip(&s, 2, "rt-kn");
}

static void test_round_trip_minimal(void **st)
{
    (void)st;
    /* Only the kernel's operands: no x, no weight_ref, no outputs, no provenance. */
    case_spec_t s1 = {.M = 1, .N = 17, .K = 32, .layout = SCALE_LAYOUT_NK, .with_fp8 = 1};
    round_trip(&s1, 3, "rt-min1");
    /* Only x (no fp8 operands), aiter route (weight_ref of one byte). */
    case_spec_t s2 = {.M = 7, .N = 2, .K = 128, .layout = SCALE_LAYOUT_KN,
                      .x_storage = X_STORED_BF16, .ref_len = 1, .with_outputs = 1};
    round_trip(&s2, 4, "rt-min2");
}

/* x stored as bf16 is encoded from fp32 with round-to-nearest-even. */
static void test_write_bf16_rne(void **st)
{
    (void)st;
    char path[512];
    test_tmp_path(path, sizeof path, "rne");
    case_spec_t s = {.M = 1, .N = 2, .K = 32, .layout = SCALE_LAYOUT_NK,
                     .x_storage = X_STORED_F32};
    case_t a, b;
    kr_error_t err;
    make_case(&a, &s, 5);
    a.x_storage = X_STORED_BF16;
    const float in[6] = {
        f32_from_bits(0x3F808000u),  /* 1 + 2^-8: tie, rounds down to even 1.0 */
        f32_from_bits(0x3F818000u),  /* 1 + 3*2^-8: tie, rounds up to even 1 + 2^-6 */
        f32_from_bits(0x3F808001u),  /* just above the tie: up */
        f32_from_bits(0x7F7FFFFFu),  /* FLT_MAX: overflows to +Inf */
        -0.0f,
        f32_from_bits(0xFFC12345u),  /* negative NaN: quiet NaN with the sign */
    };
    const uint32_t want[6] = {0x3F800000u, 0x3F820000u, 0x3F810000u, 0x7F800000u,
                              0x80000000u, 0xFFC00000u};
    memcpy(a.x, in, sizeof in);
    assert_int_equal(case_write(path, &a, &err), 0);
    assert_int_equal(case_read(path, &b, &err), 0);
    assert_int_equal(b.x_storage, X_STORED_BF16);
    for (int i = 0; i < 6; i++)
        assert_int_equal(f32_bits(b.x[i]), want[i]);
    case_free(&a);
    case_free(&b);
    unlink(path);
}

/* Same case -> same bytes, even a second later (no object timestamps). */
static void test_write_reproducible(void **st)
{
    (void)st;
    char p1[512], p2[512];
    test_tmp_path(p1, sizeof p1, "repro");
    test_tmp_path(p2, sizeof p2, "repro");
    case_spec_t s = {.M = 4, .N = 32, .K = 64, .layout = SCALE_LAYOUT_KN,
                     .x_storage = X_STORED_BF16, .with_fp8 = 1, .ref_len = 32,
                     .with_outputs = 1, .with_prov = 1};
    case_t a;
    kr_error_t err;
    make_case(&a, &s, 6);
    assert_int_equal(case_write(p1, &a, &err), 0);
    sleep(1);   /* timestamps have one-second resolution */
    assert_int_equal(case_write(p2, &a, &err), 0);
    size_t l1, l2;
    char *b1 = slurp(p1, &l1), *b2 = slurp(p2, &l2);
    assert_int_equal(l1, l2);
    assert_memory_equal(b1, b2, l1);
    free(b1);
    free(b2);
    case_free(&a);
    unlink(p1);
    unlink(p2);
}

/* --------------------------------------------------- reader: what it accepts */

static void test_raw_template_is_valid(void **st)
{
    (void)st;
    raw_t r;
    raw_default(&r, M0, N0, K0);
    char path[512];
    case_t c;
    raw_read_ok(&r, "raw-ok", 8, path, &c);
    assert_int_equal(c.M, M0);
    assert_int_equal(c.weight_ref_len, N0);
    assert_non_null(c.x);
    assert_non_null(c.aiter);
    case_free(&c);
    unlink(path);
}

/* Everything the schema allows besides what the writer produces: fixed-length
 * strings, int32 dims, x_scale [M, 1], big-endian data, absent optional
 * attributes (defaults), unknown extra datasets. */
static void test_reader_accepts_variants(void **st)
{
    (void)st;
    raw_t r;
    raw_default(&r, 2, 32, 32);
    r.fixed_strings = 1;
    r.dim_type = H5T_STD_I32BE;
    raw_ds(&r, "x")->present = 0;
    raw_ds(&r, "out_rerun")->present = 0;
    raw_ds(&r, "aiter")->present = 0;
    raw_ds(&r, "weight_ref")->dims[0] = 2;
    raw_ds(&r, "x_fp8")->attr[0][0] = NULL;    /* format defaults to e4m3fn */
    raw_ds(&r, "weight")->attr[0][0] = NULL;   /* order defaults to checkpoint */
    raw_ds(&r, "weight_scale")->attr[0][1] = "K/32,N";
    raw_ds(&r, "weight_scale")->dims[0] = 1;
    raw_ds(&r, "weight_scale")->dims[1] = 32;
    /* x_scale as [M, 1], big-endian: 1.5 and -0.25. */
    static const uint8_t scale_be[8] = {0x3F, 0xC0, 0x00, 0x00, 0xBE, 0x80, 0x00, 0x00};
    raw_ds_t *xs = raw_ds(&r, "x_scale");
    xs->type = H5T_IEEE_F32BE;
    xs->rank = 2;
    xs->dims[1] = 1;
    xs->data = scale_be;
    /* out big-endian: element i = 0x1234 + i. */
    uint8_t out_be[2 * 32 * 2];
    for (int i = 0; i < 64; i++) {
        out_be[2 * i] = (uint8_t)((0x1234 + i) >> 8);
        out_be[2 * i + 1] = (uint8_t)(0x1234 + i);
    }
    raw_ds_t *o = raw_ds(&r, "out");
    o->type = H5T_STD_U16BE;
    o->data = out_be;
    raw_add(&r, "notes", H5T_STD_I32LE, 1, 3, 0);   /* unknown: ignored */

    char path[512];
    case_t c;
    raw_read_ok(&r, "raw-variants", 9, path, &c);
    assert_int_equal(c.M, 2);
    assert_int_equal(c.N, 32);
    assert_int_equal(c.K, 32);
    assert_null(c.x);
    assert_int_equal(c.x_storage, X_STORED_NONE);
    assert_int_equal(c.x_fp8_format, FP8_E4M3FN);
    assert_int_equal(c.weight_order, WEIGHT_ORDER_CHECKPOINT);
    assert_int_equal(c.scale_layout, SCALE_LAYOUT_KN);
    assert_int_equal(c.weight_ref_len, 2);
    assert_true(c.x_scale[0] == 1.5f);
    assert_true(c.x_scale[1] == -0.25f);
    for (int i = 0; i < 64; i++)
        assert_int_equal(c.out[i], 0x1234 + i);
    assert_null(c.out_rerun);
    assert_null(c.aiter);
    assert_null(c.kernel_path);
    case_free(&c);
    unlink(path);
}

/* float32 x is read as is, and its storage recorded. */
static void test_reader_x_float32(void **st)
{
    (void)st;
    raw_t r;
    raw_default(&r, 1, 16, 32);
    float xv[32];
    for (int i = 0; i < 32; i++)
        xv[i] = (float)i * 0.37f - 3.1f;
    raw_ds_t *x = raw_ds(&r, "x");
    x->type = H5T_NATIVE_FLOAT;
    x->attr[0][0] = NULL;
    x->data = xv;
    char path[512];
    case_t c;
    raw_read_ok(&r, "raw-xf32", 10, path, &c);
    assert_int_equal(c.x_storage, X_STORED_F32);
    assert_memory_equal(c.x, xv, sizeof xv);
    case_free(&c);
    unlink(path);
}

/* ------------------------------------------ reader: arrays left in the file */

/* Dataset `name` of the file read through HDF5 itself, converted to
 * `memtype` (the independent side of the mapping tests). */
static void *h5_read_whole(const char *path, const char *name, hid_t memtype, size_t bytes)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    assert_true(f >= 0);
    hid_t ds = H5Dopen2(f, name, H5P_DEFAULT);
    assert_true(ds >= 0);
    void *buf = malloc(bytes);
    assert_non_null(buf);
    assert_true(H5Dread(ds, memtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) >= 0);
    H5Dclose(ds);
    H5Fclose(f);
    return buf;
}

/* c's array `arr` holds what HDF5 reads from dataset `name`, and is left
 * in the mapped file (mapped = 1) or is the case's own copy (0). */
static void expect_array(const char *path, const case_t *c, const void *arr, const char *name,
                         hid_t memtype, size_t bytes, int mapped)
{
    void *want = h5_read_whole(path, name, memtype, bytes);
    assert_memory_equal(arr, want, bytes);
    free(want);
    if (case_owns(c, arr) == mapped)
        fail_msg("%s: %s %s, expected %s", path, name, mapped ? "was copied" : "was mapped",
                 mapped ? "mapped" : "copied");
}

/* What the file stores as the case uses it (contiguous, native byte order,
 * aligned) is used where the file is; a chunked dataset or one in the
 * other byte order is read and converted into the case's own buffer; with
 * a user block before the HDF5 data too.  Every array is compared with
 * HDF5's own read of the file. */
static void test_reader_maps_plain_arrays(void **st)
{
    (void)st;
    for (int ub = 0; ub < 2; ub++) {
        raw_t r;
        raw_default(&r, 6, 64, 128);
        r.userblock = ub ? 1024 : 0;
        float xv[6 * 128];
        for (int i = 0; i < 6 * 128; i++)
            xv[i] = (float)i * 0.37f - 3.1f;
        raw_ds_t *x = raw_ds(&r, "x");
        x->type = H5T_IEEE_F32LE;
        x->attr[0][0] = NULL;
        x->data = xv;
        raw_ds(&r, "weight_scale")->chunked = 1;
        raw_ds(&r, "out_rerun")->type = H5T_STD_U16BE;
        char path[512];
        case_t c;
        raw_read_ok(&r, ub ? "raw-map-ub" : "raw-map", 21, path, &c);
        const size_t MK = 6 * 128, MN = 6 * 64;
        expect_array(path, &c, c.x, "x", H5T_NATIVE_FLOAT, MK * 4, 1);
        expect_array(path, &c, c.x_fp8, "x_fp8", H5T_NATIVE_UINT8, MK, 1);
        expect_array(path, &c, c.x_scale, "x_scale", H5T_NATIVE_FLOAT, 6 * 4, 1);
        expect_array(path, &c, c.weight, "weight", H5T_NATIVE_UINT8, 64 * 64, 1);
        expect_array(path, &c, c.weight_scale, "weight_scale", H5T_NATIVE_UINT8, 64 * 4, 0);
        expect_array(path, &c, c.out, "out", H5T_NATIVE_UINT16, MN * 2, 1);
        expect_array(path, &c, c.out_rerun, "out_rerun", H5T_NATIVE_UINT16, MN * 2, 0);
        expect_array(path, &c, c.aiter, "aiter", H5T_NATIVE_UINT16, MN * 2, 1);
        /* A write to a mapped array stays in this process: the file keeps its bytes. */
        uint8_t *before = h5_read_whole(path, "weight", H5T_NATIVE_UINT8, 64 * 64);
        for (int i = 0; i < 64 * 64; i++)
            c.weight[i] ^= 0xA5;
        uint8_t *after = h5_read_whole(path, "weight", H5T_NATIVE_UINT8, 64 * 64);
        assert_memory_equal(before, after, 64 * 64);
        assert_int_equal(c.weight[7], before[7] ^ 0xA5);
        free(before);
        free(after);
        case_free(&c);
        assert_null(c.mapping.base);
        unlink(path);
    }
}

/* Read for an image, a file whose only plain array is its bf16 x (the rest
 * chunked) keeps its mapping: x's bits stay in it, and the image's reader
 * decodes them to what case_read gives. */
static void test_deferred_x_alone_keeps_its_mapping(void **st)
{
    (void)st;
    raw_t r;
    raw_default(&r, 4, 64, 128);
    const char *chunked[] = {"x_fp8", "x_scale", "weight", "weight_scale", "weight_ref", "out",
                             "out_rerun", "aiter"};
    for (size_t i = 0; i < sizeof chunked / sizeof chunked[0]; i++)
        raw_ds(&r, chunked[i])->chunked = 1;
    char path[512];
    case_t whole;
    raw_read_ok(&r, "raw-map-xonly", 24, path, &whole);
    case_t c;
    kr_error_t err = {{0}};
    if (case_read_for_image(path, &c, &err))
        fail_msg("%s", err.msg);
    assert_null(c.x);
    assert_non_null(c.x_bf16_in_file);
    assert_true(case_mapping_holds(&c.mapping, c.x_bf16_in_file, 4 * 128 * 2));
    assert_true(case_owns(&c, c.weight));
    int fd = case_image_open_anonymous(&err);
    assert_true(fd >= 0);
    assert_int_equal(case_image_write(fd, &c, CASE_IMAGE_CONSUME_SOURCE, &err), 0);
    case_t back;
    if (case_image_read(fd, &back, CASE_IMAGE_KEEP_SOURCE, path, path, &err))
        fail_msg("%s", err.msg);
    close(fd);
    assert_memory_equal(back.x, whole.x, 4 * 128 * sizeof(float));
    assert_memory_equal(back.weight, whole.weight, 64 * 64);
    case_free(&back);
    case_free(&whole);
    unlink(path);
}

/* A mapped case whose file is cut short under it: reading its arrays then
 * dies of SIGBUS, and kreplay's handler says why first. */
static void test_truncated_mapped_case_explained(void **st)
{
    (void)st;
    char path[512];
    case_t c;
    raw_default_read_ok(4, 64, 128, "raw-map-cut", 23, path, &c);
    assert_false(case_owns(&c, c.weight));
    int err_pipe[2];
    assert_int_equal(pipe(err_pipe), 0);
    fflush(NULL);
    const pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(err_pipe[1], STDERR_FILENO);
        close(err_pipe[0]);
        case_mapping_explain_bus_errors();
        if (truncate(path, 0) != 0)
            _exit(3);
        volatile uint8_t sink = c.weight[64 * 64 - 1];
        (void)sink;
        _exit(4);   /* not reached: the read faults */
    }
    close(err_pipe[1]);
    char text[512] = "";
    size_t got = 0;
    ssize_t n;
    while (got < sizeof text - 1 && (n = read(err_pipe[0], text + got, sizeof text - 1 - got)) > 0)
        got += (size_t)n;
    text[got] = '\0';
    close(err_pipe[0]);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGBUS)
        fail_msg("child status %#x, expected death by SIGBUS", status);
    assert_non_null(strstr(text, "bus error (SIGBUS): most likely a case file was cut short"));
    case_free(&c);
    unlink(path);
}

/* bf16 x is decoded into the case's own fp32 buffer (its bf16 bits stay
 * in the file). */
static void test_reader_decodes_bf16_x_from_the_file(void **st)
{
    (void)st;
    char path[512];
    case_t c;
    raw_default_read_ok(3, 32, 64, "raw-map-bf16", 22, path, &c);
    uint16_t *bits = h5_read_whole(path, "x", H5T_NATIVE_UINT16, 3 * 64 * 2);
    assert_true(case_owns(&c, c.x));
    for (int i = 0; i < 3 * 64; i++)
        assert_int_equal(f32_bits(c.x[i]), (uint32_t)bits[i] << 16);
    free(bits);
    case_free(&c);
    unlink(path);
}

/* ---------------------------------------------------------------- validate */

static void test_validate(void **st)
{
    (void)st;
    case_spec_t s = {.M = 2, .N = 32, .K = 64, .layout = SCALE_LAYOUT_NK,
                     .x_storage = X_STORED_F32, .with_fp8 = 1, .ref_len = 32};
    case_t c;
    kr_error_t err;
    make_case(&c, &s, 15);
    assert_int_equal(case_validate(&c, "mem", &err), 0);

    c.K = 48;
    assert_int_equal(case_validate(&c, "mem", &err), -1);
    assert_non_null(strstr(err.msg, "mem: K: K=48 is not a multiple of 32"));
    c.K = 64;

    c.weight_ref_len = 3;
    assert_int_equal(case_validate(&c, "mem", &err), -1);
    assert_non_null(strstr(err.msg, "weight_ref: length 3"));
    c.weight_ref_len = 32;

    c.weight_order = WEIGHT_ORDER_FRAGMENT;
    assert_int_equal(case_validate(&c, "mem", &err), 0);
    c.N = 24;
    c.weight_ref_len = 24;
    assert_int_equal(case_validate(&c, "mem", &err), -1);
    assert_non_null(strstr(err.msg, "weight: fragment order with N=24"));
    c.N = 32;
    c.weight_ref_len = 32;
    c.weight_order = WEIGHT_ORDER_CHECKPOINT;

    c.x_storage = X_STORED_NONE;
    assert_int_equal(case_validate(&c, "mem", &err), -1);
    assert_non_null(strstr(err.msg, "x: storage"));
    c.x_storage = X_STORED_F32;

    float *xs = c.x_scale;
    c.x_scale = NULL;
    assert_int_equal(case_validate(&c, "mem", &err), -1);
    assert_non_null(strstr(err.msg, "x_scale: missing while x_fp8"));
    c.x_scale = xs;

    uint8_t *w = c.weight;
    c.weight = NULL;
    assert_int_equal(case_validate(&c, "mem", &err), -1);
    assert_non_null(strstr(err.msg, "mem: weight: missing"));
    c.weight = w;

    c.M = INT64_C(1) << 40;
    assert_int_equal(case_validate(&c, "mem", &err), -1);
    assert_non_null(strstr(err.msg, "more than 2^40"));
    c.M = 2;

    int64_t p;
    assert_int_equal(case_mul_i64(INT64_C(1) << 32, INT64_C(1) << 31, &p), -1);
    assert_int_equal(case_mul_i64(INT64_C(1) << 31, INT64_C(1) << 31, &p), 0);
    assert_int_equal(p, INT64_C(1) << 62);
    assert_int_equal(case_mul_i64(-1, 2, &p), -1);

    case_free(&c);
    case_free(&c);   /* safe on a zeroed case */
}

/* ----------------------------------------------------------- writer safety */

static void test_write_atomic(void **st)
{
    (void)st;
    char path[512];
    kr_error_t err;
    case_spec_t s = {.M = 2, .N = 32, .K = 64, .layout = SCALE_LAYOUT_NK,
                     .x_storage = X_STORED_BF16, .with_fp8 = 1, .ref_len = 2,
                     .with_outputs = 1};
    case_t a, b, got;
    make_case(&a, &s, 16);
    make_case(&b, &s, 17);

    /* A directory that does not exist: clean failure, nothing created. */
    char dir[512], inside[600];
    test_tmp_path(dir, sizeof dir, "nodir");
    snprintf(inside, sizeof inside, "%s/case.h5", dir);
    assert_int_equal(case_write(inside, &a, &err), -1);
    assert_non_null(strstr(err.msg, inside));
    assert_non_null(strstr(err.msg, "cannot create"));
    assert_int_equal(access(dir, F_OK), -1);

    /* An existing file survives a failing write byte for byte. */
    test_tmp_path(path, sizeof path, "atomic");
    assert_int_equal(case_write(path, &a, &err), 0);
    size_t l0, l1;
    char *before = slurp(path, &l0);
    b.K = 48;
    assert_int_equal(case_write(path, &b, &err), -1);
    assert_non_null(strstr(err.msg, path));
    assert_non_null(strstr(err.msg, "K=48 is not a multiple of 32"));
    b.K = 64;
    char *after = slurp(path, &l1);
    assert_int_equal(l0, l1);
    assert_memory_equal(before, after, l0);
    free(after);
    assert_int_equal(count_tmp_files(path), 0);

    /* A successful write replaces it. */
    assert_int_equal(case_write(path, &b, &err), 0);
    assert_int_equal(case_read(path, &got, &err), 0);
    assert_memory_equal(got.weight, b.weight, (size_t)(b.N * b.K / 2));
    case_free(&got);
    assert_int_equal(count_tmp_files(path), 0);

    /* A target the rename cannot replace (a non-empty directory): the write
     * fails after the temporary file exists, which must then be removed. */
    char dpath[512], dfile[600];
    test_tmp_path(dpath, sizeof dpath, "atomic-dir");
    assert_int_equal(mkdir(dpath, 0700), 0);
    snprintf(dfile, sizeof dfile, "%s/keep", dpath);
    spit(dfile, "x", 1);
    assert_int_equal(case_write(dpath, &a, &err), -1);
    assert_non_null(strstr(err.msg, "rename"));
    assert_int_equal(count_tmp_files(dpath), 0);
    unlink(dfile);
    rmdir(dpath);

    free(before);
    case_free(&a);
    case_free(&b);
    unlink(path);
}

static void test_h5dump_sees_datasets(void **st)
{
    (void)st;
    if (system("command -v h5dump >/dev/null 2>&1") != 0)
        skip();
    char path[512], cmd[700];
    test_tmp_path(path, sizeof path, "h5dump");
    write_valid(path, 18);
    snprintf(cmd, sizeof cmd, "h5dump -H '%s' 2>&1", path);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t cap = 1 << 16, len = 0, got;
    char *out = malloc(cap);
    assert_non_null(out);
    while ((got = fread(out + len, 1, cap - 1 - len, p)) > 0)
        len += got;
    out[len] = '\0';
    assert_int_equal(pclose(p), 0);
    const char *want[] = {"DATASET \"weight\"", "DATASET \"weight_scale\"", "DATASET \"x\"",
                          "DATASET \"x_fp8\"", "DATASET \"x_scale\"", "DATASET \"weight_ref\"",
                          "DATASET \"out\"", "DATASET \"out_rerun\"", "DATASET \"aiter\"",
                          "ATTRIBUTE \"schema\"", "ATTRIBUTE \"layout\"", "H5T_STD_U8LE",
                          "( 256, 16 )"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!strstr(out, want[i]))
            fail_msg("h5dump -H lacks %s:\n%s", want[i], out);
    free(out);
    unlink(path);
}

int main(void)
{
    /* The raw builder's own HDF5 failures are asserted, not printed. */
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    KR_RUN_TESTS(NULL, NULL,
        test_round_trip_nk_bf16_checkpoint, test_round_trip_kn_f32_fragment,
        test_round_trip_minimal, test_write_bf16_rne, test_write_reproducible,
        test_raw_template_is_valid, test_reader_accepts_variants, test_reader_x_float32,
        test_reader_maps_plain_arrays, test_reader_decodes_bf16_x_from_the_file,
        test_truncated_mapped_case_explained, test_deferred_x_alone_keeps_its_mapping,
        test_validate, test_write_atomic, test_h5dump_sees_datasets);
}
