/* Results files (harness/results/results_store.h, harness/results/result_fields.h): the
 * field table, missing values in every format, round trips of rows with every
 * field set and provenance, the sort key, shard merging and its refusals.
 * The reader's refusal of bad files and the resume partials are in
 * test_results_store_files.c.
 *
 * Rows are compared member by member with an explicit list
 * (support/results_rows.c, not through the field table), and doubles bit for
 * bit, so a field the table forgot or a NaN that became 0 fails. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <dirent.h>
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

/* ---------------------------------------------------------------- field table */

static void test_field_table_covers_result_t(void **state)
{
    (void)state;
    kr_error_t err = {{0}};
    if (result_fields_check(&err) != 0)
        fail_msg("%s", err.msg);
    /* Names unique; every member of the explicit comparison list is in the table. */
    for (int i = 0; i < result_field_count; i++)
        for (int j = i + 1; j < result_field_count; j++)
            assert_string_not_equal(result_fields[i].name, result_fields[j].name);
    const char *expect[] = {"case_path", "M", "metrics.rel_fro", "metrics.out_nf.neg_inf",
                            "ulp.max_ulp", "ulp.bins", "input_nf.pos_inf", "verdict", "note",
                            "ref_f32_vs_f64", "diagnosis", "device", "reruns", "rerun_diff",
                            "canary_ok", "time_ms", "tflops", "gbps", "out_digest", "case_id",
                            "diagnosis_family"};
    for (size_t i = 0; i < sizeof expect / sizeof expect[0]; i++)
        if (!result_field_find(expect[i]))
            fail_msg("field %s missing from the table", expect[i]);
    const result_field_t *bins = result_field_find("ulp.bins");
    assert_int_equal(bins->count, ULP_BIN_COUNT);
    assert_int_equal(bins->offset, offsetof(result_t, ulp.bins));
    assert_int_equal(result_field_find("note")->size, sizeof(((result_t *)0)->note));
    /* 48 + the judgement's 13 + the accumulation fit's 6 and its fp32 bound's 7 + the diagnosis
     * family, whether it is checked, the diagnosis' party, the poison's block and the baseline's
     * finding (metric, baseline, run) */
    assert_int_equal(result_field_count, 81);
}

static void test_field_table_csv_json(void **state)
{
    (void)state;
    result_list_t l;
    rs_make_rows(&l, 3, 5);
    char *buf = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&buf, &len);
    assert_non_null(fp);
    result_fields_csv_write(fp, &l);
    fclose(fp);
    /* Header: one column per field, the histogram expanded with bin labels. */
    char *nl = strchr(buf, '\n');
    assert_non_null(nl);
    int cols = 1;
    for (char *p = buf; p < nl; p++)
        cols += *p == ',';
    assert_int_equal(cols, result_field_count - 2 + ULP_BIN_COUNT + ROUND_MODE_COUNT);
    assert_non_null(strstr(buf, ",ulp.bins.3-4,"));
    assert_non_null(strstr(buf, ",ulp.bins.nonfinite,"));
    assert_non_null(strstr(buf, "\"rel_fro <&> \"\"quoted\"\" "));
    assert_non_null(strstr(buf, ",nan,"));
    assert_non_null(strstr(buf, ",inf,"));
    assert_non_null(strstr(buf, ",4294967296,"));   /* ulp.max_ulp of row 0 */
    free(buf);

    json_t *o = result_fields_json(&l.rows[1]);
    assert_non_null(o);
    /* Nested at each '.', the leaves named as the CSV columns' last parts. */
    json_t *metrics = json_object_get(o, "metrics");
    assert_true(json_is_null(json_object_get(metrics, "max_abs")));   /* +Inf */
    assert_true(json_is_real(json_object_get(metrics, "rel_fro")));
    assert_int_equal(json_integer_value(json_object_get(json_object_get(metrics, "out_nf"), "nan")),
                     12);   /* 11 + row 1 */
    assert_string_equal(json_string_value(json_object_get(o, "verdict")), "WRONG");
    json_t *bins = json_object_get(json_object_get(o, "ulp"), "bins");
    assert_int_equal(json_object_size(bins), ULP_BIN_COUNT);
    assert_int_equal(json_integer_value(json_object_get(bins, "3-4")), 4001);   /* bin 3 */
    assert_null(json_object_get(o, "metrics.rel_fro"));
    json_decref(o);
    result_list_free(&l);
}

/* The cell of column `name` in CSV line `line` (of header `hdr`), unquoted
 * fields only. */
static void csv_cell(const char *hdr, const char *line, const char *name, char *out, size_t cap)
{
    int col = -1, c = 0;
    const char *p = hdr;
    size_t len = strlen(name);
    while (*p && *p != '\n') {
        if (strncmp(p, name, len) == 0 && (p[len] == ',' || p[len] == '\n'))
            col = c;
        p = strpbrk(p, ",\n");
        if (!p || *p == '\n')
            break;
        p++;
        c++;
    }
    if (col < 0)
        fail_msg("CSV header lacks %s", name);
    p = line;
    for (int k = 0; k < col; k++) {   /* the cells before it hold no commas in quotes here */
        p = strchr(p, ',');
        assert_non_null(p);
        p++;
    }
    size_t n = strcspn(p, ",\n");
    snprintf(out, cap, "%.*s", (int)n, p);
}

/* A row that compared nothing (UNSUPPORTED, reference "-") has its measured
 * values missing in every output: empty in CSV, null in JSON, NaN in HDF5
 * (read back with the HDF5 API, not the reader); a measured row's 0 stays 0. */
static void test_missing_values_everywhere(void **state)
{
    (void)state;
    result_list_t l = {0};
    result_t *r = result_list_add(&l);
    snprintf(r->case_path, sizeof r->case_path, "/cases/unsup.h5");
    snprintf(r->case_name, sizeof r->case_name, "unsup");
    r->M = 3000, r->N = 48, r->K = 5120;
    snprintf(r->band, sizeof r->band, "tiled");
    snprintf(r->kernel, sizeof r->kernel, "bf16.skinny");
    snprintf(r->reference, sizeof r->reference, "-");
    r->verdict = VERDICT_UNSUPPORTED;
    r->input_nf.nan = 4;   /* a property of the case: kept */
    snprintf(r->note, sizeof r->note, "M outside 6..64");
    result_t *m = result_list_add(&l);
    *m = *r;
    snprintf(m->kernel, sizeof m->kernel, "w4a8.folded");
    snprintf(m->reference, sizeof m->reference, "R_exact");
    m->verdict = VERDICT_PASS;
    m->metrics.count = 3000 * 48;
    m->metrics.rel_fro = 0.0;   /* bit-identical: a real 0 */

    char *buf = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&buf, &len);
    result_fields_csv_write(fp, &l);
    fclose(fp);
    char *row0 = strchr(buf, '\n') + 1, *row1 = strchr(row0, '\n') + 1, cell[64];
    const char *missing[] = {"metrics.rel_fro", "metrics.count", "ulp.bins.0", "ulp.max_ulp",
                             "threshold", "ref_f32_vs_f64"};
    for (size_t i = 0; i < sizeof missing / sizeof missing[0]; i++) {
        csv_cell(buf, row0, missing[i], cell, sizeof cell);
        if (cell[0])
            fail_msg("CSV %s of an UNSUPPORTED row is '%s'; expected empty", missing[i], cell);
    }
    csv_cell(buf, row0, "input_nf.nan", cell, sizeof cell);
    assert_string_equal(cell, "4");
    csv_cell(buf, row1, "metrics.rel_fro", cell, sizeof cell);
    assert_string_equal(cell, "0");
    csv_cell(buf, row1, "metrics.count", cell, sizeof cell);
    assert_string_equal(cell, "144000");
    free(buf);

    json_t *o = result_fields_json(&l.rows[0]);
    assert_true(json_is_null(json_object_get(json_object_get(o, "metrics"), "rel_fro")));
    assert_true(json_is_null(json_object_get(json_object_get(o, "metrics"), "count")));
    assert_true(json_is_null(json_object_get(json_object_get(json_object_get(o, "ulp"), "bins"), "0")));
    assert_int_equal(json_integer_value(json_object_get(json_object_get(o, "input_nf"), "nan")), 4);
    json_decref(o);

    char path[512];
    rs_tpath(path, sizeof path, "missing.h5");
    kr_error_t err = {{0}};
    if (results_store_write(path, &l, NULL, &err) != 0)
        fail_msg("%s", err.msg);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t ds = H5Dopen2(f, "rows", H5P_DEFAULT), ft = H5Dget_type(ds);
    /* No sub-arrays (pandas.DataFrame cannot take them), strings variable-length UTF-8. */
    for (int i = 0; i < H5Tget_nmembers(ft); i++) {
        hid_t mt = H5Tget_member_type(ft, (unsigned)i);
        assert_int_not_equal(H5Tget_class(mt), H5T_ARRAY);
        if (H5Tget_class(mt) == H5T_STRING) {
            assert_true(H5Tis_variable_str(mt) > 0);
            assert_int_equal(H5Tget_cset(mt), H5T_CSET_UTF8);
        }
        H5Tclose(mt);
    }
    const char *cols[] = {"metrics.count", "metrics.rel_fro", "ulp.bins.3-4", "threshold"};
    for (size_t i = 0; i < sizeof cols / sizeof cols[0]; i++) {
        hid_t one = H5Tcreate(H5T_COMPOUND, sizeof(double));
        H5Tinsert(one, cols[i], 0, H5T_NATIVE_DOUBLE);
        double v[2] = {-1, -1};
        assert_true(H5Dread(ds, one, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >= 0);
        H5Tclose(one);
        if (!isnan(v[0]))
            fail_msg("results.h5 %s of an UNSUPPORTED row is %g; expected NaN", cols[i], v[0]);
        if (i < 2)
            assert_true(v[1] == (i == 0 ? 144000.0 : 0.0));
    }
    H5Tclose(ft);
    H5Dclose(ds);
    H5Fclose(f);

    result_list_t back;
    if (results_store_read(path, &back, NULL, &err) != 0)
        fail_msg("%s", err.msg);
    assert_int_equal(back.count, 2);
    assert_string_equal(back.rows[0].reference, "-");
    assert_int_equal(back.rows[0].metrics.count, 0);
    assert_int_equal(back.rows[0].metrics.worst_row, -1);   /* result_list_add's default */
    assert_true(isnan(back.rows[0].metrics.rel_fro));
    assert_int_equal(back.rows[0].input_nf.nan, 4);
    assert_int_equal(back.rows[1].metrics.count, 144000);
    assert_true(back.rows[1].metrics.rel_fro == 0.0);
    result_list_free(&back);
    unlink(path);
    result_list_free(&l);
}

/* ---------------------------------------------------------------- round trips */

/* IN (with META, may be NULL) stored at PATH and read back into *out, *got. */
static void write_then_read(const char *path, const result_list_t *in, const results_meta_t *meta,
                            result_list_t *out, results_meta_t *got)
{
    kr_error_t err = {{0}};
    if (results_store_write(path, in, meta, &err) != 0)
        fail_msg("%s", err.msg);
    if (results_store_read(path, out, got, &err) != 0)
        fail_msg("%s", err.msg);
}

static void test_round_trip_every_field(void **state)
{
    (void)state;
    result_list_t in, expect, out;
    rs_make_rows(&in, 2 * VERDICT_COUNT, 42);
    /* A member with no terminator anywhere, and bytes after a terminator. */
    memset(in.rows[3].note, 'Q', sizeof in.rows[3].note);
    memset(in.rows[6].device, 'D', sizeof in.rows[6].device);
    snprintf(in.rows[7].kernel, sizeof in.rows[7].kernel, "k");
    memset(in.rows[7].kernel + 2, 'G', 10);   /* garbage after the NUL is not data */
    rs_copy_list(&expect, &in);
    for (int64_t i = 0; i < expect.count; i++)
        rs_expect_cut(&expect.rows[i]);

    results_meta_t meta, got;
    rs_set_meta(&meta, "1", "sha256:4be1", "2/5");
    char path[512];
    rs_tpath(path, sizeof path, "rt.h5");
    write_then_read(path, &in, &meta, &out, &got);
    rs_assert_lists_equal(&expect, &out);
    rs_assert_meta_equal(&meta, &got);
    assert_int_equal(strlen(out.rows[3].note), sizeof out.rows[3].note - 1);
    assert_true(isnan(out.rows[0].metrics.rel_fro));
    assert_true(isinf(out.rows[3].metrics.cosine) && out.rows[3].metrics.cosine < 0);
    assert_int_equal(out.rows[VERDICT_REGRESSED].verdict, VERDICT_REGRESSED);
    /* Nothing but the result was left in the folder. */
    assert_int_equal(rs_count_matching(rs_dir(), ".tmp."), 0);

    /* Rewriting replaces the file whole. */
    result_list_t small;
    rs_make_rows(&small, 2, 7);
    result_list_free(&out);
    write_then_read(path, &small, NULL, &out, &got);
    assert_int_equal(out.count, 2);
    assert_string_equal(got.suite_hash, "");
    assert_string_equal(got.schema, RESULTS_SCHEMA_V2);

    result_list_free(&small);
    result_list_free(&in);
    result_list_free(&expect);
    result_list_free(&out);
    unlink(path);
}

static void test_round_trip_empty(void **state)
{
    (void)state;
    result_list_t in = {0}, out;
    results_meta_t meta, got;
    rs_set_meta(&meta, "2", "h", "");
    char path[512];
    rs_tpath(path, sizeof path, "empty.h5");
    write_then_read(path, &in, &meta, &out, &got);
    assert_int_equal(out.count, 0);
    rs_assert_meta_equal(&meta, &got);
    result_list_free(&out);
    unlink(path);
}

static void test_write_failures_leave_nothing(void **state)
{
    (void)state;
    result_list_t in;
    rs_make_rows(&in, 3, 9);
    kr_error_t err = {{0}};
    char path[512];
    rs_tpath(path, sizeof path, "no-such-dir");
    strcat(path, "/r.h5");
    assert_int_not_equal(results_store_write(path, &in, NULL, &err), 0);
    rs_assert_error(&err, path, "cannot create the temporary file", NULL);
    assert_false(rs_file_exists(path));

    /* The target is a directory: the rename fails, the temporary file goes. */
    char dir[512];
    rs_tpath(dir, sizeof dir, "is-a-dir.h5");
    assert_int_equal(mkdir(dir, 0777), 0);
    assert_int_not_equal(results_store_write(dir, &in, NULL, &err), 0);
    rs_assert_error(&err, dir, "rename", NULL);
    assert_int_equal(rs_count_matching(rs_dir(), ".tmp."), 0);
    rmdir(dir);
    result_list_free(&in);
}

/* ---------------------------------------------------------------- sort and merge */

static void test_sort_key_and_stability(void **state)
{
    (void)state;
    result_list_t l;
    rs_make_rows(&l, 24, 11);
    /* Two rows with one key, in a known order, far apart. */
    l.rows[20] = l.rows[2];
    snprintf(l.rows[2].note, sizeof l.rows[2].note, "first");
    snprintf(l.rows[20].note, sizeof l.rows[20].note, "second");
    assert_int_equal(result_list_sort(&l), 0);
    int seen_first = 0;
    for (int64_t i = 0; i < l.count; i++) {
        if (i > 0) {
            const result_t *a = &l.rows[i - 1], *b = &l.rows[i];
            /* strncmp: some case paths fill their member with no terminator */
            int c = strncmp(a->case_path, b->case_path, sizeof a->case_path - 1);
            if (c == 0)
                c = strncmp(a->kernel, b->kernel, sizeof a->kernel - 1);
            if (c == 0)
                c = strncmp(a->reference, b->reference, sizeof a->reference - 1);
            assert_true(c <= 0);
        }
        if (strcmp(l.rows[i].note, "first") == 0)
            seen_first = 1;
        if (strcmp(l.rows[i].note, "second") == 0)
            assert_true(seen_first);
    }
    result_list_free(&l);
}

/* Writes rows[i] with pick(i) true to path. */
static void write_subset(const char *path, const result_list_t *all, int mod, int want,
                         const results_meta_t *meta)
{
    result_list_t part = {0};
    for (int64_t i = 0; i < all->count; i++) {
        /* by case: 4 rows per case (make_row's i / 4) */
        if ((int)((i / 4) % mod) != want)
            continue;
        result_t *r = result_list_add(&part);
        assert_non_null(r);
        *r = all->rows[i];
    }
    assert_int_equal(result_list_sort(&part), 0);
    kr_error_t err = {{0}};
    if (results_store_write(path, &part, meta, &err) != 0)
        fail_msg("%s", err.msg);
    result_list_free(&part);
}

static void test_merge_three_shards_equals_one_run(void **state)
{
    (void)state;
    result_list_t all, expect, out;
    rs_make_rows(&all, 40, 2024);
    /* Shuffle, as a run's cases may finish in any order. */
    test_rng_t g = {99};
    for (int64_t i = all.count - 1; i > 0; i--) {
        int64_t j = (int64_t)(test_rng_u64(&g) % (uint64_t)(i + 1));
        result_t t = all.rows[i];
        all.rows[i] = all.rows[j];
        all.rows[j] = t;
    }
    /* Recompute shard membership by case after the shuffle: case index from the name. */
    for (int64_t i = 0; i < all.count; i++)
        all.rows[i].reruns = atoi(all.rows[i].case_name + 1);   /* c%03d */
    rs_copy_list(&expect, &all);
    assert_int_equal(result_list_sort(&expect), 0);
    for (int64_t i = 0; i < expect.count; i++)
        rs_expect_cut(&expect.rows[i]);

    char p[3][512], merged[512];
    const char *paths[3];
    for (int s = 0; s < 3; s++) {
        rs_tpath(p[s], sizeof p[s], "shard.h5");
        result_list_t part = {0};
        for (int64_t i = 0; i < all.count; i++)
            if (all.rows[i].reruns % 3 == s) {
                result_t *r = result_list_add(&part);
                *r = all.rows[i];
            }
        assert_true(part.count > 0);
        assert_int_equal(result_list_sort(&part), 0);
        results_meta_t m;
        char tag[8], shard[16];
        snprintf(tag, sizeof tag, "%d", s + 3);
        snprintf(shard, sizeof shard, "%d/3", s + 1);
        rs_set_meta(&m, tag, "sha256:same", shard);
        kr_error_t err = {{0}};
        if (results_store_write(p[s], &part, &m, &err) != 0)
            fail_msg("%s", err.msg);
        result_list_free(&part);
    }
    /* Given out of order: the result does not depend on it. */
    paths[0] = p[2];
    paths[1] = p[0];
    paths[2] = p[1];
    rs_tpath(merged, sizeof merged, "merged.h5");
    kr_error_t err = {{0}};
    if (results_store_merge(paths, 3, merged, &err) != 0)
        fail_msg("%s", err.msg);
    results_meta_t got;
    if (results_store_read(merged, &out, &got, &err) != 0)
        fail_msg("%s", err.msg);
    rs_assert_lists_equal(&expect, &out);
    assert_string_equal(got.shard, "merged 3 of 3");
    assert_string_equal(got.host, "node-5.cluster");     /* the first file given */
    assert_string_equal(got.suite_hash, "sha256:same");

    /* Two of three shards: the rows of those two, and the provenance says so. */
    char two[512];
    rs_tpath(two, sizeof two, "merged2.h5");
    if (results_store_merge(paths + 1, 2, two, &err) != 0)
        fail_msg("%s", err.msg);
    result_list_free(&out);
    if (results_store_read(two, &out, &got, &err) != 0)
        fail_msg("%s", err.msg);
    assert_string_equal(got.shard, "merged 2 of 3");
    int64_t want = 0;
    for (int64_t i = 0; i < all.count; i++)
        want += all.rows[i].reruns % 3 != 2;
    assert_int_equal(out.count, want);

    for (int s = 0; s < 3; s++)
        unlink(p[s]);
    unlink(merged);
    unlink(two);
    result_list_free(&all);
    result_list_free(&expect);
    result_list_free(&out);
}

static void test_merge_refusals(void **state)
{
    (void)state;
    result_list_t all;
    rs_make_rows(&all, 24, 77);   /* 6 cases of 4 rows */
    char a[512], b[512], c[512], d[512], out[512];
    rs_tpath(a, sizeof a, "ovl-a.h5");
    rs_tpath(b, sizeof b, "ovl-b.h5");
    rs_tpath(c, sizeof c, "other-suite.h5");
    rs_tpath(d, sizeof d, "same-shard.h5");
    rs_tpath(out, sizeof out, "refused.h5");
    results_meta_t m1, m2, m3, m4;
    rs_set_meta(&m1, "1", "hash-A", "1/2");
    rs_set_meta(&m2, "2", "hash-A", "2/2");
    rs_set_meta(&m3, "3", "hash-B", "2/2");
    rs_set_meta(&m4, "4", "hash-A", "1/2");
    /* a: cases 0,2,4; b: cases 1,3,5 plus case 2 again (overlap). */
    write_subset(a, &all, 2, 0, &m1);
    {
        result_list_t part = {0};
        for (int64_t i = 0; i < all.count; i++)
            if ((i / 4) % 2 == 1 || i / 4 == 2)
                *result_list_add(&part) = all.rows[i];
        result_list_sort(&part);
        kr_error_t err = {{0}};
        if (results_store_write(b, &part, &m2, &err) != 0)
            fail_msg("%s", err.msg);
        result_list_free(&part);
    }
    write_subset(c, &all, 2, 1, &m3);
    write_subset(d, &all, 2, 1, &m4);

    kr_error_t err = {{0}};
    const char *ovl[] = {a, b};
    assert_int_not_equal(results_store_merge(ovl, 2, out, &err), 0);
    rs_assert_error(&err, a, "overlapping", all.rows[8].case_path);
    assert_non_null(strstr(err.msg, b));
    assert_false(rs_file_exists(out));

    const char *suites[] = {a, c};
    assert_int_not_equal(results_store_merge(suites, 2, out, &err), 0);
    rs_assert_error(&err, c, "suite_hash", "hash-B");
    assert_false(rs_file_exists(out));

    const char *same[] = {a, d};
    assert_int_not_equal(results_store_merge(same, 2, out, &err), 0);
    rs_assert_error(&err, d, "repeats", "1/2");
    assert_false(rs_file_exists(out));

    const char *missing[] = {a, "/nonexistent/shard.h5"};
    assert_int_not_equal(results_store_merge(missing, 2, out, &err), 0);
    rs_assert_error(&err, "/nonexistent/shard.h5", "cannot open", NULL);
    assert_false(rs_file_exists(out));

    unlink(a);
    unlink(b);
    unlink(c);
    unlink(d);
    result_list_free(&all);
}

KR_TEST_MAIN_SETUP(rs_dir_setup, rs_dir_teardown,
    test_field_table_covers_result_t, test_field_table_csv_json, test_missing_values_everywhere,
    test_round_trip_every_field, test_round_trip_empty, test_write_failures_leave_nothing,
    test_sort_key_and_stability, test_merge_three_shards_equals_one_run, test_merge_refusals);
