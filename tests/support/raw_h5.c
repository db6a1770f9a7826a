/* Malformed case files built with the HDF5 C API: see raw_h5.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <hdf5.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "case_files.h"
#include "raw_h5.h"
#include "test_cases.h"
#include "test_support.h"

raw_ds_t *raw_add(raw_t *r, const char *name, hid_t type, int rank, hsize_t d0,
                         hsize_t d1)
{
    assert_true(r->nds < RAW_MAX_DS);
    raw_ds_t *d = &r->ds[r->nds++];
    memset(d, 0, sizeof *d);
    d->name = name;
    d->present = 1;
    d->type = type;
    d->rank = rank;
    d->dims[0] = d0;
    d->dims[1] = d1;
    return d;
}

raw_ds_t *raw_ds(raw_t *r, const char *name)
{
    for (int i = 0; i < r->nds; i++)
        if (strcmp(r->ds[i].name, name) == 0)
            return &r->ds[i];
    fail_msg("raw dataset %s not in the template", name);
    return NULL;
}

/* A valid case of every dataset (checked by test_raw_template_is_valid). */
void raw_default(raw_t *r, int64_t M, int64_t N, int64_t K)
{
    *r = (raw_t){.schema = CASE_SCHEMA_V1, .have_M = 1, .have_N = 1, .have_K = 1,
                 .M = M, .N = N, .K = K, .dim_type = H5T_STD_I64LE};
    raw_ds_t *d;
    d = raw_add(r, "x", H5T_STD_U16LE, 2, (hsize_t)M, (hsize_t)K);
    d->attr[0][0] = "dtype", d->attr[0][1] = "bfloat16";
    d = raw_add(r, "x_fp8", H5T_STD_U8LE, 2, (hsize_t)M, (hsize_t)K);
    d->attr[0][0] = "format", d->attr[0][1] = "e4m3fn";
    raw_add(r, "x_scale", H5T_IEEE_F32LE, 1, (hsize_t)M, 0);
    d = raw_add(r, "weight", H5T_STD_U8LE, 2, (hsize_t)N, (hsize_t)(K / 2));
    d->attr[0][0] = "order", d->attr[0][1] = "checkpoint";
    d = raw_add(r, "weight_scale", H5T_STD_U8LE, 2, (hsize_t)N, (hsize_t)(K / 32));
    d->attr[0][0] = "layout", d->attr[0][1] = "N,K/32";
    raw_add(r, "weight_ref", H5T_STD_U8LE, 1, (hsize_t)N, 0);
    const char *outs[3] = {"out", "out_rerun", "aiter"};
    for (int i = 0; i < 3; i++) {
        d = raw_add(r, outs[i], H5T_STD_U16LE, 2, (hsize_t)M, (hsize_t)N);
        d->attr[0][0] = "dtype", d->attr[0][1] = "bfloat16";
    }
}

static void raw_str_attr(hid_t obj, const char *name, const char *val, int fixed)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    assert_true(t >= 0);
    if (fixed) {
        assert_true(H5Tset_size(t, strlen(val) + 1) >= 0);
    } else {
        assert_true(H5Tset_size(t, H5T_VARIABLE) >= 0);
        assert_true(H5Tset_cset(t, H5T_CSET_UTF8) >= 0);
    }
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(obj, name, t, sp, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(a >= 0);
    assert_true(H5Awrite(a, t, fixed ? (const void *)val : (const void *)&val) >= 0);
    H5Aclose(a);
    H5Sclose(sp);
    H5Tclose(t);
}

static void raw_int_attr(hid_t obj, const char *name, hid_t type, int64_t v)
{
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(obj, name, type, sp, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(a >= 0);
    assert_true(H5Awrite(a, H5T_NATIVE_INT64, &v) >= 0);
    H5Aclose(a);
    H5Sclose(sp);
}

void raw_write(const char *path, const raw_t *r, uint64_t seed)
{
    test_rng_t rng = {seed};
    hid_t fcpl = H5Pcreate(H5P_FILE_CREATE);
    assert_true(fcpl >= 0);
    if (r->userblock)
        assert_true(H5Pset_userblock(fcpl, r->userblock) >= 0);
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, fcpl, H5P_DEFAULT);
    H5Pclose(fcpl);
    assert_true(f >= 0);
    if (r->schema)
        raw_str_attr(f, "schema", r->schema, r->fixed_strings);
    if (r->have_M)
        raw_int_attr(f, "M", r->dim_type, r->M);
    if (r->have_N)
        raw_int_attr(f, "N", r->dim_type, r->N);
    if (r->have_K)
        raw_int_attr(f, "K", r->dim_type, r->K);
    for (int i = 0; i < r->nds; i++) {
        const raw_ds_t *d = &r->ds[i];
        if (!d->present)
            continue;
        hid_t sp = d->rank == 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(d->rank, d->dims, NULL);
        assert_true(sp >= 0);
        hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
        assert_true(dcpl >= 0);
        if (d->chunked) {
            const hsize_t chunk[3] = {1, d->rank > 1 ? d->dims[1] : d->dims[0], 1};
            assert_true(H5Pset_chunk(dcpl, d->rank, chunk) >= 0);
        }
        hid_t ds = H5Dcreate2(f, d->name, d->type, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
        H5Pclose(dcpl);
        assert_true(ds >= 0);
        size_t n = (size_t)H5Sget_simple_extent_npoints(sp) * H5Tget_size(d->type);
        void *buf = d->data ? NULL : test_rand_bytes(&rng, n);
        /* Writing with the file type as memory type stores the bytes as given. */
        assert_true(H5Dwrite(ds, d->type, H5S_ALL, H5S_ALL, H5P_DEFAULT,
                             d->data ? d->data : buf) >= 0);
        free(buf);
        for (int a = 0; a < 2; a++)
            if (d->attr[a][0])
                raw_str_attr(ds, d->attr[a][0], d->attr[a][1], r->fixed_strings);
        H5Dclose(ds);
        H5Sclose(sp);
    }
    assert_true(H5Fclose(f) >= 0);
}


void raw_expect_fail(const raw_t *r, const char *tag, const char *n1, const char *n2,
                            const char *n3)
{
    char path[512];
    test_tmp_path(path, sizeof path, tag);
    raw_write(path, r, 77);
    expect_read_fail(path, n1, n2, n3);
    unlink(path);
}

/* The layout R written to a fresh file named after TAG (its path in
 * path[512]) and read back into *c; fails the test when the reader refuses it. */
void raw_read_ok(const raw_t *r, const char *tag, uint64_t seed, char *path, case_t *c)
{
    test_tmp_path(path, 512, tag);
    raw_write(path, r, seed);
    kr_error_t err = {{0}};
    if (case_read(path, c, &err) != 0)
        fail_msg("%s: %s", path, err.msg);
}

/* raw_default at M x N x K, written (TAG, SEED) and read into *c. */
void raw_default_read_ok(int64_t M, int64_t N, int64_t K, const char *tag, uint64_t seed,
                                char *path, case_t *c)
{
    raw_t r;
    raw_default(&r, M, N, K);
    raw_read_ok(&r, tag, seed, path, c);
}

/* The default layout (raw_default at M0 x N0 x K0) without dataset `ds`. */
void raw_default_without(raw_t *r, const char *ds)
{
    raw_default(r, M0, N0, K0);
    raw_ds(r, ds)->present = 0;
}
