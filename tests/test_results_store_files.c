/* Results files (harness/results/results_store.h): the reader's refusal of
 * truncated, foreign and incomplete files with one line naming file and
 * field, its reading by member name, and resume partials.  Apart from
 * test_results_store.c (round trips, sort, merge) because these build their
 * inputs by hand: malformed files with the HDF5 C API directly (raw_write),
 * never with the writer, and partial folders file by file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "result_fields.h"
#include "results_rows.h"
#include "results_store.h"
#include "test_main.h"
#include "test_support.h"

/* ---------------------------------------------------------------- bad files */

typedef struct {
    const char *omit;          /* a table field left out */
    const char *as_string;     /* a numeric field written as a 16-byte string */
    const char *bad_verdict;   /* written into every row's verdict */
    int extra;                 /* add unknown members and reverse the member order */
    const char *schema;        /* NULL: RESULTS_SCHEMA_V1; "": no schema attribute */
} raw_opts_t;

/* A results-like file built with the HDF5 API directly, in the layout of
 * schema 1 (fixed-length strings, integer counts, ulp.bins one array member),
 * which the reader still takes. */
static void raw_write(const char *path, const result_list_t *l, const raw_opts_t *o)
{
    size_t off[96], total = 0;
    int n = result_field_count;
    assert_true(n <= 94);
    hid_t types[96];
    int order[96], k = 0;
    if (o->extra) {
        for (int i = n - 1; i >= 0; i--)
            order[k++] = i;
    } else {
        for (int i = 0; i < n; i++)
            order[k++] = i;
    }
    for (int j = 0; j < k; j++) {
        int i = order[j];
        const result_field_t *f = &result_fields[i];
        hid_t t;
        if (o->as_string && strcmp(f->name, o->as_string) == 0) {
            t = H5Tcopy(H5T_C_S1);
            H5Tset_size(t, 16);
        } else {
            switch (f->type) {
            case RF_STR: t = H5Tcopy(H5T_C_S1); H5Tset_size(t, f->size); break;
            case RF_VERDICT: t = H5Tcopy(H5T_C_S1); H5Tset_size(t, 24); break;
            case RF_I64: t = H5Tcopy(H5T_STD_I64BE); break;   /* big-endian: the reader converts */
            case RF_U64: t = H5Tcopy(H5T_STD_U64LE); break;
            case RF_INT: t = H5Tcopy(H5T_STD_I32LE); break;
            case RF_F64: t = H5Tcopy(H5T_IEEE_F64BE); break;
            default: {
                hsize_t d = (hsize_t)f->count;
                t = H5Tarray_create2(H5T_NATIVE_INT64, 1, &d);
            }
            }
        }
        types[i] = t;
        off[i] = total;
        total += H5Tget_size(t);
    }
    size_t extra_off = total;
    if (o->extra)
        total += 8 + 40;
    hid_t ct = H5Tcreate(H5T_COMPOUND, total);
    hid_t s40 = H5Tcopy(H5T_C_S1);
    H5Tset_size(s40, 40);
    if (o->extra)
        assert_true(H5Tinsert(ct, "aa.future_note", extra_off + 8, s40) >= 0);
    for (int j = 0; j < k; j++) {
        int i = order[j];
        if (o->omit && strcmp(result_fields[i].name, o->omit) == 0)
            continue;
        assert_true(H5Tinsert(ct, result_fields[i].name, off[i], types[i]) >= 0);
    }
    if (o->extra)
        assert_true(H5Tinsert(ct, "zz.future_metric", extra_off, H5T_IEEE_F64LE) >= 0);

    /* Data in the file's own layout (memory type = file type, no conversion),
     * so big-endian members are byte-swapped here. */
    unsigned char *buf = calloc((size_t)(l->count ? l->count : 1), total);
    for (int64_t r = 0; r < l->count; r++) {
        unsigned char *rec = buf + (size_t)r * total;
        const char *src = (const char *)&l->rows[r];
        for (int i = 0; i < n; i++) {
            const result_field_t *f = &result_fields[i];
            unsigned char *d = rec + off[i];
            const char *s = src + f->offset;
            if (o->as_string && strcmp(f->name, o->as_string) == 0) {
                memcpy(d, "not-a-number", 12);
                continue;
            }
            switch (f->type) {
            case RF_STR: memcpy(d, s, strnlen(s, f->size - 1)); break;
            case RF_VERDICT: {
                verdict_t v;
                memcpy(&v, s, sizeof v);
                snprintf((char *)d, 24, "%s", o->bad_verdict ? o->bad_verdict : verdict_name(v));
                break;
            }
            case RF_I64: case RF_F64:
                for (int b = 0; b < 8; b++)
                    d[b] = (unsigned char)s[7 - b];
                break;
            case RF_U64: memcpy(d, s, 8); break;
            case RF_INT: memcpy(d, s, 4); break;
            case RF_I64_ARRAY: memcpy(d, s, 8 * (size_t)f->count); break;
            }
        }
        if (o->extra) {
            double x = 1234.5;
            memcpy(rec + extra_off, &x, 8);
            memcpy(rec + extra_off + 8, "from a later version", 20);
        }
    }
    hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(file >= 0);
    const char *schema = o->schema ? o->schema : RESULTS_SCHEMA_V1;
    if (schema[0]) {
        hid_t st = H5Tcopy(H5T_C_S1), sp = H5Screate(H5S_SCALAR);
        H5Tset_size(st, strlen(schema));
        hid_t a = H5Acreate2(file, "schema", st, sp, H5P_DEFAULT, H5P_DEFAULT);
        assert_true(H5Awrite(a, st, schema) >= 0);
        H5Aclose(a);
        H5Sclose(sp);
        H5Tclose(st);
    }
    hsize_t dims[1] = {(hsize_t)l->count};
    hid_t sp = H5Screate_simple(1, dims, NULL);
    hid_t ds = H5Dcreate2(file, "rows", ct, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(ds >= 0);
    assert_true(H5Dwrite(ds, ct, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) >= 0);
    H5Dclose(ds);
    H5Sclose(sp);
    H5Fclose(file);
    for (int i = 0; i < n; i++)
        H5Tclose(types[i]);
    H5Tclose(ct);
    H5Tclose(s40);
    free(buf);
}

static void test_read_by_name_ignores_unknown_fields(void **state)
{
    (void)state;
    result_list_t in, expect, out;
    rs_make_rows(&in, 9, 314);
    rs_copy_list(&expect, &in);
    for (int64_t i = 0; i < expect.count; i++)
        rs_expect_cut(&expect.rows[i]);
    char path[512];
    rs_tpath(path, sizeof path, "extra.h5");
    raw_write(path, &in, &(raw_opts_t){.extra = 1});
    kr_error_t err = {{0}};
    results_meta_t got;
    if (results_store_read(path, &out, &got, &err) != 0)
        fail_msg("%s", err.msg);
    rs_assert_lists_equal(&expect, &out);
    assert_string_equal(got.host, "");   /* provenance attributes are optional */
    unlink(path);
    result_list_free(&in);
    result_list_free(&expect);
    result_list_free(&out);
}

static void test_read_refuses_bad_files(void **state)
{
    (void)state;
    result_list_t rows;
    rs_make_rows(&rows, 300, 8);
    kr_error_t err = {{0}};
    result_list_t out;
    results_meta_t meta;
    char path[512];

    /* Missing file; a directory. */
    rs_tpath(path, sizeof path, "absent.h5");
    assert_int_not_equal(results_store_read(path, &out, &meta, &err), 0);
    rs_assert_error(&err, path, "cannot open", NULL);
    assert_int_equal(out.count, 0);
    assert_int_not_equal(results_store_read(KREPLAY_TEST_TMP, &out, &meta, &err), 0);
    rs_assert_error(&err, KREPLAY_TEST_TMP, "is a directory", NULL);

    /* Not HDF5: text, and an empty file. */
    rs_tpath(path, sizeof path, "text.h5");
    FILE *fp = fopen(path, "w");
    fputs("case,kernel,rel_fro\nx,y,0.1\n", fp);
    fclose(fp);
    assert_int_not_equal(results_store_read(path, &out, &meta, &err), 0);
    rs_assert_error(&err, path, "not an HDF5 file", NULL);
    fp = fopen(path, "w");
    fclose(fp);
    assert_int_not_equal(results_store_read(path, &out, &meta, &err), 0);
    rs_assert_error(&err, path, "not an HDF5 file", NULL);
    unlink(path);

    /* Truncated at several points: never a crash, always one line. */
    rs_tpath(path, sizeof path, "trunc.h5");
    if (results_store_write(path, &rows, NULL, &err) != 0)
        fail_msg("%s", err.msg);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    const double cuts[] = {0.999, 0.75, 0.5, 0.1, 0.01};
    for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++) {
        char cut[512];
        rs_tpath(cut, sizeof cut, "trunc-cut.h5");
        FILE *src = fopen(path, "rb"), *dst = fopen(cut, "wb");
        size_t keep = (size_t)((double)st.st_size * cuts[c]);
        char *b = malloc(keep);
        assert_int_equal(fread(b, 1, keep, src), keep);
        fwrite(b, 1, keep, dst);
        free(b);
        fclose(src);
        fclose(dst);
        memset(&err, 0, sizeof err);
        assert_int_not_equal(results_store_read(cut, &out, &meta, &err), 0);
        rs_assert_error(&err, cut, NULL, NULL);
        assert_int_equal(out.count, 0);
        unlink(cut);
    }
    unlink(path);

    /* A case file (another schema), and no schema at all. */
    rs_tpath(path, sizeof path, "case.h5");
    raw_write(path, &rows, &(raw_opts_t){.schema = "kreplay.case/1"});
    assert_int_not_equal(results_store_read(path, &out, &meta, &err), 0);
    rs_assert_error(&err, path, "kreplay.case/1", RESULTS_SCHEMA_V1);
    raw_write(path, &rows, &(raw_opts_t){.schema = ""});
    assert_int_not_equal(results_store_read(path, &out, &meta, &err), 0);
    rs_assert_error(&err, path, "no schema attribute", NULL);

    /* A field missing: named. */
    raw_write(path, &rows, &(raw_opts_t){.omit = "metrics.worst_row_rel"});
    assert_int_not_equal(results_store_read(path, &out, &meta, &err), 0);
    rs_assert_error(&err, path, "'metrics.worst_row_rel' is missing", NULL);
    raw_write(path, &rows, &(raw_opts_t){.omit = "ulp.bins", .extra = 1});
    assert_int_not_equal(results_store_read(path, &out, &meta, &err), 0);
    rs_assert_error(&err, path, "'ulp.bins' is missing", NULL);

    /* A field of the wrong type, an unknown verdict. */
    raw_write(path, &rows, &(raw_opts_t){.as_string = "metrics.rel_fro"});
    assert_int_not_equal(results_store_read(path, &out, &meta, &err), 0);
    rs_assert_error(&err, path, "'metrics.rel_fro'", "expected float64");
    raw_write(path, &rows, &(raw_opts_t){.bad_verdict = "MAYBE"});
    assert_int_not_equal(results_store_read(path, &out, &meta, &err), 0);
    rs_assert_error(&err, path, "MAYBE", "verdict");
    assert_int_equal(out.count, 0);
    unlink(path);
    result_list_free(&rows);
}

/* ---------------------------------------------------------------- partials */

/* A row's case path as a C string (cut at the member's size - 1). */
static const char *key_of(const result_t *r)
{
    static char buf[4][sizeof r->case_path];
    static int k;
    char *b = buf[k++ % 4];
    size_t n = strnlen(r->case_path, sizeof r->case_path - 1);
    memcpy(b, r->case_path, n);
    b[n] = '\0';
    return b;
}

static void test_partials_resume(void **state)
{
    (void)state;
    result_list_t all, expect;
    rs_make_rows(&all, 20, 555);   /* 5 cases of 4 rows */
    rs_copy_list(&expect, &all);
    assert_int_equal(result_list_sort(&expect), 0);
    for (int64_t i = 0; i < expect.count; i++)
        rs_expect_cut(&expect.rows[i]);

    char run[512];
    rs_tpath(run, sizeof run, "rundir");
    kr_error_t err = {{0}};
    result_list_t loaded = {0};
    char **keys;
    int nk;
    /* No partial/ yet: nothing done, not an error. */
    if (results_store_load_partials(run, &loaded, &keys, &nk, &err) != 0)
        fail_msg("%s", err.msg);
    assert_int_equal(nk, 0);

    results_meta_t meta;
    rs_set_meta(&meta, "7", "suite-h", "");
    /* Cases 0..2 finish; case 1 is written twice (a retried case replaces its file). */
    for (int c = 0; c < 3; c++) {
        if (c == 1) {
            result_t junk = all.rows[4];
            snprintf(junk.note, sizeof junk.note, "stale attempt");
            if (results_store_append_case(run, key_of(&all.rows[4 * c]), &junk, 1, &meta, &err))
                fail_msg("%s", err.msg);
        }
        if (results_store_append_case(run, key_of(&all.rows[4 * c]), &all.rows[4 * c], 4, &meta,
                                      &err) != 0)
            fail_msg("%s", err.msg);
    }
    /* A write killed halfway leaves a temporary file: ignored. */
    char junkpath[700];
    snprintf(junkpath, sizeof junkpath, "%s/partial/0123456789abcdef-x.h5.tmp.4242", run);
    FILE *fp = fopen(junkpath, "w");
    fputs("half", fp);
    fclose(fp);

    if (results_store_load_partials(run, &loaded, &keys, &nk, &err) != 0)
        fail_msg("%s", err.msg);
    assert_int_equal(nk, 3);
    assert_int_equal(loaded.count, 12);
    for (int c = 0; c < 3; c++) {
        int found = 0;
        for (int k = 0; k < nk; k++)
            found += strcmp(keys[k], key_of(&all.rows[4 * c])) == 0;
        assert_int_equal(found, 1);
    }
    for (int64_t i = 0; i < loaded.count; i++)
        assert_string_not_equal(loaded.rows[i].note, "stale attempt");

    /* Resume: run the cases not done, then finish into results.h5. */
    for (int64_t i = 0; i < all.count; i++) {
        int done = 0;
        for (int k = 0; k < nk; k++)
            done |= strcmp(keys[k], key_of(&all.rows[i])) == 0;
        if (!done)
            *result_list_add(&loaded) = all.rows[i];
    }
    results_store_free_keys(keys, nk);
    assert_int_equal(result_list_sort(&loaded), 0);
    char final[700];
    snprintf(final, sizeof final, "%s/results.h5", run);
    if (results_store_write(final, &loaded, &meta, &err) != 0)
        fail_msg("%s", err.msg);
    result_list_t out;
    if (results_store_read(final, &out, NULL, &err) != 0)
        fail_msg("%s", err.msg);
    rs_assert_lists_equal(&expect, &out);

    /* A damaged partial is an error naming it; the caller's list is untouched. */
    char bad[700];
    snprintf(bad, sizeof bad, "%s/partial/ffffffffffffffff-bad.h5", run);
    fp = fopen(bad, "w");
    fputs("not hdf5", fp);
    fclose(fp);
    result_list_t again = {0};
    assert_int_not_equal(results_store_load_partials(run, &again, &keys, &nk, &err), 0);
    rs_assert_error(&err, bad, "delete it", NULL);
    assert_int_equal(again.count, 0);
    assert_null(keys);
    result_list_free(&again);

    result_list_free(&out);
    result_list_free(&loaded);
    result_list_free(&all);
    result_list_free(&expect);
}

KR_TEST_MAIN_SETUP(rs_dir_setup, rs_dir_teardown,
    test_read_by_name_ignores_unknown_fields, test_read_refuses_bad_files, test_partials_resume);
