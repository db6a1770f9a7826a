/* Hostile files that must not leak anything:
 *  - HDF5 files that point outside themselves -- external raw storage on
 *    /etc/passwd, /dev/urandom and a relative path, an external link, a soft
 *    link through one, a virtual dataset -- are refused by name before any
 *    data is read, by the case reader (in process and through the CLI's
 *    reading worker, exit 2, nothing saved by --save-outputs), the results
 *    reader (report) and the outputs writer;
 *  - a .pt whose storage record inflates past the limit (a 1.1 MB zip bomb
 *    of 1.06 GiB of zeros; small ones under a lowered KREPLAY_PT_MAX_MB) is
 *    refused naming the file, the record and the limit, before the record is
 *    inflated.
 * Every fixture is built here (HDF5 C API, libzip), none is committed.
 * Hostile names (shell syntax, escaping) are in test_security.c. */
/* ctest-labels: security */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <jansson.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zip.h>

#include "case_io.h"
#include "hostile_files.h"
#include "output_store.h"
#include "results_store.h"
#include "security_runs.h"
#include "test_main.h"
#include "test_support.h"
#include "torch_pt.h"

/* ------------------------------------------------- 2. HDF5 leaving the file */

static void write_str_attr(hid_t obj, const char *name, const char *value)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, strlen(value));
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(obj, name, t, sp, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(a >= 0);
    assert_true(H5Awrite(a, t, value) >= 0);
    H5Aclose(a);
    H5Sclose(sp);
    H5Tclose(t);
}

typedef enum {
    H_EXTERNAL_STORAGE,     /* x's bytes in the file named by arg */
    H_EXTERNAL_LINK,        /* x is an external link to arg:/x */
    H_SOFT_THROUGH_LINK,    /* x is a soft link to /elsewhere/x, /elsewhere an external link */
    H_VIRTUAL,              /* x is a virtual dataset mapped from arg:/x */
} hostile_t;

/* A new file `other` holding a copy of the case's x. */
static void copy_x_to(const char *src, const char *other)
{
    hid_t s = H5Fopen(src, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t o = H5Fcreate(other, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(s >= 0 && o >= 0);
    assert_true(H5Ocopy(s, "x", o, "x", H5P_DEFAULT, H5P_DEFAULT) >= 0);
    H5Fclose(o);
    H5Fclose(s);
}

/* Dataset /x created with the creation properties DCPL (which it takes over),
 * tagged as bf16 like the real one. */
static void create_x_with(hid_t f, hid_t type, hid_t space, hid_t dcpl)
{
    hid_t d = H5Dcreate2(f, "x", type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    assert_true(d >= 0);
    write_str_attr(d, "dtype", "bfloat16");
    H5Dclose(d);
    H5Pclose(dcpl);
}

/* A copy of the case at src in dst whose x leaves the file; for the link
 * and virtual kinds, `other` gets a copy of the real x. */
static void make_hostile_case(const char *src, const char *dst, hostile_t kind, const char *arg,
                              const char *other)
{
    sec_h5_quiet();
    sec_copy_file(src, dst);
    if (other)
        copy_x_to(src, other);
    hid_t f = H5Fopen(dst, H5F_ACC_RDWR, H5P_DEFAULT);
    assert_true(f >= 0);
    hid_t x = H5Dopen2(f, "x", H5P_DEFAULT);
    hid_t type = H5Dget_type(x), space = H5Dget_space(x);
    H5Dclose(x);
    assert_true(H5Ldelete(f, "x", H5P_DEFAULT) >= 0);
    switch (kind) {
    case H_EXTERNAL_STORAGE: {
        hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
        assert_true(H5Pset_external(dcpl, arg, 0, H5F_UNLIMITED) >= 0);
        create_x_with(f, type, space, dcpl);
        break;
    }
    case H_EXTERNAL_LINK:
        assert_true(H5Lcreate_external(arg, "/x", f, "x", H5P_DEFAULT, H5P_DEFAULT) >= 0);
        break;
    case H_SOFT_THROUGH_LINK:
        assert_true(H5Lcreate_external(arg, "/", f, "elsewhere", H5P_DEFAULT, H5P_DEFAULT) >= 0);
        assert_true(H5Lcreate_soft("/elsewhere/x", f, "x", H5P_DEFAULT, H5P_DEFAULT) >= 0);
        break;
    case H_VIRTUAL: {
        hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
        assert_true(H5Pset_virtual(dcpl, space, arg, "/x", space) >= 0);
        create_x_with(f, type, space, dcpl);
        break;
    }
    }
    H5Tclose(type);
    H5Sclose(space);
    assert_true(H5Fclose(f) >= 0);
}

/* The message names the file, N1 and (unless NULL) N2. */
static void assert_error_names(const char *msg, const char *path, const char *n1, const char *n2)
{
    sec_assert_contains(msg, path);
    sec_assert_contains(msg, n1);
    if (n2)
        sec_assert_contains(msg, n2);
}

/* make_hostile_case of the work directory's case as W/NAME (its path in
 * path): ARG for the external storage, or, when NULL, a link into w->other. */
static void hostile_in_work(const sec_work_t *w, const char *name, hostile_t kind, const char *arg,
                            char *path, size_t cap)
{
    snprintf(path, cap, "%s/%s", w->dir, name);
    make_hostile_case(w->cs, path, kind, arg ? arg : w->other, arg ? NULL : w->other);
}

static void expect_case_refused(const char *path, const char *n1, const char *n2)
{
    case_t c;
    kr_error_t err = {{0}};
    assert_int_equal(case_read(path, &c, &err), -1);
    assert_null(c.x);
    assert_error_names(err.msg, path, n1, n2);
    sec_assert_contains(err.msg, "refused");
}

static void test_hdf5_cases_leaving_the_file(void **state)
{
    (void)state;
    sec_work_t w;
    sec_work_dir_with_case(&w);
    char bad[1300], rel[1300];
    snprintf(rel, sizeof rel, "%s/cases/passwd_copy", w.dir);
    sec_copy_file("/etc/passwd", rel);

    /* the untouched case reads */
    case_t c;
    kr_error_t err = {{0}};
    assert_int_equal(case_read(w.cs, &c, &err), 0);
    case_free(&c);

    const struct {
        const char *file;  /* under the work directory */
        hostile_t kind;
        const char *arg;   /* NULL: other.h5 */
        const char *msg;
    } hostile[] = {
        {"ext_passwd.h5", H_EXTERNAL_STORAGE, "/etc/passwd",
         "dataset /x uses external raw storage (/etc/passwd); refused"},
        {"ext_urandom.h5", H_EXTERNAL_STORAGE, "/dev/urandom",
         "dataset /x uses external raw storage (/dev/urandom); refused"},
        {"cases/ext_relative.h5", H_EXTERNAL_STORAGE, "passwd_copy",
         "dataset /x uses external raw storage (passwd_copy); refused"},
        {"elink.h5", H_EXTERNAL_LINK, NULL, "/x is an external link"},
        {"soft.h5", H_SOFT_THROUGH_LINK, NULL, "/elsewhere is an external link"},
        {"vds.h5", H_VIRTUAL, NULL, "dataset /x is a virtual dataset"},
    };
    for (size_t i = 0; i < sizeof hostile / sizeof hostile[0]; i++) {
        hostile_in_work(&w, hostile[i].file, hostile[i].kind, hostile[i].arg, bad, sizeof bad);
        /* the link and virtual kinds point at other.h5, which the message names */
        expect_case_refused(bad, hostile[i].msg, hostile[i].arg ? NULL : w.other);
    }
}

/* Through the CLI (the case is read in the reading worker): exit 2, the
 * message, and no outputs file holding what /etc/passwd fed the kernels. */
static void test_hdf5_refused_by_cli(void **state)
{
    (void)state;
    sec_work_t w;
    sec_work_dir_with_case(&w);
    char bad[1300], outs[1300];
    hostile_in_work(&w, "ext_passwd.h5", H_EXTERNAL_STORAGE, "/etc/passwd", bad, sizeof bad);
    snprintf(outs, sizeof outs, "%s/outs.h5", w.dir);
    const char *replay[] = {"kreplay", "replay", "--save-outputs", outs, bad, NULL};
    sec_expect_refused_in(w.dir, replay, "dataset /x uses external raw storage (/etc/passwd); refused");
    assert_false(sec_exists(outs));

    hostile_in_work(&w, "elink.h5", H_EXTERNAL_LINK, NULL, bad, sizeof bad);
    const char *inspect[] = {"kreplay", "inspect", bad, NULL};
    sec_expect_refused_in(w.dir, inspect, "/x is an external link");
}

/* results.h5 (report, merge, baseline) and an existing outputs file. */
static void test_hdf5_results_and_outputs(void **state)
{
    (void)state;
    sec_work_t w;
    sec_work_dir_with_case(&w);
    const char *replay[] = {"kreplay", "replay", "--kernels", "w4a8.folded", "-o", "run", w.cs, NULL};
    sec_expect_verdict_in(w.dir, replay, NULL);
    char good[1300], bad[1300];
    snprintf(good, sizeof good, "%s/run/results.h5", w.dir);
    copy_x_to(w.cs, w.other);

    result_list_t rows;
    kr_error_t err = {{0}};
    assert_int_equal(results_store_read(good, &rows, NULL, &err), 0);
    assert_true(rows.count > 0);
    result_list_free(&rows);

    /* a dataset on external storage */
    snprintf(bad, sizeof bad, "%s/results_ext.h5", w.dir);
    sec_copy_file(good, bad);
    hid_t f = H5Fopen(bad, H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    assert_true(H5Pset_external(dcpl, "/etc/passwd", 0, H5F_UNLIMITED) >= 0);
    hsize_t n = 64;
    hid_t sp = H5Screate_simple(1, &n, NULL);
    hid_t d = H5Dcreate2(f, "junk", H5T_NATIVE_UINT8, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    assert_true(d >= 0);
    H5Dclose(d);
    H5Sclose(sp);
    H5Pclose(dcpl);
    H5Fclose(f);
    memset(&err, 0, sizeof err);
    assert_int_equal(results_store_read(bad, &rows, NULL, &err), -1);
    sec_assert_contains(err.msg, bad);
    sec_assert_contains(err.msg, "dataset /junk uses external raw storage (/etc/passwd); refused");
    const char *report[] = {"kreplay", "report", bad, "-o", "rep", NULL};
    sec_expect_refused_in(w.dir, report, "dataset /junk uses external raw storage (/etc/passwd); refused");

    /* an external link */
    snprintf(bad, sizeof bad, "%s/results_elink.h5", w.dir);
    sec_copy_file(good, bad);
    f = H5Fopen(bad, H5F_ACC_RDWR, H5P_DEFAULT);
    assert_true(H5Lcreate_external(w.other, "/x", f, "evil", H5P_DEFAULT, H5P_DEFAULT) >= 0);
    H5Fclose(f);
    memset(&err, 0, sizeof err);
    assert_int_equal(results_store_read(bad, &rows, NULL, &err), -1);
    sec_assert_contains(err.msg, "/evil is an external link");

    /* an outputs file whose case group is an external link: nothing may be
     * written through it into the other file */
    char outs[1300];
    snprintf(outs, sizeof outs, "%s/outs.h5", w.dir);
    f = H5Fcreate(outs, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(H5Lcreate_external(w.other, "/", f, "victim", H5P_DEFAULT, H5P_DEFAULT) >= 0);
    H5Fclose(f);
    float deq[4 * 64];
    for (int i = 0; i < 4 * 64; i++)
        deq[i] = (float)(i % 7) - 3.0f;
    uint16_t o16[4 * 64];
    for (int i = 0; i < 4 * 64; i++)
        o16[i] = (uint16_t)(0x3F80 + i);
    kernel_act_t act;
    memset(&act, 0, sizeof act);
    act.M = 4;
    act.K = 64;
    act.dequant = deq;
    memset(&err, 0, sizeof err);
    assert_int_equal(output_store_save(outs, "victim", "bf16.sequential", &act, o16, 4, 64, &err), -1);
    sec_assert_contains(err.msg, "/victim is an external link");
    f = H5Fopen(w.other, H5F_ACC_RDONLY, H5P_DEFAULT);
    assert_true(H5Lexists(f, "bf16.sequential", H5P_DEFAULT) == 0);
    H5Fclose(f);
}

/* ------------------------------------------------------- 4. .pt zip bombs */

/* A torch.save zip of {'x': uint8 tensor of n bytes, all zero}, the storage
 * record deflated; the pickle is what torch writes for it (protocol 2). */
static void write_pt_bomb(const char *path, uint32_t n)
{
    static const char head[] =
        "\x80\x02}q\x00X\x01\x00\x00\x00xq\x01" "ctorch._utils\n_rebuild_tensor_v2\nq\x02((X\x07\x00\x00\x00"
        "storageq\x03" "ctorch\nByteStorage\nq\x04X\x01\x00\x00\x00" "0q\x05X\x03\x00\x00\x00" "cpuq\x06J";
    uint8_t pkl[512];
    size_t len = sizeof head - 1;
    memcpy(pkl, head, len);
    for (int i = 0; i < 4; i++)
        pkl[len++] = (uint8_t)(n >> (8 * i));
    static const char mid[] = "tq\x07QK\x00J";
    memcpy(pkl + len, mid, sizeof mid - 1);
    len += sizeof mid - 1;
    for (int i = 0; i < 4; i++)
        pkl[len++] = (uint8_t)(n >> (8 * i));
    static const char tail[] = "\x85q\x08K\x01\x85q\x09\x89" "ccollections\nOrderedDict\nq\x0a)Rq\x0btq\x0cRq\x0ds.";
    memcpy(pkl + len, tail, sizeof tail - 1);
    len += sizeof tail - 1;

    /* level 1: three times faster than 9 on zeros, ~230:1 instead of ~1030:1 */
    hostile_write_pt(path, "bomb", pkl, len, n, 1);
}

static void expect_pt_refused(const char *path, const char *n1, const char *n2)
{
    kr_error_t err = {{0}};
    pt_file_t *f = NULL;
    assert_int_equal(pt_open(path, &f, &err), -1);
    assert_null(f);
    assert_error_names(err.msg, path, n1, n2);
}

/* write_pt_bomb of N bytes at a fresh path NAME (in path), read under the
 * default limit: the environment's limit is cleared. */
static void pt_bomb_at_default_limit(char *path, size_t cap, const char *name, uint32_t n)
{
    test_tmp_path(path, cap, name);
    unsetenv(PT_MAX_MB_ENV);
    write_pt_bomb(path, n);
}

static void test_pt_bounds(void **state)
{
    (void)state;
    char path[1024];
    /* 3 MiB of zeros: within the default, over a 2 MiB limit, within 4 */
    pt_bomb_at_default_limit(path, sizeof path, "small.pt", 3u << 20);
    pt_file_t *f = NULL;
    kr_error_t err = {{0}};
    if (pt_open(path, &f, &err) != 0)
        fail_msg("the generated dump does not open: %s", err.msg);
    const pt_value_t *x = pt_dict_get(pt_root(f), "x");
    assert_non_null(x);
    assert_int_equal(x->kind, PT_TENSOR);
    assert_int_equal(x->tensor->numel, 3 << 20);
    pt_close(f);

    setenv(PT_MAX_MB_ENV, "2", 1);
    expect_pt_refused(path, "data/0", "over the limit of 2 MiB");
    expect_pt_refused(path, "inflates to 3145728 bytes", PT_MAX_MB_ENV);
    setenv(PT_MAX_MB_ENV, "4", 1);
    assert_int_equal(pt_open(path, &f, &err), 0);
    pt_close(f);
    setenv(PT_MAX_MB_ENV, "lots", 1);
    expect_pt_refused(path, PT_MAX_MB_ENV "=\"lots\"", "whole number of MiB");
    setenv(PT_MAX_MB_ENV, "0", 1);
    expect_pt_refused(path, PT_MAX_MB_ENV "=\"0\"", NULL);
    unsetenv(PT_MAX_MB_ENV);
    unlink(path);
}

/* The observed bomb's storage, 1.06 GiB inflated (from ~5 MB on disk here;
 * the observed 1.1 MB file was deflated harder), at the default limit,
 * through pt_open and the CLI: refused from the zip entry's size, before
 * anything is inflated. */
static void test_pt_zip_bomb(void **state)
{
    (void)state;
    char path[1024];
    pt_bomb_at_default_limit(path, sizeof path, "bomb.pt", 1138000000u);    /* 1.06 GiB */
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_true(st.st_size < 8000000);
    expect_pt_refused(path, "data/0", "over the limit of 1024 MiB");
    const char *replay[] = {"kreplay", "replay", path, NULL};
    char *out = NULL;
    assert_int_equal(sec_run_kreplay_in(NULL, replay, &out), 2);
    sec_assert_contains(out, "inflates to 1138000000 bytes");
    sec_assert_contains(out, "over the limit of 1024 MiB");
    free(out);
    unlink(path);
}

KR_TEST_MAIN(
    test_pt_bounds, test_pt_zip_bomb, test_hdf5_cases_leaving_the_file, test_hdf5_refused_by_cli,
    test_hdf5_results_and_outputs);
