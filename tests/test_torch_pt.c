/* ctest-labels: blas-bits */
/* torch.save files read in C (harness/case/torch_pt.c, pt_import.c, case_load.c,
 * cli/cli_import.c), against fixtures written by a real torch
 * (scripts/fixtures/make_pt_fixtures.py, torch 2.11) and their HDF5 twins
 * written by h5py from the same arrays:
 *  - every supported dtype, 0-d, empty and non-contiguous views parse to the
 *    exact bits torch holds;
 *  - the _debug_compare dump (and a non-contiguous variant) imports to the
 *    same case as its HDF5 twin, replays to the same rows in-process and
 *    through `kreplay replay --json`, and `kreplay import` writes it;
 *  - unsupported dtypes, opcodes and globals are refused naming the file and
 *    the offending name; truncated zips, a zip without data.pkl, a bad storage
 *    key, a record of the wrong size and a tensor larger than its storage are
 *    clear errors; every single-byte corruption and truncation of a real
 *    data.pkl fails cleanly or parses (run under ASan by KREPLAY_SANITIZE). */
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
#include "replay.h"
#include "test_main.h"
#include "test_support.h"
#include "torch_pt.h"

int cli_import(int argc, char **argv);

#define FIX KREPLAY_SOURCE_DIR "/tests/fixtures/pt"
#define SUBSET "not in the supported torch.save subset"

/* ---- helpers ---- */

static void assert_contains(const char *hay, const char *needle)
{
    if (!strstr(hay, needle))
        fail_msg("expected \"%s\" in the message:\n  %s", needle, hay);
}

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

static void assert_bytes(const void *a, const void *b, size_t n, const char *what)
{
    if ((a == NULL) != (b == NULL))
        fail_msg("%s: present on one side only", what);
    if (a && memcmp(a, b, n))
        fail_msg("%s: bytes differ", what);
}

/* Two cases with the same arrays (the provenance may differ). */
static void assert_same_case(const case_t *a, const case_t *b)
{
    assert_int_equal(a->M, b->M);
    assert_int_equal(a->N, b->N);
    assert_int_equal(a->K, b->K);
    int64_t M = a->M, N = a->N, K = a->K;
    assert_int_equal(a->x_storage, b->x_storage);
    assert_bytes(a->x, b->x, (size_t)(M * K) * sizeof(float), "x");
    assert_bytes(a->x_fp8, b->x_fp8, (size_t)(M * K), "x_fp8");
    assert_int_equal(a->x_fp8_format, b->x_fp8_format);
    assert_bytes(a->x_scale, b->x_scale, (size_t)M * sizeof(float), "x_scale");
    assert_bytes(a->weight, b->weight, (size_t)(N * K / 2), "weight");
    assert_int_equal(a->weight_order, b->weight_order);
    assert_int_equal(a->scale_layout, b->scale_layout);
    assert_bytes(a->weight_scale, b->weight_scale, (size_t)(N * K / 32), "weight_scale");
    assert_int_equal(a->weight_ref_len, b->weight_ref_len);
    assert_bytes(a->weight_ref, b->weight_ref, (size_t)a->weight_ref_len, "weight_ref");
    assert_bytes(a->out, b->out, (size_t)(M * N) * 2, "out");
    assert_bytes(a->out_rerun, b->out_rerun, (size_t)(M * N) * 2, "out_rerun");
    assert_bytes(a->aiter, b->aiter, (size_t)(M * N) * 2, "aiter");
    assert_bytes(a->ref_recorded, b->ref_recorded, (size_t)(M * N) * sizeof(float),
                 "ref_recorded");
    assert_bytes(a->weight_bf16, b->weight_bf16, (size_t)(N * K) * 2, "weight_bf16");
}

static int fixtures_present(void)
{
    const char *need[] = {"dump.pt", "dump.h5", "dump_noncontig.pt", "dump_square.pt",
                          "dtypes.pt", "dtypes.h5", "unsupported_complex.pt",
                          "unsupported_set.pt", "dtypes_typed.pt", "dtypes_v3.pt",
                          "dtypes_more.h5", "refused_int16.pt", "refused_uint16.pt",
                          "refused_e5m2fnuz.pt"};
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++) {
        char p[1024];
        struct stat st;
        snprintf(p, sizeof p, FIX "/%s", need[i]);
        if (stat(p, &st) != 0)
            return 0;
    }
    return 1;
}

/* ---- every dtype, exact ---- */

static pt_dtype_t expected_dtype(const char *key)
{
    if (!strncmp(key, "f8", 2))
        return PT_DT_FLOAT8_E4M3FN;
    if (!strcmp(key, "bf16"))
        return PT_DT_BFLOAT16;
    if (!strcmp(key, "f16"))
        return PT_DT_FLOAT16;
    if (!strcmp(key, "u8"))
        return PT_DT_UINT8;
    if (!strcmp(key, "i32"))
        return PT_DT_INT32;
    if (!strcmp(key, "i64"))
        return PT_DT_INT64;
    return PT_DT_FLOAT32;
}

static void test_dtypes_exact(void **state)
{
    (void)state;
    const char *keys[] = {"f8", "bf16", "f16", "f32", "u8", "i32", "i64", "scalar0d", "empty",
                          "f32_row", "base_t", "base_step", "f8_t"};
    kr_error_t err = {{0}};
    pt_file_t *f = NULL;
    if (pt_open(FIX "/dtypes.pt", &f, &err))
        fail_msg("%s", err.msg);
    const pt_value_t *root = pt_root(f);
    assert_int_equal(root->kind, PT_DICT);
    hid_t h5 = H5Fopen(FIX "/dtypes.h5", H5F_ACC_RDONLY, H5P_DEFAULT);
    assert_true(h5 >= 0);
    int noncontig = 0;
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const pt_value_t *v = pt_dict_get(root, keys[i]);
        assert_non_null(v);
        assert_int_equal(v->kind, PT_TENSOR);
        const pt_tensor_t *t = v->tensor;
        if (t->dtype != expected_dtype(keys[i]))
            fail_msg("%s: dtype %s", keys[i], pt_dtype_name(t->dtype));
        noncontig += !t->contiguous;

        hid_t ds = H5Dopen2(h5, keys[i], H5P_DEFAULT);
        assert_true(ds >= 0);
        hid_t sp = H5Dget_space(ds), ft = H5Dget_type(ds);
        hid_t nt = H5Tget_native_type(ft, H5T_DIR_ASCEND);
        hsize_t dims[8];
        int rank = H5Sget_simple_extent_ndims(sp);
        H5Sget_simple_extent_dims(sp, dims, NULL);
        assert_int_equal(rank, t->rank);
        for (int d = 0; d < rank; d++)
            assert_int_equal((int64_t)dims[d], t->sizes[d]);
        assert_int_equal(H5Tget_size(nt), pt_dtype_size(t->dtype));
        assert_int_equal((int64_t)H5Sget_simple_extent_npoints(sp), t->numel);

        void *got = NULL;
        if (pt_tensor_read(f, t, keys[i], &got, &err))
            fail_msg("%s", err.msg);
        size_t bytes = (size_t)t->numel * pt_dtype_size(t->dtype);
        if (bytes) {
            void *want = malloc(bytes);
            assert_true(H5Dread(ds, nt, H5S_ALL, H5S_ALL, H5P_DEFAULT, want) >= 0);
            if (memcmp(got, want, bytes))
                fail_msg("%s: the values differ from torch's", keys[i]);
            free(want);
        }
        free(got);
        H5Tclose(nt);
        H5Tclose(ft);
        H5Sclose(sp);
        H5Dclose(ds);
    }
    H5Fclose(h5);
    assert_int_equal(noncontig, 3);   /* base_t, base_step, f8_t */
    assert_int_equal(pt_dict_get(root, "f32_row")->tensor->offset, 4);
    assert_int_equal(pt_dict_get(root, "base_step")->tensor->offset, 1);

    /* the scalars, one per pickle width */
    const pt_value_t *v;
    assert_int_equal(pt_dict_get(root, "int1")->i, 7);
    assert_int_equal(pt_dict_get(root, "int2")->i, 300);
    assert_int_equal(pt_dict_get(root, "int4")->i, -70000);
    assert_int_equal(pt_dict_get(root, "long")->i, (INT64_C(1) << 40) + 1);
    assert_int_equal(pt_dict_get(root, "neg_long")->i, -(INT64_C(1) << 50));
    v = pt_dict_get(root, "float");
    assert_int_equal(v->kind, PT_FLOAT);
    assert_true(v->f == 1.5);
    v = pt_dict_get(root, "true");
    assert_int_equal(v->kind, PT_BOOL);
    assert_int_equal(v->i, 1);
    assert_int_equal(pt_dict_get(root, "none")->kind, PT_NONE);
    v = pt_dict_get(root, "list");
    assert_int_equal(v->kind, PT_LIST);
    assert_int_equal(v->n, 3);
    assert_int_equal(v->items[2]->i, 3);
    v = pt_dict_get(root, "tuple");
    assert_int_equal(v->kind, PT_TUPLE);
    assert_int_equal(v->n, 2);
    assert_string_equal(v->items[1]->s, "five");
    assert_null(pt_dict_get(root, "absent"));
    pt_close(f);
}

/* ---- the dump ---- */

static void load_ok(const char *path, case_t *c, const case_load_options_t *o)
{
    kr_error_t err = {{0}};
    if (case_load(path, c, o, &err))
        fail_msg("case_load(%s): %s", path, err.msg);
}

static void test_dump_matches_h5_twin(void **state)
{
    (void)state;
    case_t pt, nc, h5;
    load_ok(FIX "/dump.pt", &pt, NULL);
    load_ok(FIX "/dump_noncontig.pt", &nc, NULL);
    load_ok(FIX "/dump.h5", &h5, NULL);          /* case_load reads HDF5 too */
    /* the dispatch's dump has no capture time: the file's mtime, said to be one */
    assert_non_null(pt.capture_time);
    assert_string_equal(pt.capture_time_source, "file mtime");
    assert_null(pt.route);
    assert_null(pt.tp_rank);
    assert_same_case(&pt, &h5);
    assert_same_case(&nc, &h5);                   /* strides and offsets applied */

    assert_int_equal(pt.M, 5);
    assert_int_equal(pt.N, 32);
    assert_int_equal(pt.K, 64);
    assert_int_equal(pt.x_storage, X_STORED_BF16);
    assert_int_equal(pt.scale_layout, SCALE_LAYOUT_KN);      /* [K/32, N], from the shape */
    assert_int_equal(pt.weight_order, WEIGHT_ORDER_CHECKPOINT);
    assert_int_equal(pt.weight_ref_len, 32);
    assert_non_null(pt.ref_recorded);                         /* the dump's "aiter" */
    assert_null(pt.aiter);
    assert_string_equal(pt.kernel_path, PT_IMPORT_KERNEL_PATH);
    assert_string_equal(pt.path, FIX "/dump.pt");
    assert_non_null(pt.capture_time);
    assert_int_equal(strlen(pt.capture_time), 20);            /* YYYY-MM-DDTHH:MM:SSZ */
    assert_int_equal(pt.capture_time[19], 'Z');
    /* non-zero data throughout, and the rerun differs from out in one element */
    for (int64_t i = 0; i < pt.M * pt.K; i++)
        assert_true(pt.x[i] != 0.0f);
    int64_t diff = 0;
    for (int64_t i = 0; i < pt.M * pt.N; i++)
        diff += pt.out[i] != pt.out_rerun[i];
    assert_int_equal(diff, 1);

    /* ref_recorded survives case_write/case_read */
    char tmp[1024];
    test_tmp_path(tmp, sizeof tmp, "pt-roundtrip.h5");
    kr_error_t err = {{0}};
    if (case_write(tmp, &pt, &err))
        fail_msg("%s", err.msg);
    case_t back;
    if (case_read(tmp, &back, &err))
        fail_msg("%s", err.msg);
    assert_same_case(&back, &pt);
    assert_string_equal(back.capture_time, pt.capture_time);
    case_free(&back);
    /* ... and the reader checks its shape: [N, M] is refused */
    hid_t h = H5Fopen(tmp, H5F_ACC_RDWR, H5P_DEFAULT);
    assert_true(h >= 0);
    assert_true(H5Ldelete(h, "ref_recorded", H5P_DEFAULT) >= 0);
    hsize_t dims[2] = {32, 5};
    hid_t sp = H5Screate_simple(2, dims, NULL);
    hid_t ds = H5Dcreate2(h, "ref_recorded", H5T_IEEE_F32LE, sp, H5P_DEFAULT, H5P_DEFAULT,
                          H5P_DEFAULT);
    assert_true(H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, pt.ref_recorded) >= 0);
    H5Dclose(ds);
    H5Sclose(sp);
    H5Fclose(h);
    assert_int_equal(case_read(tmp, &back, &err), -1);
    assert_contains(err.msg, "ref_recorded: wrong shape; expected [5, 32] (M, N) float32");
    unlink(tmp);

    /* options: the order is the user's word; a layout must agree with the shape */
    case_load_options_t o = {.weight_order_set = 1, .weight_order = WEIGHT_ORDER_FRAGMENT};
    case_t fr;
    load_ok(FIX "/dump.pt", &fr, &o);
    assert_int_equal(fr.weight_order, WEIGHT_ORDER_FRAGMENT);
    assert_memory_equal(fr.weight, pt.weight, 32 * 32);       /* as stored, not undone */
    case_free(&fr);
    case_load_options_t bad = {.scale_layout_set = 1, .scale_layout = SCALE_LAYOUT_NK};
    assert_int_equal(case_load(FIX "/dump.pt", &fr, &bad, &err), -1);
    assert_contains(err.msg, FIX "/dump.pt: weight_scale:");
    assert_contains(err.msg, "--scale-layout");

    case_free(&pt);
    case_free(&nc);
    case_free(&h5);
}

static void test_square_scale_needs_layout(void **state)
{
    (void)state;
    case_t c;
    kr_error_t err = {{0}};
    assert_int_equal(case_load(FIX "/dump_square.pt", &c, NULL, &err), -1);
    assert_contains(err.msg, FIX "/dump_square.pt: weight_scale:");
    assert_contains(err.msg, "N == K/32");
    assert_contains(err.msg, "--scale-layout");
    case_load_options_t o = {.scale_layout_set = 1, .scale_layout = SCALE_LAYOUT_KN};
    load_ok(FIX "/dump_square.pt", &c, &o);
    assert_int_equal(c.N, 2);
    assert_int_equal(c.scale_layout, SCALE_LAYOUT_KN);
    case_free(&c);
}

/* ---- replay: the same rows ---- */

static void replay_rows(const case_t *c, result_list_t *rows)
{
    replay_options_t o;
    replay_options_default(&o);
    kr_error_t err = {{0}};
    memset(rows, 0, sizeof *rows);
    if (replay_case(c, &o, rows, &err))
        fail_msg("replay_case: %s", err.msg);
}

static void assert_same_double(double a, double b, const char *what, const char *row)
{
    if (!((isnan(a) && isnan(b)) || a == b))
        fail_msg("%s: %s %.17g vs %.17g", row, what, a, b);
}

static void test_replay_in_process(void **state)
{
    (void)state;
    case_t pt, h5;
    load_ok(FIX "/dump.pt", &pt, NULL);
    load_ok(FIX "/dump.h5", &h5, NULL);
    result_list_t a, b;
    replay_rows(&pt, &a);
    replay_rows(&h5, &b);
    assert_int_equal(a.count, b.count);
    assert_true(a.count > 5);
    int recorded = 0;
    for (int64_t i = 0; i < a.count; i++) {
        const result_t *x = &a.rows[i], *y = &b.rows[i];
        char row[160];
        snprintf(row, sizeof row, "row %lld %s vs %s", (long long)i, x->kernel, x->reference);
        assert_string_equal(x->case_name, y->case_name);   /* "dump" for both */
        assert_string_equal(x->kernel, y->kernel);
        assert_string_equal(x->reference, y->reference);
        assert_string_equal(x->act_origin, y->act_origin);
        assert_int_equal(x->verdict, y->verdict);
        assert_string_equal(x->note, y->note);
        assert_string_equal(x->diagnosis, y->diagnosis);
        assert_string_equal(x->out_digest, y->out_digest);
        const metrics_t *m = &x->metrics, *n = &y->metrics;
        assert_int_equal(m->count, n->count);
        assert_int_equal(m->finite_count, n->finite_count);
        assert_same_double(m->rel_fro, n->rel_fro, "rel_fro", row);
        assert_same_double(m->nmse, n->nmse, "nmse", row);
        assert_same_double(m->max_abs, n->max_abs, "max_abs", row);
        assert_same_double(m->worst_row_rel, n->worst_row_rel, "worst_row_rel", row);
        assert_same_double(m->cosine, n->cosine, "cosine", row);
        assert_same_double(m->mag_ratio, n->mag_ratio, "mag_ratio", row);
        assert_int_equal(m->max_abs_index, n->max_abs_index);
        assert_int_equal(m->worst_row, n->worst_row);
        assert_memory_equal(&x->ulp.bins, &y->ulp.bins, sizeof x->ulp.bins);
        assert_int_equal(x->ulp.identical, y->ulp.identical);
        recorded += !strncmp(x->kernel, "recorded.", 9);
    }
    assert_true(recorded >= 2);    /* out and out_rerun were replayed too */
    result_list_free(&a);
    result_list_free(&b);
    case_free(&pt);
    case_free(&h5);
}

static json_t *replay_json(const char *path)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' replay --json '%s' 2>/dev/null", KREPLAY_BINARY, path);
    char *buf;
    assert_int_not_equal(test_shell(cmd, &buf), -1);
    json_error_t je;
    json_t *j = json_loads(buf, 0, &je);
    if (!j)
        fail_msg("kreplay replay --json %s did not print JSON:\n%.2000s", path, buf);
    free(buf);
    json_t *rows = json_object_get(j, "results");
    if (!json_is_array(rows) || json_array_size(rows) == 0)
        fail_msg("kreplay replay --json %s gave no rows (does cli_replay.c read its cases with "
                 "case_load()?)", path);
    return j;
}

static void test_cli_replay_pt_equals_h5(void **state)
{
    (void)state;
    json_t *a = replay_json(FIX "/dump.pt"), *b = replay_json(FIX "/dump.h5");
    json_t *ra = json_object_get(a, "results"), *rb = json_object_get(b, "results");
    assert_true(json_is_array(ra) && json_is_array(rb));
    assert_int_equal(json_array_size(ra), json_array_size(rb));
    assert_true(json_array_size(ra) > 5);
    for (size_t i = 0; i < json_array_size(ra); i++) {
        json_t *x = json_deep_copy(json_array_get(ra, i)), *y = json_deep_copy(json_array_get(rb, i));
        assert_string_equal(json_string_value(json_object_get(x, "case_path")), FIX "/dump.pt");
        /* where it came from and how long it took differ; nothing else may */
        const char *vary[] = {"case_path", "seconds", "time_ms"};
        for (size_t k = 0; k < sizeof vary / sizeof vary[0]; k++) {
            json_object_del(x, vary[k]);
            json_object_del(y, vary[k]);
        }
        if (!json_equal(x, y)) {
            char *sx = json_dumps(x, JSON_COMPACT), *sy = json_dumps(y, JSON_COMPACT);
            fail_msg("row %zu differs:\n  .pt %s\n  .h5 %s", i, sx, sy);
        }
        json_decref(x);
        json_decref(y);
    }
    json_decref(a);
    json_decref(b);
}

/* ---- kreplay import ---- */

static int run_import(int n, const char **args)
{
    char *argv[16];
    argv[0] = (char *)"import";
    for (int i = 0; i < n; i++)
        argv[i + 1] = (char *)args[i];
    argv[n + 1] = NULL;
    return cli_import(n + 1, argv);
}

static void test_import_cli(void **state)
{
    (void)state;
    char out[1024];
    test_tmp_path(out, sizeof out, "import.h5");
    const char *a1[] = {FIX "/dump.pt", "-o", out};
    assert_int_equal(run_import(3, a1), 0);
    case_t got, twin;
    kr_error_t err = {{0}};
    if (case_read(out, &got, &err))
        fail_msg("%s", err.msg);
    load_ok(FIX "/dump.h5", &twin, NULL);
    assert_same_case(&got, &twin);
    assert_string_equal(got.kernel_path, PT_IMPORT_KERNEL_PATH);
    assert_non_null(got.capture_time);
    case_free(&got);
    case_free(&twin);

    const char *a2[] = {FIX "/dump.pt", "-o", out, "--weight-order", "fragment"};
    assert_int_equal(run_import(5, a2), 0);
    assert_int_equal(case_read(out, &got, &err), 0);
    assert_int_equal(got.weight_order, WEIGHT_ORDER_FRAGMENT);
    case_free(&got);

    const char *a3[] = {FIX "/dump_square.pt", "-o", out, "--scale-layout", "kn"};
    assert_int_equal(run_import(5, a3), 0);
    assert_int_equal(case_read(out, &got, &err), 0);
    assert_int_equal(got.scale_layout, SCALE_LAYOUT_KN);
    assert_int_equal(got.N, 2);
    case_free(&got);

    unlink(out);
    const char *b1[] = {FIX "/dump_square.pt", "-o", out};                 /* ambiguous */
    assert_int_equal(run_import(3, b1), 2);
    const char *b2[] = {FIX "/dump.pt", "-o", out, "--scale-layout", "nk"}; /* contradicts */
    assert_int_equal(run_import(5, b2), 2);
    const char *b3[] = {FIX "/dump.pt", "-o", out, "--weight-order", "sideways"};
    assert_int_equal(run_import(5, b3), 2);
    const char *b4[] = {FIX "/dump.pt"};                                    /* no -o */
    assert_int_equal(run_import(1, b4), 2);
    const char *b5[] = {FIX "/unsupported_set.pt", "-o", out};
    assert_int_equal(run_import(3, b5), 2);
    struct stat st;
    assert_int_not_equal(stat(out, &st), 0);    /* nothing written on failure */
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
    if (!fixtures_present()) {
        fprintf(stderr, "test_torch_pt: fixtures missing under %s (run "
                        "scripts/fixtures/make_pt_fixtures.py with torch); skipped\n", FIX);
        return TEST_SKIPPED;
    }
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    KR_RUN_TESTS(NULL, NULL,
        test_dtypes_exact, test_dump_matches_h5_twin, test_square_scale_needs_layout,
        test_replay_in_process, test_import_cli, test_unsupported_refused, test_more_dtypes_exact,
        test_more_dtypes_refused, test_broken_files, test_corrupted_pickles,
        test_cli_replay_pt_equals_h5);
}
