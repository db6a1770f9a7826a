/* Case files (harness/case/case_io.h, cases/SCHEMA.md): the reader's refusal
 * of every kind of malformed file with a one-line message naming file and
 * dataset, and the weight_bf16 dataset (round trip, alone, malformed,
 * validated).  Malformed files are built with the HDF5 C API directly
 * (support/raw_h5.c), never with the writer, which refuses to make them.
 * Round trips, accepted layouts and the writer's safety: test_case_io.c. */
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

/* ---------------------------------------------------- reader: what it refuses */

static void test_bad_missing_weight(void **st)
{
    (void)st;
    raw_t r;
    raw_default_without(&r, "weight");
    raw_expect_fail(&r, "bad-noweight", "weight: ", "missing", "[48, 32]");
}

static void test_bad_missing_weight_scale(void **st)
{
    (void)st;
    raw_t r;
    raw_default_without(&r, "weight_scale");
    raw_expect_fail(&r, "bad-noscale", "weight_scale: ", "missing", NULL);
}

static void test_bad_weight_dtype(void **st)
{
    (void)st;
    raw_t r;
    raw_default(&r, M0, N0, K0);
    raw_ds(&r, "weight")->type = H5T_IEEE_F32LE;
    raw_expect_fail(&r, "bad-wf32", "weight: wrong dtype", "found [48, 32] float32", NULL);
    raw_default(&r, M0, N0, K0);
    raw_ds(&r, "weight")->type = H5T_STD_I8LE;   /* sign matters */
    raw_expect_fail(&r, "bad-wi8", "weight: wrong dtype", "int8", NULL);
    raw_default(&r, M0, N0, K0);
    raw_ds(&r, "weight_scale")->type = H5T_STD_U16LE;
    raw_expect_fail(&r, "bad-wsu16", "weight_scale: wrong dtype", "uint16", NULL);
}

static void test_bad_weight_shape(void **st)
{
    (void)st;
    raw_t r;
    raw_default(&r, 3, 17, 5120);
    raw_ds(&r, "weight")->dims[1] = 2561;
    char path[512], want[1024];
    test_tmp_path(path, sizeof path, "bad-wshape");
    raw_write(path, &r, 11);
    case_t c;
    kr_error_t err;
    assert_int_equal(case_read(path, &c, &err), -1);
    /* The whole message, to pin the format down. */
    snprintf(want, sizeof want,
             "%s: weight: wrong shape; expected [17, 2560] (N, K/2) uint8, found [17, 2561] uint8",
             path);
    assert_string_equal(err.msg, want);
    unlink(path);

    raw_default(&r, M0, N0, K0);
    raw_ds(&r, "weight")->rank = 1;
    raw_ds(&r, "weight")->dims[0] = N0 * K0 / 2;
    raw_expect_fail(&r, "bad-wrank", "weight: wrong shape", "found [1536] uint8", NULL);
}

static void test_bad_weight_scale_layout(void **st)
{
    (void)st;
    raw_t r;
    /* Shape [N, K/32] while the attribute claims [K/32, N]. */
    raw_default(&r, M0, N0, K0);
    raw_ds(&r, "weight_scale")->attr[0][1] = "K/32,N";
    raw_expect_fail(&r, "bad-layout-shape", "weight_scale: wrong shape",
                    "expected [2, 48] (K/32, N) uint8, found [48, 2] uint8", NULL);
    raw_default(&r, M0, N0, K0);
    raw_ds(&r, "weight_scale")->attr[0][0] = NULL;
    raw_expect_fail(&r, "bad-layout-missing", "weight_scale: ", "layout missing", "\"N,K/32\"");
    raw_default(&r, M0, N0, K0);
    raw_ds(&r, "weight_scale")->attr[0][1] = "N,K";
    raw_expect_fail(&r, "bad-layout-unknown", "weight_scale: ", "\"N,K\" is unknown", NULL);
}

static void test_bad_x_u16_without_dtype(void **st)
{
    (void)st;
    raw_t r;
    raw_default(&r, M0, N0, K0);
    raw_ds(&r, "x")->attr[0][0] = NULL;
    raw_expect_fail(&r, "bad-xnodtype", "x: ", "without attribute dtype", "bfloat16");
    raw_default(&r, M0, N0, K0);
    raw_ds(&r, "x")->attr[0][1] = "float16";
    raw_expect_fail(&r, "bad-xfp16", "x: ", "\"float16\"", "bfloat16");
    raw_default(&r, M0, N0, K0);
    raw_ds(&r, "x")->type = H5T_IEEE_F64LE;
    raw_expect_fail(&r, "bad-xf64", "x: wrong dtype", "float64", NULL);
}

static void test_bad_x_pairing(void **st)
{
    (void)st;
    raw_t r;
    raw_default_without(&r, "x_scale");
    raw_expect_fail(&r, "bad-noxscale", "x_scale: ", "missing while x_fp8 is present", NULL);
    raw_default_without(&r, "x_fp8");
    raw_expect_fail(&r, "bad-noxfp8", "x_fp8: ", "missing while x_scale is present", NULL);
    raw_default_without(&r, "x");
    raw_ds(&r, "x_fp8")->present = 0;
    raw_ds(&r, "x_scale")->present = 0;
    raw_expect_fail(&r, "bad-nox", "x: neither x nor x_fp8", NULL, NULL);
    raw_default(&r, M0, N0, K0);
    raw_ds(&r, "x_scale")->dims[0] = M0 + 1;
    raw_expect_fail(&r, "bad-xscale-shape", "x_scale: wrong shape", "expected [5]", NULL);
    raw_default(&r, M0, N0, K0);
    raw_ds(&r, "x_fp8")->attr[0][1] = "e5m2";
    raw_expect_fail(&r, "bad-fp8fmt", "x_fp8: ", "\"e5m2\" is unknown", NULL);
}

static void test_bad_dims(void **st)
{
    (void)st;
    raw_t r;
    raw_default(&r, M0, N0, 48);
    raw_expect_fail(&r, "bad-k48", "K: ", "K=48 is not a multiple of 32", NULL);
    raw_default(&r, 0, N0, K0);
    raw_expect_fail(&r, "bad-m0", "M: ", "M=0 is not positive", NULL);
    raw_default(&r, M0, N0, K0);
    r.N = -32;
    raw_expect_fail(&r, "bad-nneg", "N: ", "N=-32", NULL);
    raw_default(&r, M0, N0, K0);
    r.have_K = 0;
    raw_expect_fail(&r, "bad-nok", "K: ", "missing", NULL);
    raw_default(&r, M0, N0, K0);
    r.dim_type = H5T_IEEE_F64LE;
    raw_expect_fail(&r, "bad-mfloat", "M: ", "float64", "integer");
}

/* Header values whose products overflow, or are merely absurd, must be
 * refused before any allocation (the datasets themselves are tiny). */
static void test_bad_dims_overflow(void **st)
{
    (void)st;
    raw_t r;
    const int64_t big = INT64_C(1) << 40;
    raw_default(&r, M0, N0, K0);
    r.M = big;
    r.K = big;
    raw_expect_fail(&r, "bad-ovf", "M, K: ", "more than 2^40 elements", NULL);
    raw_default(&r, M0, N0, K0);
    r.N = INT64_MAX - 31;
    r.K = 64;
    raw_expect_fail(&r, "bad-ovf2", "N, K: ", "more than 2^40", NULL);
    /* 2^20 x 2^20 is exactly at the cap: allowed, so the small datasets'
     * shapes are what is refused. */
    raw_default(&r, M0, N0, K0);
    r.M = INT64_C(1) << 20;
    r.K = INT64_C(1) << 20;
    raw_expect_fail(&r, "bad-big", "weight: wrong shape", "expected [48, 524288]", NULL);
}

static void test_bad_schema(void **st)
{
    (void)st;
    raw_t r;
    raw_default(&r, M0, N0, K0);
    r.schema = NULL;
    raw_expect_fail(&r, "bad-noschema", "schema: ", "missing", CASE_SCHEMA_V1);
    raw_default(&r, M0, N0, K0);
    r.schema = "kreplay.case/2";
    raw_expect_fail(&r, "bad-schema2", "schema: ", "\"kreplay.case/2\" is not a supported",
                    NULL);
}

static void test_bad_weight_ref_and_outputs(void **st)
{
    (void)st;
    raw_t r;
    raw_default(&r, M0, N0, K0);
    raw_ds(&r, "weight_ref")->dims[0] = 3;
    raw_expect_fail(&r, "bad-ref3", "weight_ref: ", "length 3 is not a known route", "[48]");
    raw_default(&r, M0, N0, K0);
    raw_ds(&r, "weight_ref")->rank = 2;
    raw_ds(&r, "weight_ref")->dims[1] = 1;
    raw_expect_fail(&r, "bad-ref2d", "weight_ref: wrong shape", "found [48, 1]", NULL);
    raw_default(&r, M0, N0, K0);
    raw_ds(&r, "out")->dims[1] = N0 + 1;
    raw_expect_fail(&r, "bad-outshape", "out: wrong shape",
                    "expected [5, 48] (M, N) bf16 bits as uint16, found [5, 49] uint16", NULL);
    raw_default(&r, M0, N0, K0);
    raw_ds(&r, "aiter")->type = H5T_IEEE_F32LE;   /* strict: bf16 bits only */
    raw_expect_fail(&r, "bad-aiterf32", "aiter: wrong dtype", "float32", NULL);
    raw_default(&r, M0, N0, K0);
    raw_ds(&r, "out_rerun")->attr[0][0] = NULL;
    raw_expect_fail(&r, "bad-rerun-nodtype", "out_rerun: ", "dtype", NULL);
}

static void test_bad_fragment_dims(void **st)
{
    (void)st;
    raw_t r;
    raw_default(&r, M0, 40, K0);
    raw_ds(&r, "weight")->attr[0][1] = "fragment";
    raw_expect_fail(&r, "bad-frag", "weight: ", "N=40", "N % 16 == 0");
    raw_default(&r, M0, N0, K0);
    raw_ds(&r, "weight")->attr[0][1] = "shuffled";
    raw_expect_fail(&r, "bad-order", "weight: ", "\"shuffled\" is unknown", NULL);
}

static void test_bad_weight_is_group(void **st)
{
    (void)st;
    raw_t r;
    raw_default_without(&r, "weight");
    char path[512];
    test_tmp_path(path, sizeof path, "bad-wgroup");
    raw_write(path, &r, 12);
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    assert_true(f >= 0);
    hid_t g = H5Gcreate2(f, "weight", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(g >= 0);
    H5Gclose(g);
    H5Fclose(f);
    expect_read_fail(path, "weight: ", "not a dataset", NULL);
    unlink(path);
}
static void test_bad_truncated(void **st)
{
    (void)st;
    char path[512];
    test_tmp_path(path, sizeof path, "bad-trunc");
    write_valid(path, 13);
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    assert_int_equal(truncate(path, sb.st_size / 2), 0);
    expect_read_fail(path, "truncated", NULL, NULL);
    /* Cut inside the header region too. */
    assert_int_equal(truncate(path, 700), 0);
    expect_read_fail(path, NULL, NULL, NULL);
    unlink(path);
}

/* A valid case written to a fresh file named after TAG (its path in
 * path[512]); returns its bytes (malloc'd), their count in *len. */
static char *valid_file_bytes(char *path, const char *tag, uint64_t seed, size_t *len)
{
    test_tmp_path(path, 512, tag);
    write_valid(path, seed);
    return slurp(path, len);
}

/* A file cut short whose superblock's end-of-file address was patched to
 * match: HDF5 opens it and would read the lost data as zeros. */
static void test_bad_truncated_patched_eoa(void **st)
{
    (void)st;
    char path[512];
    size_t len;
    char *buf = valid_file_bytes(path, "bad-trunc-eoa", 19, &len);
    /* Superblock v0 (what EARLIEST bounds give): 8-byte addresses, the
     * end-of-file address at byte 40. */
    assert_int_equal(buf[8], 0);
    assert_int_equal(buf[13], 8);
    uint64_t n = (uint64_t)len - 2000;
    for (int i = 0; i < 8; i++)
        buf[40 + i] = (char)(n >> (8 * i));
    expect_bytes_refused(path, buf, (size_t)n, "aiter: ", "beyond the end of the file",
                         "truncated");
    free(buf);
    unlink(path);
}

/* Clobbers the first occurrence of sig (an HDF5 metadata signature). */
static int clobber(char *buf, size_t len, const char *sig)
{
    size_t n = strlen(sig);
    for (size_t i = 0; i + n <= len; i++)
        if (memcmp(buf + i, sig, n) == 0) {
            memset(buf + i, 'X', n);
            return 1;
        }
    return 0;
}

static void test_bad_corrupt_header(void **st)
{
    (void)st;
    char path[512];
    size_t len;
    char *orig = valid_file_bytes(path, "bad-corrupt", 14, &len);
    /* The root group's B-tree, symbol-table node and name heap: without
     * them no dataset can be found. */
    const char *sigs[] = {"TREE", "SNOD", "HEAP"};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        char *buf = malloc(len);
        assert_non_null(buf);
        memcpy(buf, orig, len);
        assert_true(clobber(buf, len, sigs[i]));
        expect_bytes_refused(path, buf, len, "corrupt", NULL, NULL);
        free(buf);
    }
    /* The superblock signature: no longer an HDF5 file at all. */
    orig[1] = 'X';
    expect_bytes_refused(path, orig, len, "not an HDF5 file", NULL, NULL);
    free(orig);
    unlink(path);
}

static void test_bad_not_hdf5(void **st)
{
    (void)st;
    char path[512];
    test_tmp_path(path, sizeof path, "bad-text");
    const char *text = "M,N,K\n5,48,64\nthis is a CSV file, not a case\n";
    expect_bytes_refused(path, text, strlen(text), "file: ", "not an HDF5 file", NULL);
    expect_bytes_refused(path, "", 0, "not an HDF5 file", NULL, NULL);
    unlink(path);
}

static void test_bad_nonexistent(void **st)
{
    (void)st;
    char path[512];
    test_tmp_path(path, sizeof path, "does-not-exist");
    expect_read_fail(path, "file: ", "cannot open", "No such file");
    char dir[512];
    test_tmp_path(dir, sizeof dir, "a-directory");
    assert_int_equal(mkdir(dir, 0700), 0);
    expect_read_fail(dir, "is a directory", NULL, NULL);
    rmdir(dir);
}

/* ------------------------------------------------------------ weight_bf16 */

static void test_round_trip_weight_bf16(void **st)
{
    (void)st;
    /* A bf16-only layer: no MXFP4 weight, no fp8 operands, no route. */
    case_spec_t s1 = {.M = 6, .N = 48, .K = 256, .x_storage = X_STORED_BF16,
                      .with_bf16_weight = 1, .no_mxfp4 = 1, .with_outputs = 1, .with_prov = 1};
    round_trip(&s1, 31, "rt-bf16only");
    /* Both weights, with every MXFP4 option that could interfere. */
    case_spec_t s2 = {.M = 3, .N = 32, .K = 96, .layout = SCALE_LAYOUT_KN,
                      .x_storage = X_STORED_F32, .with_fp8 = 1, .order = WEIGHT_ORDER_FRAGMENT,
                      .ref_len = 32, .with_outputs = 1, .with_bf16_weight = 1};
    round_trip(&s2, 32, "rt-both");

    /* The bf16-only file holds no MXFP4 datasets at all, and says bfloat16. */
    char path[512];
    test_tmp_path(path, sizeof path, "rt-bf16only-h5");
    case_t a;
    kr_error_t err = {{0}};
    make_case(&a, &s1, 33);
    assert_int_equal(case_write(path, &a, &err), 0);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    assert_true(f >= 0);
    assert_int_equal(H5Lexists(f, "weight", H5P_DEFAULT), 0);
    assert_int_equal(H5Lexists(f, "weight_scale", H5P_DEFAULT), 0);
    assert_true(H5Lexists(f, "weight_bf16", H5P_DEFAULT) > 0);
    hid_t ds = H5Dopen2(f, "weight_bf16", H5P_DEFAULT);
    assert_true(ds >= 0);
    hid_t t = H5Dget_type(ds);
    assert_int_equal(H5Tget_class(t), H5T_INTEGER);
    assert_int_equal(H5Tget_size(t), 2);
    assert_int_equal(H5Tget_sign(t), H5T_SGN_NONE);
    H5Tclose(t);
    assert_true(H5Aexists(ds, "dtype") > 0);
    H5Dclose(ds);
    H5Fclose(f);
    case_free(&a);
    unlink(path);
}

/* The template with the MXFP4 weight replaced by weight_bf16 [N, K]. */
static raw_ds_t *raw_bf16_only(raw_t *r)
{
    raw_default_without(r, "weight");
    raw_ds(r, "weight_scale")->present = 0;
    raw_ds_t *d = raw_add(r, "weight_bf16", H5T_STD_U16LE, 2, N0, K0);
    d->attr[0][0] = "dtype", d->attr[0][1] = "bfloat16";
    return d;
}

static void test_reader_weight_bf16_only(void **st)
{
    (void)st;
    raw_t r;
    raw_ds_t *d = raw_bf16_only(&r);
    /* Big-endian on disk: the reader must convert, and the bits must survive. */
    uint16_t want[N0 * K0];
    uint8_t be[N0 * K0 * 2];
    test_rng_t rng = {34};
    for (int i = 0; i < N0 * K0; i++) {
        want[i] = (uint16_t)(1 + test_rng_u64(&rng) % 0xFFFF);
        be[2 * i] = (uint8_t)(want[i] >> 8);
        be[2 * i + 1] = (uint8_t)want[i];
    }
    d->type = H5T_STD_U16BE;
    d->data = be;
    char path[512];
    case_t c;
    raw_read_ok(&r, "raw-bf16only", 35, path, &c);
    assert_null(c.weight);
    assert_null(c.weight_scale);
    assert_non_null(c.weight_bf16);
    assert_memory_equal(c.weight_bf16, want, sizeof want);
    assert_non_null(c.weight_ref);   /* accepted (ignored by bf16 kernels) */
    kr_error_t err = {{0}};
    assert_int_equal(case_validate(&c, NULL, &err), 0);
    case_free(&c);
    unlink(path);
}

static void test_bad_no_weight_at_all(void **st)
{
    (void)st;
    raw_t r;
    raw_default_without(&r, "weight");
    raw_ds(&r, "weight_scale")->present = 0;
    raw_expect_fail(&r, "bad-noweights", "weight: ", "missing and no weight_bf16",
                    "weight_bf16 [48, 64]");
}

static void test_bad_weight_bf16(void **st)
{
    (void)st;
    raw_t r;
    raw_ds_t *d = raw_bf16_only(&r);
    d->dims[0] = K0, d->dims[1] = N0;       /* transposed */
    raw_expect_fail(&r, "bad-wbf16-shape", "weight_bf16: ", "wrong shape", "[48, 64]");

    d = raw_bf16_only(&r);
    d->rank = 1, d->dims[0] = N0 * K0;      /* flattened */
    raw_expect_fail(&r, "bad-wbf16-rank", "weight_bf16: ", "wrong shape", "found [3072]");

    d = raw_bf16_only(&r);
    d->attr[0][0] = NULL;                   /* no dtype attribute */
    raw_expect_fail(&r, "bad-wbf16-noattr", "weight_bf16: ", "without attribute dtype",
                    "bfloat16");

    d = raw_bf16_only(&r);
    d->attr[0][1] = "float16";
    raw_expect_fail(&r, "bad-wbf16-f16", "weight_bf16: ", "dtype = \"float16\"", NULL);

    d = raw_bf16_only(&r);
    d->type = H5T_IEEE_F32LE;               /* fp32 weights are not bf16 bits */
    raw_expect_fail(&r, "bad-wbf16-f32", "weight_bf16: ", "wrong dtype", "float32");

    /* A bad weight_bf16 is refused even beside a good MXFP4 weight. */
    raw_default(&r, M0, N0, K0);
    d = raw_add(&r, "weight_bf16", H5T_STD_U16LE, 2, N0, K0);
    raw_expect_fail(&r, "bad-wbf16-both", "weight_bf16: ", "without attribute dtype", NULL);
}

static void test_bad_mxfp4_half_pair(void **st)
{
    (void)st;
    raw_t r;
    /* weight_scale without weight: a bf16 weight does not excuse it. */
    raw_bf16_only(&r);
    raw_ds(&r, "weight_scale")->present = 1;
    raw_expect_fail(&r, "bad-scale-noweight", "weight: ", "while weight_scale is present", NULL);
    /* weight without weight_scale, beside a bf16 weight. */
    raw_bf16_only(&r);
    raw_ds(&r, "weight")->present = 1;
    raw_expect_fail(&r, "bad-weight-noscale", "weight_scale: ", "missing", NULL);
}

static void test_validate_weight_bf16(void **st)
{
    (void)st;
    case_spec_t s = {.M = 2, .N = 32, .K = 64, .x_storage = X_STORED_BF16,
                     .with_bf16_weight = 1, .no_mxfp4 = 1};
    case_t c;
    kr_error_t err = {{0}};
    make_case(&c, &s, 36);
    assert_int_equal(case_validate(&c, "mem", &err), 0);

    uint16_t *wb = c.weight_bf16;
    c.weight_bf16 = NULL;
    assert_int_equal(case_validate(&c, "mem", &err), -1);
    assert_non_null(strstr(err.msg, "mem: weight: missing and no weight_bf16"));
    /* The writer refuses it too, and leaves nothing behind. */
    char path[512];
    test_tmp_path(path, sizeof path, "val-noweights");
    assert_int_equal(case_write(path, &c, &err), -1);
    assert_non_null(strstr(err.msg, path));
    assert_non_null(strstr(err.msg, "weight: missing and no weight_bf16"));
    assert_int_equal(access(path, F_OK), -1);
    assert_int_equal(count_tmp_files(path), 0);
    c.weight_bf16 = wb;

    uint8_t scale[32 * 2] = {127};
    c.weight_scale = scale;
    assert_int_equal(case_validate(&c, "mem", &err), -1);
    assert_non_null(strstr(err.msg, "mem: weight: missing while weight_scale is present"));
    c.weight_scale = NULL;
    case_free(&c);
}

int main(void)
{
    /* The raw builder's own HDF5 failures are asserted, not printed. */
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    KR_RUN_TESTS(NULL, NULL,
        test_bad_missing_weight, test_bad_missing_weight_scale, test_bad_weight_dtype,
        test_bad_weight_shape, test_bad_weight_scale_layout, test_bad_x_u16_without_dtype,
        test_bad_x_pairing, test_bad_dims, test_bad_dims_overflow, test_bad_schema,
        test_bad_weight_ref_and_outputs, test_bad_fragment_dims, test_bad_weight_is_group,
        test_bad_truncated, test_bad_truncated_patched_eoa, test_bad_corrupt_header,
        test_bad_not_hdf5, test_bad_nonexistent, test_round_trip_weight_bf16,
        test_reader_weight_bf16_only, test_bad_no_weight_at_all, test_bad_weight_bf16,
        test_bad_mxfp4_half_pair, test_validate_weight_bf16);
}
