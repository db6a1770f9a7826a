/* ctest-labels: blas-bits */
/* torch.save files read in C (harness/case/torch_pt.c, pt_import.c, case_load.c),
 * against fixtures written by a real torch or, for the dtypes torch 1.13 lacks,
 * built by hand (scripts/fixtures/make_pt_fixtures.py, make_pt_dtype_fixtures.py),
 * and patched copies of them:
 *  - the dtypes added for the serve's dumps parse to the exact bits of their
 *    HDF5 twins, and those still unsupported are refused;
 *  - unsupported dtypes, opcodes and globals are refused naming the file and
 *    the offending name; truncated zips, a zip without data.pkl, a bad storage
 *    key, a record of the wrong size and a tensor larger than its storage are
 *    clear errors; every single-byte corruption and truncation of a real
 *    data.pkl fails cleanly or parses (run under ASan by KREPLAY_SANITIZE).
 * Every dtype, the dump, its replay and import: test_torch_pt.c. */
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

#include "case_io.h"
#include "case_load.h"
#include "pt_import.h"
#include "pt_fixtures.h"
#include "replay.h"
#include "test_main.h"
#include "test_support.h"
#include "torch_pt.h"

#define SUBSET "not in the supported torch.save subset"

/* ---- helpers ---- */

typedef struct {
    char name[256];
    uint8_t *data;
    size_t len;
} rec_t;

typedef struct {
    rec_t r[32];
    int n;
} zipset_t;

static void zs_load(const char *src, zipset_t *z)
{
    int code = 0;
    zip_t *za = zip_open(src, ZIP_RDONLY, &code);
    assert_non_null(za);
    memset(z, 0, sizeof *z);
    zip_int64_t n = zip_get_num_entries(za, 0);
    assert_true(n > 0 && n <= 32);
    for (zip_int64_t i = 0; i < n; i++) {
        zip_stat_t st;
        assert_int_equal(zip_stat_index(za, (zip_uint64_t)i, 0, &st), 0);
        rec_t *r = &z->r[z->n++];
        snprintf(r->name, sizeof r->name, "%s", st.name);
        r->len = (size_t)st.size;
        r->data = malloc(r->len + 1);
        zip_file_t *zf = zip_fopen_index(za, (zip_uint64_t)i, 0);
        assert_non_null(zf);
        assert_int_equal(zip_fread(zf, r->data, st.size), (zip_int64_t)st.size);
        zip_fclose(zf);
    }
    zip_discard(za);
}

static rec_t *zs_find(zipset_t *z, const char *suffix)
{
    size_t sl = strlen(suffix);
    for (int i = 0; i < z->n; i++) {
        size_t l = strlen(z->r[i].name);
        if (l >= sl && !strcmp(z->r[i].name + l - sl, suffix))
            return &z->r[i];
    }
    return NULL;
}

static void zs_set(rec_t *r, const void *data, size_t len)
{
    free(r->data);
    r->data = malloc(len ? len : 1);
    memcpy(r->data, data, len);
    r->len = len;
}

static void zs_save(const zipset_t *z, const char *dst)
{
    int code = 0;
    unlink(dst);
    zip_t *za = zip_open(dst, ZIP_CREATE | ZIP_TRUNCATE, &code);
    assert_non_null(za);
    for (int i = 0; i < z->n; i++) {
        if (!z->r[i].data)
            continue;   /* dropped */
        zip_source_t *s = zip_source_buffer(za, z->r[i].data, z->r[i].len, 0);
        assert_non_null(s);
        zip_int64_t idx = zip_file_add(za, z->r[i].name, s, ZIP_FL_ENC_UTF_8);
        assert_true(idx >= 0);
        zip_set_file_compression(za, (zip_uint64_t)idx, ZIP_CM_STORE, 0);
    }
    assert_int_equal(zip_close(za), 0);
}

static void zs_free(zipset_t *z)
{
    for (int i = 0; i < z->n; i++)
        free(z->r[i].data);
    memset(z, 0, sizeof *z);
}

/* Replaces the first occurrence of `from` in a record by `to`. */
static void zs_replace(rec_t *r, const void *from, size_t fl, const void *to, size_t tl)
{
    uint8_t *p = NULL;
    for (size_t i = 0; i + fl <= r->len; i++)
        if (!memcmp(r->data + i, from, fl)) {
            p = r->data + i;
            break;
        }
    assert_non_null(p);
    size_t at = (size_t)(p - r->data), nl = r->len - fl + tl;
    uint8_t *d = malloc(nl);
    memcpy(d, r->data, at);
    memcpy(d + at, to, tl);
    memcpy(d + at + tl, r->data + at + fl, r->len - at - fl);
    free(r->data);
    r->data = d;
    r->len = nl;
}

/* pt_open must fail; the message must name the file and each needle. */
static void expect_refused(const char *path, const char *n1, const char *n2)
{
    kr_error_t err = {{0}};
    pt_file_t *f = NULL;
    assert_int_equal(pt_open(path, &f, &err), -1);
    assert_null(f);
    assert_contains(err.msg, path);
    if (n1)
        assert_contains(err.msg, n1);
    if (n2)
        assert_contains(err.msg, n2);
    /* case_load takes the same path and gives the same line */
    case_t c;
    kr_error_t e2 = {{0}};
    assert_int_equal(case_load(path, &c, NULL, &e2), -1);
    assert_string_equal(e2.msg, err.msg);
    assert_null(c.x);
}

/* ---- the dtypes added for the serve's dumps ---- */

/* Parses `key` of an open .pt, checks its dtype, shape and bits against the
 * h5py twin (the raw bytes the generator held), and that the twin names the
 * same torch dtype. */
static void expect_twin(pt_file_t *f, hid_t h5, const char *key, pt_dtype_t dtype)
{
    kr_error_t err = {{0}};
    const pt_value_t *v = pt_dict_get(pt_root(f), key);
    if (!v || v->kind != PT_TENSOR)
        fail_msg("%s: not a tensor in %s", key, pt_path(f));
    const pt_tensor_t *t = v->tensor;
    if (t->dtype != dtype)
        fail_msg("%s: dtype %s, expected %s", key, pt_dtype_name(t->dtype), pt_dtype_name(dtype));
    hid_t ds = H5Dopen2(h5, key, H5P_DEFAULT);
    assert_true(ds >= 0);
    char *tdt = NULL;
    hid_t at = H5Aopen(ds, "torch_dtype", H5P_DEFAULT), att = H5Aget_type(at);
    assert_true(H5Aread(at, att, &tdt) >= 0);
    assert_string_equal(tdt, pt_dtype_name(dtype));
    H5free_memory(tdt);
    H5Tclose(att);
    H5Aclose(at);
    hid_t sp = H5Dget_space(ds), ft = H5Dget_type(ds);
    hid_t nt = H5Tget_native_type(ft, H5T_DIR_ASCEND);
    hsize_t dims[8];
    assert_int_equal(H5Sget_simple_extent_ndims(sp), t->rank);
    H5Sget_simple_extent_dims(sp, dims, NULL);
    for (int d = 0; d < t->rank; d++)
        assert_int_equal((int64_t)dims[d], t->sizes[d]);
    assert_int_equal(H5Tget_size(nt), pt_dtype_size(dtype));
    size_t bytes = (size_t)t->numel * pt_dtype_size(dtype);
    void *got = NULL, *want = malloc(bytes);
    if (pt_tensor_read(f, t, key, &got, &err))
        fail_msg("%s", err.msg);
    assert_true(H5Dread(ds, nt, H5S_ALL, H5S_ALL, H5P_DEFAULT, want) >= 0);
    if (memcmp(got, want, bytes))
        fail_msg("%s: bits differ from the generator's", key);
    free(got);
    free(want);
    H5Tclose(nt);
    H5Tclose(ft);
    H5Sclose(sp);
    H5Dclose(ds);
}

/* expect_twin for each key of a table. */
typedef struct {
    const char *key;
    pt_dtype_t dtype;
} twin_t;

static void expect_twins(pt_file_t *f, hid_t h5, const twin_t *twins, size_t n)
{
    for (size_t i = 0; i < n; i++)
        expect_twin(f, h5, twins[i].key, twins[i].dtype);
}

/* dtypes_typed.pt is torch 1.13's own torch.save (CharStorage, BoolStorage,
 * DoubleStorage); dtypes_v3.pt is a hand-built pickle in torch >= 2.1's
 * _rebuild_tensor_v3 form, because torch 1.13 has no float8 dtypes
 * (scripts/fixtures/make_pt_dtype_fixtures.py). */
static void test_more_dtypes_exact(void **state)
{
    (void)state;
    kr_error_t err = {{0}};
    hid_t h5 = H5Fopen(FIX "/dtypes_more.h5", H5F_ACC_RDONLY, H5P_DEFAULT);
    assert_true(h5 >= 0);
    pt_file_t *f = NULL;
    if (pt_open(FIX "/dtypes_typed.pt", &f, &err))
        fail_msg("%s", err.msg);
    const twin_t typed[] = {
        {"i8", PT_DT_INT8}, {"bool", PT_DT_BOOL}, {"f64", PT_DT_FLOAT64}, {"f64_t", PT_DT_FLOAT64},
    };
    expect_twins(f, h5, typed, sizeof typed / sizeof typed[0]);
    assert_false(pt_dict_get(pt_root(f), "f64_t")->tensor->contiguous);
    /* values, by hand: a bool tensor holds only 0 and 1; int8 is signed */
    void *data = NULL;
    const pt_tensor_t *b = pt_dict_get(pt_root(f), "bool")->tensor;
    assert_int_equal(pt_tensor_read(f, b, "bool", &data, &err), 0);
    int ones = 0;
    for (int64_t i = 0; i < b->numel; i++) {
        assert_true(((uint8_t *)data)[i] <= 1);
        ones += ((uint8_t *)data)[i];
    }
    assert_true(ones > 0 && ones < b->numel);
    free(data);
    pt_close(f);

    f = NULL;
    if (pt_open(FIX "/dtypes_v3.pt", &f, &err))
        fail_msg("%s", err.msg);
    const twin_t v3[] = {
        {"f8uz", PT_DT_FLOAT8_E4M3FNUZ}, {"f8e5m2", PT_DT_FLOAT8_E5M2},
        {"e8m0", PT_DT_FLOAT8_E8M0FNU},  {"f4x2", PT_DT_FLOAT4_E2M1FN_X2},
        {"f8fn", PT_DT_FLOAT8_E4M3FN},   {"f8uz_t", PT_DT_FLOAT8_E4M3FNUZ},
    };
    expect_twins(f, h5, v3, sizeof v3 / sizeof v3[0]);
    const pt_tensor_t *t = pt_dict_get(pt_root(f), "f8uz_t")->tensor;
    assert_int_equal(t->offset, 2);
    assert_false(t->contiguous);
    pt_close(f);
    H5Fclose(h5);
    for (int d = 0; d < PT_DT_COUNT; d++)
        assert_int_equal(pt_dtype_size((pt_dtype_t)d),
                         d == PT_DT_BFLOAT16 || d == PT_DT_FLOAT16 ? 2
                         : d == PT_DT_FLOAT32 || d == PT_DT_INT32 ? 4
                         : d == PT_DT_INT64 || d == PT_DT_FLOAT64 ? 8 : 1);
}

static void test_more_dtypes_refused(void **state)
{
    (void)state;
    expect_refused(FIX "/refused_int16.pt", "torch.ShortStorage", SUBSET);
    expect_refused(FIX "/refused_int16.pt", "int16", NULL);
    expect_refused(FIX "/refused_uint16.pt", "torch.uint16", SUBSET);
    expect_refused(FIX "/refused_e5m2fnuz.pt", "torch.float8_e5m2fnuz", SUBSET);
    /* the message lists what is supported, the new dtypes included */
    expect_refused(FIX "/refused_uint16.pt", "float8_e4m3fnuz", NULL);
    expect_refused(FIX "/refused_uint16.pt", "float4_e2m1fn_x2", NULL);
}

/* One change to FIX/dump.pt that the importer must refuse, naming WANT and ALSO. */
typedef struct {
    const char *member;           /* record name suffix */
    const char *from, *to;        /* from NULL: the whole record becomes TO */
    size_t from_len, to_len;
    const char *file;             /* the patched copy's name */
    const char *want, *also;
} pt_patch_t;

static void expect_patch_refused(const pt_patch_t *p)
{
    zipset_t z;
    char path[1024];
    zs_load(FIX "/dump.pt", &z);
    rec_t *r = zs_find(&z, p->member);
    if (p->from)
        zs_replace(r, p->from, p->from_len, p->to, p->to_len);
    else
        zs_set(r, p->to, p->to_len);
    test_tmp_path(path, sizeof path, p->file);
    zs_save(&z, path);
    expect_refused(path, p->want, p->also);
    zs_free(&z);
    unlink(path);
}

static const pt_patch_t unsupported_patches[] = {
    /* an unsupported dtype through _rebuild_tensor_v3 */
    {"/data.pkl", "torch\nfloat8_e4m3fn\n", "torch\ncomplex128\n", 20, 17, "c128.pt", "torch.complex128", SUBSET},
    /* an unsupported opcode: SHORT_BINBYTES in place of the "M" value */
    {"/data.pkl", "X\x01\0\0\0Mq\x53K\x05", "X\x01\0\0\0MC\x01z", 10, 9, "bytes.pt", "SHORT_BINBYTES", SUBSET},
    {"/data.pkl", "X\x01\0\0\0Mq\x53K\x05", "X\x01\0\0\0MC\x01z", 10, 9, "bytes.pt", "opcode 0x43", NULL},
    /* a global that is not a tensor rebuild function */
    {"/data.pkl", "collections\nOrderedDict\n", "os\nsystem\n", 24, 10, "os.pt", "os.system", SUBSET},
    /* big-endian data */
    {"/byteorder", NULL, "big", 0, 3, "big.pt", "byteorder", SUBSET},
};

static const pt_patch_t broken_patches[] = {
    /* a storage key with no record, and one that is not a record name */
    {"/data.pkl", "X\x01\0\0\0" "0", "X\x01\0\0\0" "9", 6, 6, "key9.pt", "storage key '9'", "dump/data/9"},
    {"/data.pkl", "X\x01\0\0\0" "0", "X\x04\0\0\0" "../0", 6, 9, "keydots.pt", "storage key '../0'",
     "not a record name"},
    /* a record shorter than its storage declares */
    {"/data/1", NULL, "abcd", 0, 4, "short.pt", "storage '1'", "holds 4 bytes"},
    /* a tensor whose sizes exceed its storage: x_fp8 [6, 64] over 320 bytes */
    {"/data.pkl", "K\x05K\x40\x86", "K\x06K\x40\x86", 5, 5, "big-view.pt", "reads past its storage '0'", "[6, 64]"},
};

/* ---- refusals ---- */

static void test_unsupported_refused(void **state)
{
    (void)state;
    expect_refused(FIX "/unsupported_complex.pt", "torch.ComplexFloatStorage", SUBSET);
    expect_refused(FIX "/unsupported_complex.pt", "complex64", NULL);
    expect_refused(FIX "/unsupported_set.pt", "__builtin__.set", SUBSET);

    for (size_t i = 0; i < sizeof unsupported_patches / sizeof unsupported_patches[0]; i++)
        expect_patch_refused(&unsupported_patches[i]);
}

static void test_broken_files(void **state)
{
    (void)state;
    char path[1024];
    zipset_t z;

    /* truncated anywhere: never a crash, always the file's name */
    size_t len;
    FILE *fp = fopen(FIX "/dump.pt", "rb");
    assert_non_null(fp);
    uint8_t *all = malloc(1 << 16);
    len = fread(all, 1, 1 << 16, fp);
    fclose(fp);
    test_tmp_path(path, sizeof path, "trunc.pt");
    for (size_t cut = 0; cut < len; cut += cut < 64 ? 1 : 37) {
        fp = fopen(path, "wb");
        fwrite(all, 1, cut, fp);
        fclose(fp);
        kr_error_t err = {{0}};
        pt_file_t *f = NULL;
        assert_int_equal(pt_open(path, &f, &err), -1);
        assert_contains(err.msg, path);
    }
    fp = fopen(path, "wb");
    fwrite(all, 1, len / 2, fp);
    fclose(fp);
    expect_refused(path, "zip", "truncated");
    free(all);
    unlink(path);

    /* a zip without data.pkl */
    zs_load(FIX "/dump.pt", &z);
    rec_t *r = zs_find(&z, "/data.pkl");
    free(r->data);
    r->data = NULL;
    test_tmp_path(path, sizeof path, "nopkl.pt");
    zs_save(&z, path);
    expect_refused(path, "data.pkl", "no PREFIX/data.pkl");
    zs_free(&z);
    unlink(path);

    for (size_t i = 0; i < sizeof broken_patches / sizeof broken_patches[0]; i++)
        expect_patch_refused(&broken_patches[i]);

    /* sizes that contradict M, N, K: the importer names the key */
    zs_load(FIX "/dump.pt", &z);
    zs_replace(zs_find(&z, "/data.pkl"), "X\x01\0\0\0Kq\x55K\x40", 10, "X\x01\0\0\0Kq\x55K\x20", 10);
    test_tmp_path(path, sizeof path, "k32.pt");
    zs_save(&z, path);
    case_t c;
    kr_error_t err = {{0}};
    assert_int_equal(case_load(path, &c, NULL, &err), -1);
    assert_contains(err.msg, path);
    assert_contains(err.msg, ": weight: wrong shape; expected [32, 16] (N, K/2)");
    zs_free(&z);
    unlink(path);

    /* not a dict, and a dict without M */
    zs_load(FIX "/dump.pt", &z);
    zs_set(zs_find(&z, "/data.pkl"), "\x80\x02K\x07.", 5);
    test_tmp_path(path, sizeof path, "int.pt");
    zs_save(&z, path);
    assert_int_equal(case_load(path, &c, NULL, &err), -1);
    assert_contains(err.msg, "the saved object is a int; expected the dict");
    zs_set(zs_find(&z, "/data.pkl"), "\x80\x02}.", 4);
    zs_save(&z, path);
    assert_int_equal(case_load(path, &c, NULL, &err), -1);
    assert_contains(err.msg, ": M: missing");
    zs_free(&z);
    unlink(path);
}

/* Every single-byte change and every truncation of a real data.pkl: pt_open
 * fails with a message or parses to something pt_tensor_read and the importer
 * handle; nothing crashes or leaks (ASan in the sanitized build). */
static void test_corrupted_pickles(void **state)
{
    (void)state;
    zipset_t z;
    zs_load(FIX "/dump.pt", &z);
    rec_t *r = zs_find(&z, "/data.pkl");
    size_t n = r->len;
    uint8_t *orig = malloc(n);
    memcpy(orig, r->data, n);
    char path[1024];
    test_tmp_path(path, sizeof path, "fuzz.pt");
    int parsed = 0, refused = 0;
    const int variants = 4;
    for (size_t i = 0; i < n; i++) {
        for (int k = 0; k <= variants; k++) {
            memcpy(r->data, orig, n);
            r->len = n;
            if (k == variants)
                r->len = i;                          /* truncation */
            else
                r->data[i] = k == 0 ? (uint8_t)(orig[i] ^ 0xFF) : k == 1 ? 0
                             : k == 2 ? (uint8_t)(orig[i] + 1) : 0x80;
            zs_save(&z, path);
            kr_error_t err = {{0}};
            pt_file_t *f = NULL;
            if (pt_open(path, &f, &err)) {
                refused++;
                assert_null(f);
                assert_contains(err.msg, path);
                continue;
            }
            parsed++;
            const pt_value_t *root = pt_root(f);
            if (root && root->kind == PT_DICT)
                for (int64_t j = 0; j < root->n; j++) {
                    const pt_value_t *v = root->items[2 * j + 1];
                    void *data = NULL;
                    if (v->kind == PT_TENSOR && pt_tensor_read(f, v->tensor, "t", &data, &err) == 0)
                        free(data);
                }
            pt_close(f);
            case_t c;
            if (case_load(path, &c, NULL, &err) == 0)
                case_free(&c);
        }
    }
    r->len = n;
    memcpy(r->data, orig, n);
    free(orig);
    zs_free(&z);
    unlink(path);
    assert_true(refused > 0 && parsed > 0);
}

int main(void)
{
    if (!pt_tests_ready("test_torch_pt_refusals"))
        return TEST_SKIPPED;
    KR_RUN_TESTS(NULL, NULL,
        test_unsupported_refused, test_more_dtypes_exact, test_more_dtypes_refused,
        test_broken_files, test_corrupted_pickles);
}
