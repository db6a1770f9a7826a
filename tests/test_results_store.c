/* Results files (harness/results/results_store.h, harness/results/result_fields.h): round
 * trips of rows with every field set, provenance, the sort key, shard merging
 * and its refusals, resume partials, and the reader's refusal of truncated,
 * foreign and incomplete files with one line naming file and field.
 *
 * Rows are compared member by member with an explicit list written here (not
 * through the field table), and doubles bit for bit, so a field the table
 * forgot or a NaN that became 0 fails.  Malformed files are built with the
 * HDF5 C API directly (raw_write), never with the writer. */
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
#include "results_store.h"
#include "test_main.h"
#include "test_support.h"

/* ---------------------------------------------------------------- paths */

/* Every file of this test lives in its own folder, so counting leftover
 * temporary files is not confused by other tests running in parallel. */
static char g_dir[512];

static int make_dir_setup(void **state)
{
    (void)state;
    test_tmp_path(g_dir, sizeof g_dir, "results_store");
    return mkdir(g_dir, 0777);
}

/* rm -r of our own folder (no symlinks are made in it). */
static void remove_tree(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return;
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        struct dirent *e;
        while (d && (e = readdir(d))) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            char sub[1024];
            if ((size_t)snprintf(sub, sizeof sub, "%s/%s", path, e->d_name) < sizeof sub)
                remove_tree(sub);
        }
        if (d)
            closedir(d);
        rmdir(path);
    } else {
        unlink(path);
    }
}

static int remove_dir_teardown(void **state)
{
    (void)state;
    if (g_dir[0] && !getenv("KR_TEST_KEEP_TMP"))
        remove_tree(g_dir);
    return 0;
}

static void tpath(char *buf, size_t cap, const char *name)
{
    static int n;
    if ((size_t)snprintf(buf, cap, "%s/%d-%s", g_dir, n++, name) >= cap)
        fail_msg("path too long");
}

/* ---------------------------------------------------------------- rows */

static void fill_str(char *dst, size_t cap, test_rng_t *r, const char *prefix, size_t len)
{
    /* len >= cap: no terminator at all, the writer must cut it at cap - 1. */
    size_t i = 0;
    for (; prefix[i] && i < cap; i++)
        dst[i] = prefix[i];
    for (; i < len && i < cap; i++)
        dst[i] = (char)('a' + test_rng_u64(r) % 26);
    if (len < cap)
        dst[len] = '\0';
}

/* Row i of a synthetic run: every member distinct and non-zero; some doubles
 * NaN / +Inf / -Inf; some strings full to the last byte or unterminated. */
static void make_row(result_t *r, int i, test_rng_t *g)
{
    char pre[64];
    /* Four rows per case (2 kernels x 2 references) share its path. */
    test_rng_t cg = {(uint64_t)(i / 4) * 7919u + 1};
    snprintf(pre, sizeof pre, "/cases/c%03d_", i / 4);
    fill_str(r->case_path, sizeof r->case_path, &cg, pre,
             (i / 4) % 3 == 0 ? 600 : 40 + (size_t)i / 4);
    snprintf(pre, sizeof pre, "c%03d", i / 4);
    fill_str(r->case_name, sizeof r->case_name, g, pre, 20);
    r->M = 1 + i * 37;
    r->N = 5120 + i;
    r->K = 17408 + 2 * i;
    fill_str(r->band, sizeof r->band, g, i % 2 ? "decode" : "prefill", i % 3 == 0 ? 16 : 9);
    snprintf(r->kernel, sizeof r->kernel, "%s", (i / 2) % 2 ? "w4a8.perblock" : "w4a4.aiter");
    snprintf(r->reference, sizeof r->reference, "%s", i % 2 ? "R_source" : "R_exact");
    fill_str(r->act_origin, sizeof r->act_origin, g, "recorded x_fp8 ", 95);
    metrics_t *m = &r->metrics;
    m->count = 100000 + i;
    m->finite_count = 99000 + i;
    m->rel_fro = i == 0 ? NAN : 1e-3 * (i + 1) + test_rng_uniform(g) * 1e-6;
    m->nmse = m->rel_fro * m->rel_fro + 1e-300;
    m->max_abs = i == 1 ? INFINITY : 0.5 + i;
    m->max_abs_index = 77 + i;
    m->worst_row_rel = i == 2 ? INFINITY : 3e-3 + i * 1e-5;
    m->worst_row = 5 + i;
    m->cosine = i == 3 ? -INFINITY : 0.99 - i * 1e-4;
    m->mag_ratio = 1.0 + i * 1e-3;
    m->out_nf = (nonfinite_t){11 + i, 12 + i, 13 + i};
    m->ref_nf = (nonfinite_t){21 + i, 22 + i, 23 + i};
    r->ulp.count = 200000 + i;
    r->ulp.identical = 150000 + i;
    r->ulp.identical_frac = (double)r->ulp.identical / (double)r->ulp.count;
    r->ulp.max_ulp = 0x100000000ull + (uint64_t)i;   /* above 32 bits */
    for (int b = 0; b < ULP_BIN_COUNT; b++)
        r->ulp.bins[b] = (int64_t)1000 * (b + 1) + i + ((int64_t)1 << 40) * (b == 18);
    r->input_nf = (nonfinite_t){31 + i, 32 + i, 33 + i};
    r->threshold = 0.0125 + i;
    r->verdict = (verdict_t)(i % VERDICT_COUNT);
    fill_str(r->note, sizeof r->note, g, "rel_fro <&> \"quoted\" ", i % 4 == 1 ? 512 : 100);
    r->seconds = 0.25 * (i + 1);
    r->ref_f32_vs_f64 = i == 4 ? NAN : 1e-7 * (i + 1);
    fill_str(r->diagnosis, sizeof r->diagnosis, g, "matches scale off by 2: ", 200);
    snprintf(r->device, sizeof r->device, "gpu%d", i);
    r->reruns = 3 + i;
    r->rerun_diff = -(int64_t)(7 + i);
    r->canary_ok = i % 2 ? 1 : -1;
    r->time_ms = i == 5 ? NAN : 0.125 * (i + 1);
    r->tflops = 100.5 + i;
    r->gbps = -(2000.25 + i);
}

static void make_rows(result_list_t *l, int n, uint64_t seed)
{
    memset(l, 0, sizeof *l);
    test_rng_t g = {seed};
    for (int i = 0; i < n; i++) {
        result_t *r = result_list_add(l);
        assert_non_null(r);
        make_row(r, i, &g);
    }
}

/* What a reader returns for r: every string cut at its member's size - 1. */
static void expect_cut(result_t *r)
{
    r->case_path[sizeof r->case_path - 1] = '\0';
    r->case_name[sizeof r->case_name - 1] = '\0';
    r->band[sizeof r->band - 1] = '\0';
    r->kernel[sizeof r->kernel - 1] = '\0';
    r->reference[sizeof r->reference - 1] = '\0';
    r->act_origin[sizeof r->act_origin - 1] = '\0';
    r->note[sizeof r->note - 1] = '\0';
    r->diagnosis[sizeof r->diagnosis - 1] = '\0';
    r->device[sizeof r->device - 1] = '\0';
}

#define EQ_I(f)                                                                               \
    do {                                                                                      \
        if ((long long)a->f != (long long)b->f)                                               \
            fail_msg("row %lld: %s: %lld != %lld", (long long)row, #f, (long long)a->f,       \
                     (long long)b->f);                                                        \
    } while (0)
#define EQ_D(f)                                                                               \
    do {                                                                                      \
        if (memcmp(&a->f, &b->f, sizeof(double)) != 0)                                        \
            fail_msg("row %lld: %s: %a != %a", (long long)row, #f, a->f, b->f);               \
    } while (0)
#define EQ_S(f)                                                                               \
    do {                                                                                      \
        if (strncmp(a->f, b->f, sizeof a->f) != 0)                                            \
            fail_msg("row %lld: %s: \"%.60s\" != \"%.60s\"", (long long)row, #f, a->f, b->f); \
    } while (0)

static void assert_row_equal(const result_t *a, const result_t *b, int64_t row)
{
    EQ_S(case_path); EQ_S(case_name);
    EQ_I(M); EQ_I(N); EQ_I(K);
    EQ_S(band); EQ_S(kernel); EQ_S(reference); EQ_S(act_origin);
    EQ_I(metrics.count); EQ_I(metrics.finite_count);
    EQ_D(metrics.rel_fro); EQ_D(metrics.nmse); EQ_D(metrics.max_abs);
    EQ_I(metrics.max_abs_index); EQ_D(metrics.worst_row_rel); EQ_I(metrics.worst_row);
    EQ_D(metrics.cosine); EQ_D(metrics.mag_ratio);
    EQ_I(metrics.out_nf.nan); EQ_I(metrics.out_nf.pos_inf); EQ_I(metrics.out_nf.neg_inf);
    EQ_I(metrics.ref_nf.nan); EQ_I(metrics.ref_nf.pos_inf); EQ_I(metrics.ref_nf.neg_inf);
    EQ_I(ulp.count); EQ_I(ulp.identical); EQ_D(ulp.identical_frac);
    if (a->ulp.max_ulp != b->ulp.max_ulp)
        fail_msg("row %lld: ulp.max_ulp differs", (long long)row);
    for (int k = 0; k < ULP_BIN_COUNT; k++)
        EQ_I(ulp.bins[k]);
    EQ_I(input_nf.nan); EQ_I(input_nf.pos_inf); EQ_I(input_nf.neg_inf);
    EQ_D(threshold); EQ_I(verdict); EQ_S(note); EQ_D(seconds); EQ_D(ref_f32_vs_f64);
    EQ_S(diagnosis); EQ_S(device); EQ_I(reruns); EQ_I(rerun_diff); EQ_I(canary_ok);
    EQ_D(time_ms); EQ_D(tflops); EQ_D(gbps);
    EQ_S(acc_fit.model); EQ_S(acc_fit.runner_up); EQ_D(acc_fit.resid_fp32); EQ_D(acc_fit.resid_best);
    EQ_D(acc_fit.resid_runner_up); EQ_I(acc_fit.sampled);
}

static void assert_lists_equal(const result_list_t *a, const result_list_t *b)
{
    assert_int_equal(a->count, b->count);
    for (int64_t i = 0; i < a->count; i++)
        assert_row_equal(&a->rows[i], &b->rows[i], i);
}

static void copy_list(result_list_t *dst, const result_list_t *src)
{
    memset(dst, 0, sizeof *dst);
    for (int64_t i = 0; i < src->count; i++) {
        result_t *r = result_list_add(dst);
        assert_non_null(r);
        *r = src->rows[i];
    }
}

static void set_meta(results_meta_t *m, const char *tag, const char *suite_hash, const char *shard)
{
    results_meta_init(m);
    snprintf(m->version, sizeof m->version, "0.1.%s", tag);
    snprintf(m->git_commit, sizeof m->git_commit, "abbbd9d%s", tag);
    snprintf(m->host, sizeof m->host, "node-%s.cluster", tag);
    snprintf(m->device, sizeof m->device, "cpu + MI355X (gfx950) %s", tag);
    snprintf(m->kernel_build_id, sizeof m->kernel_build_id, "aiter@1f2e3d/%s", tag);
    snprintf(m->suite_name, sizeof m->suite_name, "nightly-default");
    snprintf(m->suite_hash, sizeof m->suite_hash, "%s", suite_hash);
    snprintf(m->time_utc, sizeof m->time_utc, "2025-01-0%sT03:04:05Z", tag);
    size_t n = 0;
    n += (size_t)snprintf(m->command + n, sizeof m->command - n, "kreplay gate \xc3\xa9t\xc3\xa9 ");
    while (n < 3000)
        n += (size_t)snprintf(m->command + n, sizeof m->command - n, "--case /x/%zu.h5 ", n);
    snprintf(m->shard, sizeof m->shard, "%s", shard);
}

#define META_EQ(f) assert_string_equal(a->f, b->f)

static void assert_meta_equal(const results_meta_t *a, const results_meta_t *b)
{
    assert_string_equal(b->schema, RESULTS_SCHEMA_V2);
    META_EQ(version); META_EQ(git_commit); META_EQ(host); META_EQ(device);
    META_EQ(kernel_build_id); META_EQ(suite_name); META_EQ(suite_hash);
    META_EQ(time_utc); META_EQ(command); META_EQ(shard);
}

/* One line, naming the file, containing every phrase given. */
static void assert_error(const kr_error_t *err, const char *path, const char *p1, const char *p2)
{
    if (getenv("KR_TEST_SHOW_ERRORS"))   /* to read the messages a user gets */
        fprintf(stderr, "  %s\n", err->msg);
    if (!strstr(err->msg, path))
        fail_msg("error does not name %s: %s", path, err->msg);
    if (strchr(err->msg, '\n'))
        fail_msg("error is not one line: %s", err->msg);
    if (p1 && !strstr(err->msg, p1))
        fail_msg("error lacks \"%s\": %s", p1, err->msg);
    if (p2 && !strstr(err->msg, p2))
        fail_msg("error lacks \"%s\": %s", p2, err->msg);
}

static int file_exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

/* Files in dir whose name contains s. */
static int count_matching(const char *dir, const char *s)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += strstr(e->d_name, s) != NULL;
    closedir(d);
    return n;
}

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
    make_rows(&l, 3, 5);
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
    tpath(path, sizeof path, "missing.h5");
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
    make_rows(&in, 2 * VERDICT_COUNT, 42);
    /* A member with no terminator anywhere, and bytes after a terminator. */
    memset(in.rows[3].note, 'Q', sizeof in.rows[3].note);
    memset(in.rows[6].device, 'D', sizeof in.rows[6].device);
    snprintf(in.rows[7].kernel, sizeof in.rows[7].kernel, "k");
    memset(in.rows[7].kernel + 2, 'G', 10);   /* garbage after the NUL is not data */
    copy_list(&expect, &in);
    for (int64_t i = 0; i < expect.count; i++)
        expect_cut(&expect.rows[i]);

    results_meta_t meta, got;
    set_meta(&meta, "1", "sha256:4be1", "2/5");
    char path[512];
    tpath(path, sizeof path, "rt.h5");
    write_then_read(path, &in, &meta, &out, &got);
    assert_lists_equal(&expect, &out);
    assert_meta_equal(&meta, &got);
    assert_int_equal(strlen(out.rows[3].note), sizeof out.rows[3].note - 1);
    assert_true(isnan(out.rows[0].metrics.rel_fro));
    assert_true(isinf(out.rows[3].metrics.cosine) && out.rows[3].metrics.cosine < 0);
    assert_int_equal(out.rows[VERDICT_REGRESSED].verdict, VERDICT_REGRESSED);
    /* Nothing but the result was left in the folder. */
    assert_int_equal(count_matching(g_dir, ".tmp."), 0);

    /* Rewriting replaces the file whole. */
    result_list_t small;
    make_rows(&small, 2, 7);
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
    set_meta(&meta, "2", "h", "");
    char path[512];
    tpath(path, sizeof path, "empty.h5");
    write_then_read(path, &in, &meta, &out, &got);
    assert_int_equal(out.count, 0);
    assert_meta_equal(&meta, &got);
    result_list_free(&out);
    unlink(path);
}

static void test_write_failures_leave_nothing(void **state)
{
    (void)state;
    result_list_t in;
    make_rows(&in, 3, 9);
    kr_error_t err = {{0}};
    char path[512];
    tpath(path, sizeof path, "no-such-dir");
    strcat(path, "/r.h5");
    assert_int_not_equal(results_store_write(path, &in, NULL, &err), 0);
    assert_error(&err, path, "cannot create the temporary file", NULL);
    assert_false(file_exists(path));

    /* The target is a directory: the rename fails, the temporary file goes. */
    char dir[512];
    tpath(dir, sizeof dir, "is-a-dir.h5");
    assert_int_equal(mkdir(dir, 0777), 0);
    assert_int_not_equal(results_store_write(dir, &in, NULL, &err), 0);
    assert_error(&err, dir, "rename", NULL);
    assert_int_equal(count_matching(g_dir, ".tmp."), 0);
    rmdir(dir);
    result_list_free(&in);
}

/* ---------------------------------------------------------------- sort and merge */

static void test_sort_key_and_stability(void **state)
{
    (void)state;
    result_list_t l;
    make_rows(&l, 24, 11);
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
    make_rows(&all, 40, 2024);
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
    copy_list(&expect, &all);
    assert_int_equal(result_list_sort(&expect), 0);
    for (int64_t i = 0; i < expect.count; i++)
        expect_cut(&expect.rows[i]);

    char p[3][512], merged[512];
    const char *paths[3];
    for (int s = 0; s < 3; s++) {
        tpath(p[s], sizeof p[s], "shard.h5");
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
        set_meta(&m, tag, "sha256:same", shard);
        kr_error_t err = {{0}};
        if (results_store_write(p[s], &part, &m, &err) != 0)
            fail_msg("%s", err.msg);
        result_list_free(&part);
    }
    /* Given out of order: the result does not depend on it. */
    paths[0] = p[2];
    paths[1] = p[0];
    paths[2] = p[1];
    tpath(merged, sizeof merged, "merged.h5");
    kr_error_t err = {{0}};
    if (results_store_merge(paths, 3, merged, &err) != 0)
        fail_msg("%s", err.msg);
    results_meta_t got;
    if (results_store_read(merged, &out, &got, &err) != 0)
        fail_msg("%s", err.msg);
    assert_lists_equal(&expect, &out);
    assert_string_equal(got.shard, "merged 3 of 3");
    assert_string_equal(got.host, "node-5.cluster");     /* the first file given */
    assert_string_equal(got.suite_hash, "sha256:same");

    /* Two of three shards: the rows of those two, and the provenance says so. */
    char two[512];
    tpath(two, sizeof two, "merged2.h5");
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
    make_rows(&all, 24, 77);   /* 6 cases of 4 rows */
    char a[512], b[512], c[512], d[512], out[512];
    tpath(a, sizeof a, "ovl-a.h5");
    tpath(b, sizeof b, "ovl-b.h5");
    tpath(c, sizeof c, "other-suite.h5");
    tpath(d, sizeof d, "same-shard.h5");
    tpath(out, sizeof out, "refused.h5");
    results_meta_t m1, m2, m3, m4;
    set_meta(&m1, "1", "hash-A", "1/2");
    set_meta(&m2, "2", "hash-A", "2/2");
    set_meta(&m3, "3", "hash-B", "2/2");
    set_meta(&m4, "4", "hash-A", "1/2");
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
    assert_error(&err, a, "overlapping", all.rows[8].case_path);
    assert_non_null(strstr(err.msg, b));
    assert_false(file_exists(out));

    const char *suites[] = {a, c};
    assert_int_not_equal(results_store_merge(suites, 2, out, &err), 0);
    assert_error(&err, c, "suite_hash", "hash-B");
    assert_false(file_exists(out));

    const char *same[] = {a, d};
    assert_int_not_equal(results_store_merge(same, 2, out, &err), 0);
    assert_error(&err, d, "repeats", "1/2");
    assert_false(file_exists(out));

    const char *missing[] = {a, "/nonexistent/shard.h5"};
    assert_int_not_equal(results_store_merge(missing, 2, out, &err), 0);
    assert_error(&err, "/nonexistent/shard.h5", "cannot open", NULL);
    assert_false(file_exists(out));

    unlink(a);
    unlink(b);
    unlink(c);
    unlink(d);
    result_list_free(&all);
}

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
    make_rows(&in, 9, 314);
    copy_list(&expect, &in);
    for (int64_t i = 0; i < expect.count; i++)
        expect_cut(&expect.rows[i]);
    char path[512];
    tpath(path, sizeof path, "extra.h5");
    raw_write(path, &in, &(raw_opts_t){.extra = 1});
    kr_error_t err = {{0}};
    results_meta_t got;
    if (results_store_read(path, &out, &got, &err) != 0)
        fail_msg("%s", err.msg);
    assert_lists_equal(&expect, &out);
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
    make_rows(&rows, 300, 8);
    kr_error_t err = {{0}};
    result_list_t out;
    results_meta_t meta;
    char path[512];

    /* Missing file; a directory. */
    tpath(path, sizeof path, "absent.h5");
    assert_int_not_equal(results_store_read(path, &out, &meta, &err), 0);
    assert_error(&err, path, "cannot open", NULL);
    assert_int_equal(out.count, 0);
    assert_int_not_equal(results_store_read(KREPLAY_TEST_TMP, &out, &meta, &err), 0);
    assert_error(&err, KREPLAY_TEST_TMP, "is a directory", NULL);

    /* Not HDF5: text, and an empty file. */
    tpath(path, sizeof path, "text.h5");
    FILE *fp = fopen(path, "w");
    fputs("case,kernel,rel_fro\nx,y,0.1\n", fp);
    fclose(fp);
    assert_int_not_equal(results_store_read(path, &out, &meta, &err), 0);
    assert_error(&err, path, "not an HDF5 file", NULL);
    fp = fopen(path, "w");
    fclose(fp);
    assert_int_not_equal(results_store_read(path, &out, &meta, &err), 0);
    assert_error(&err, path, "not an HDF5 file", NULL);
    unlink(path);

    /* Truncated at several points: never a crash, always one line. */
    tpath(path, sizeof path, "trunc.h5");
    if (results_store_write(path, &rows, NULL, &err) != 0)
        fail_msg("%s", err.msg);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    const double cuts[] = {0.999, 0.75, 0.5, 0.1, 0.01};
    for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++) {
        char cut[512];
        tpath(cut, sizeof cut, "trunc-cut.h5");
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
        assert_error(&err, cut, NULL, NULL);
        assert_int_equal(out.count, 0);
        unlink(cut);
    }
    unlink(path);

    /* A case file (another schema), and no schema at all. */
    tpath(path, sizeof path, "case.h5");
    raw_write(path, &rows, &(raw_opts_t){.schema = "kreplay.case/1"});
    assert_int_not_equal(results_store_read(path, &out, &meta, &err), 0);
    assert_error(&err, path, "kreplay.case/1", RESULTS_SCHEMA_V1);
    raw_write(path, &rows, &(raw_opts_t){.schema = ""});
    assert_int_not_equal(results_store_read(path, &out, &meta, &err), 0);
    assert_error(&err, path, "no schema attribute", NULL);

    /* A field missing: named. */
    raw_write(path, &rows, &(raw_opts_t){.omit = "metrics.worst_row_rel"});
    assert_int_not_equal(results_store_read(path, &out, &meta, &err), 0);
    assert_error(&err, path, "'metrics.worst_row_rel' is missing", NULL);
    raw_write(path, &rows, &(raw_opts_t){.omit = "ulp.bins", .extra = 1});
    assert_int_not_equal(results_store_read(path, &out, &meta, &err), 0);
    assert_error(&err, path, "'ulp.bins' is missing", NULL);

    /* A field of the wrong type, an unknown verdict. */
    raw_write(path, &rows, &(raw_opts_t){.as_string = "metrics.rel_fro"});
    assert_int_not_equal(results_store_read(path, &out, &meta, &err), 0);
    assert_error(&err, path, "'metrics.rel_fro'", "expected float64");
    raw_write(path, &rows, &(raw_opts_t){.bad_verdict = "MAYBE"});
    assert_int_not_equal(results_store_read(path, &out, &meta, &err), 0);
    assert_error(&err, path, "MAYBE", "verdict");
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
    make_rows(&all, 20, 555);   /* 5 cases of 4 rows */
    copy_list(&expect, &all);
    assert_int_equal(result_list_sort(&expect), 0);
    for (int64_t i = 0; i < expect.count; i++)
        expect_cut(&expect.rows[i]);

    char run[512];
    tpath(run, sizeof run, "rundir");
    kr_error_t err = {{0}};
    result_list_t loaded = {0};
    char **keys;
    int nk;
    /* No partial/ yet: nothing done, not an error. */
    if (results_store_load_partials(run, &loaded, &keys, &nk, &err) != 0)
        fail_msg("%s", err.msg);
    assert_int_equal(nk, 0);

    results_meta_t meta;
    set_meta(&meta, "7", "suite-h", "");
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
    assert_lists_equal(&expect, &out);

    /* A damaged partial is an error naming it; the caller's list is untouched. */
    char bad[700];
    snprintf(bad, sizeof bad, "%s/partial/ffffffffffffffff-bad.h5", run);
    fp = fopen(bad, "w");
    fputs("not hdf5", fp);
    fclose(fp);
    result_list_t again = {0};
    assert_int_not_equal(results_store_load_partials(run, &again, &keys, &nk, &err), 0);
    assert_error(&err, bad, "delete it", NULL);
    assert_int_equal(again.count, 0);
    assert_null(keys);
    result_list_free(&again);

    result_list_free(&out);
    result_list_free(&loaded);
    result_list_free(&all);
    result_list_free(&expect);
}

KR_TEST_MAIN_SETUP(make_dir_setup, remove_dir_teardown,
    test_field_table_covers_result_t, test_field_table_csv_json, test_missing_values_everywhere,
    test_round_trip_every_field, test_round_trip_empty, test_write_failures_leave_nothing,
    test_sort_key_and_stability, test_merge_three_shards_equals_one_run, test_merge_refusals,
    test_read_by_name_ignores_unknown_fields, test_read_refuses_bad_files, test_partials_resume);
