/* ctest-labels: blas-bits */
/* torch.save files read in C (harness/case/torch_pt.c, pt_import.c, case_load.c,
 * cli/cli_import.c), against fixtures written by a real torch
 * (scripts/fixtures/make_pt_fixtures.py, torch 2.11) and their HDF5 twins
 * written by h5py from the same arrays:
 *  - every supported dtype, 0-d, empty and non-contiguous views parse to the
 *    exact bits torch holds;
 *  - the _debug_compare dump (and a non-contiguous variant) imports to the
 *    same case as its HDF5 twin, replays to the same rows in-process and
 *    through `kreplay replay --json`, and `kreplay import` writes it.
 * The dtypes of the serve's dumps and the refusals: test_torch_pt_refusals.c. */
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

int cli_import(int argc, char **argv);

/* ---- helpers ---- */

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

int main(void)
{
    if (!pt_tests_ready("test_torch_pt"))
        return TEST_SKIPPED;
    KR_RUN_TESTS(NULL, NULL,
        test_dtypes_exact, test_dump_matches_h5_twin, test_square_scale_needs_layout,
        test_replay_in_process, test_import_cli, test_cli_replay_pt_equals_h5);
}
