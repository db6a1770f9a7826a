/* Case files (harness/case/case_io.h, cases/SCHEMA.md): round trips through the
 * writer and reader, the reader's refusal of every kind of malformed file
 * with a one-line message naming file and dataset, and the writer's
 * atomicity.  Malformed files are built with the HDF5 C API directly (the
 * raw_* helpers below), never with the writer, which refuses to make them. */
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

#include "case_image.h"
#include "case_io.h"
#include "case_mapping.h"
#include "formats.h"        /* f32_bits, f32_from_bits */
#include "test_cases.h"
#include "test_main.h"
#include "test_support.h"

/* ---------------------------------------------------------------- helpers */

static char *xstrdup(const char *s)
{
    char *p = strdup(s);
    assert_non_null(p);
    return p;
}

typedef struct {
    int64_t M, N, K;
    scale_layout_t layout;
    x_storage_t x_storage;      /* X_STORED_NONE: no x */
    int with_fp8;
    fp8_format_t fp8_format;
    weight_order_t order;
    int64_t ref_len;            /* 0: no weight_ref */
    int with_outputs;
    int with_prov;
    int with_bf16_weight;       /* weight_bf16 [N, K] */
    int no_mxfp4;               /* no weight / weight_scale (needs with_bf16_weight) */
} case_spec_t;

/* A case with random non-zero contents in every array the spec asks for. */
static void make_case(case_t *c, const case_spec_t *s, uint64_t seed)
{
    test_rng_t r = {seed};
    memset(c, 0, sizeof *c);
    c->M = s->M;
    c->N = s->N;
    c->K = s->K;
    const size_t MK = (size_t)(s->M * s->K), MN = (size_t)(s->M * s->N);
    if (s->x_storage != X_STORED_NONE) {
        c->x = malloc(MK * sizeof *c->x);
        assert_non_null(c->x);
        for (size_t i = 0; i < MK; i++) {
            if (s->x_storage == X_STORED_BF16) {
                /* Exactly representable in bf16 (and not NaN), so the round
                 * trip must be bit-exact. */
                uint16_t h = (uint16_t)(1 + test_rng_u64(&r) % 0xFFFF);
                if ((h & 0x7F80) == 0x7F80)
                    h &= 0xBFFF;
                c->x[i] = f32_from_bits((uint32_t)h << 16);
            } else {
                c->x[i] = (float)test_rng_normal(&r) + 1e-3f;
            }
        }
        c->x_storage = s->x_storage;
    }
    if (s->with_fp8) {
        c->x_fp8 = test_rand_bytes(&r, MK);
        c->x_fp8_format = s->fp8_format;
        c->x_scale = malloc((size_t)s->M * sizeof *c->x_scale);
        assert_non_null(c->x_scale);
        for (int64_t m = 0; m < s->M; m++)
            c->x_scale[m] = (float)(test_rng_uniform(&r) + 0.01) / 448.0f;
    }
    if (!s->no_mxfp4) {
        c->weight = test_rand_bytes(&r, (size_t)(s->N * s->K / 2));
        c->weight_order = s->order;
        c->weight_scale = test_rand_bytes(&r, (size_t)(s->N * s->K / 32));
        c->scale_layout = s->layout;
    }
    if (s->with_bf16_weight)
        c->weight_bf16 = test_rand_bytes(&r, (size_t)(s->N * s->K) * 2);
    if (s->ref_len) {
        c->weight_ref = test_rand_bytes(&r, (size_t)s->ref_len);
        c->weight_ref_len = s->ref_len;
    }
    if (s->with_outputs) {
        c->out = test_rand_bytes(&r, MN * 2);
        c->out_rerun = test_rand_bytes(&r, MN * 2);
        c->aiter = test_rand_bytes(&r, MN * 2);
    }
    if (s->with_prov) {
        c->kernel_path = xstrdup("radiance::mxfp4_linear");
        c->layer = xstrdup("model.layers.17.mlp.down_proj");
        c->model = xstrdup("Qwen3-Next-80B-A3B-Instruct-MXFP4 \xc3\xa9"); /* UTF-8 survives */
        c->capture_time = xstrdup("2025-03-14T15:09:26Z");
        c->env_flags = xstrdup("RADIANCE_MXFP4_WPERM=1\nRADIANCE_MXFP4_DEBUG=1\nMIN_M=256");
    }
}

static void assert_str_eq_or_null(const char *a, const char *b)
{
    if (!a || !b) {
        assert_null(a);
        assert_null(b);
    } else {
        assert_string_equal(a, b);
    }
}

static void assert_bytes_eq_or_null(const void *a, const void *b, size_t n)
{
    if (!a || !b) {
        assert_null(a);
        assert_null(b);
    } else {
        assert_memory_equal(a, b, n);
    }
}

static void assert_case_equal(const case_t *a, const case_t *b)
{
    assert_int_equal(a->M, b->M);
    assert_int_equal(a->N, b->N);
    assert_int_equal(a->K, b->K);
    const size_t MK = (size_t)(a->M * a->K), MN = (size_t)(a->M * a->N);
    assert_int_equal(a->x_storage, b->x_storage);
    assert_bytes_eq_or_null(a->x, b->x, MK * sizeof(float));
    assert_bytes_eq_or_null(a->x_fp8, b->x_fp8, MK);
    if (a->x_fp8)
        assert_int_equal(a->x_fp8_format, b->x_fp8_format);
    assert_bytes_eq_or_null(a->x_scale, b->x_scale, (size_t)a->M * sizeof(float));
    assert_bytes_eq_or_null(a->weight, b->weight, (size_t)(a->N * a->K / 2));
    assert_bytes_eq_or_null(a->weight_bf16, b->weight_bf16, (size_t)(a->N * a->K) * 2);
    assert_int_equal(a->weight_order, b->weight_order);
    assert_bytes_eq_or_null(a->weight_scale, b->weight_scale, (size_t)(a->N * a->K / 32));
    assert_int_equal(a->scale_layout, b->scale_layout);
    assert_int_equal(a->weight_ref_len, b->weight_ref_len);
    assert_bytes_eq_or_null(a->weight_ref, b->weight_ref, (size_t)a->weight_ref_len);
    assert_bytes_eq_or_null(a->out, b->out, MN * 2);
    assert_bytes_eq_or_null(a->out_rerun, b->out_rerun, MN * 2);
    assert_bytes_eq_or_null(a->aiter, b->aiter, MN * 2);
    assert_str_eq_or_null(a->kernel_path, b->kernel_path);
    assert_str_eq_or_null(a->layer, b->layer);
    assert_str_eq_or_null(a->model, b->model);
    assert_str_eq_or_null(a->capture_time, b->capture_time);
    assert_str_eq_or_null(a->env_flags, b->env_flags);
}

static void assert_case_empty(const case_t *c)
{
    case_t z;
    memset(&z, 0, sizeof z);
    assert_memory_equal(c, &z, sizeof z);
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    assert_true(n >= 0);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return buf;
}

static void spit(const char *path, const void *buf, size_t len)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(buf, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

/* Number of entries in path's directory whose name starts with
 * "<basename(path)>.tmp." (the writer's temporary files). */
static int count_tmp_files(const char *path)
{
    char dir[4096], prefix[1024];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    assert_non_null(slash);
    *slash = '\0';
    snprintf(prefix, sizeof prefix, "%s.tmp.", slash + 1);
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0)
            n++;
    closedir(d);
    return n;
}

/* Reads path, expects failure: -1, *c left empty, one line that names the
 * file and contains each non-NULL needle. */
static void expect_read_fail(const char *path, const char *n1, const char *n2, const char *n3)
{
    case_t c;
    kr_error_t err;
    memset(&c, 0xA5, sizeof c);   /* case_read must empty it, not trust it */
    memset(&err, 0, sizeof err);
    int rc = case_read(path, &c, &err);
    if (getenv("KR_TEST_VERBOSE"))   /* to eyeball the messages */
        fprintf(stderr, "    %s\n", err.msg);
    if (rc != -1 || !strstr(err.msg, path) || (n1 && !strstr(err.msg, n1)) ||
        (n2 && !strstr(err.msg, n2)) || (n3 && !strstr(err.msg, n3)))
        print_error("case_read(%s) = %d, message: %s\n  wanted: [%s] [%s] [%s]\n", path, rc,
                    err.msg, n1 ? n1 : "", n2 ? n2 : "", n3 ? n3 : "");
    assert_int_equal(rc, -1);
    assert_non_null(strstr(err.msg, path));
    if (n1)
        assert_non_null(strstr(err.msg, n1));
    if (n2)
        assert_non_null(strstr(err.msg, n2));
    if (n3)
        assert_non_null(strstr(err.msg, n3));
    assert_null(strchr(err.msg, '\n'));
    assert_case_empty(&c);
}

/* LEN bytes of BUF written as PATH, which case_read must then refuse
 * (expect_read_fail). */
static void expect_bytes_refused(const char *path, const void *buf, size_t len, const char *n1,
                                 const char *n2, const char *n3)
{
    spit(path, buf, len);
    expect_read_fail(path, n1, n2, n3);
}

/* ------------------------------------------- raw (malformed) file builder */

#define RAW_MAX_DS 12

typedef struct {
    const char *name;
    int present;
    hid_t type;                 /* file type; 0 = the schema's default */
    int rank;
    hsize_t dims[3];
    const char *attr[2][2];     /* {name, value}; name NULL = unused */
    const void *data;           /* in `type`'s own byte layout; NULL = random */
    int chunked;                /* stored in chunks of one row, not contiguously */
} raw_ds_t;

typedef struct {
    const char *schema;         /* NULL: no schema attribute */
    int have_M, have_N, have_K;
    int64_t M, N, K;
    hid_t dim_type;             /* type of the M/N/K attributes */
    int fixed_strings;          /* write string attributes fixed-length ASCII */
    hsize_t userblock;          /* bytes before the HDF5 data (0: none) */
    raw_ds_t ds[RAW_MAX_DS];
    int nds;
} raw_t;

static raw_ds_t *raw_add(raw_t *r, const char *name, hid_t type, int rank, hsize_t d0,
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

static raw_ds_t *raw_ds(raw_t *r, const char *name)
{
    for (int i = 0; i < r->nds; i++)
        if (strcmp(r->ds[i].name, name) == 0)
            return &r->ds[i];
    fail_msg("raw dataset %s not in the template", name);
    return NULL;
}

/* A valid case of every dataset (checked by test_raw_template_is_valid). */
static void raw_default(raw_t *r, int64_t M, int64_t N, int64_t K)
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

static void raw_write(const char *path, const raw_t *r, uint64_t seed)
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

/* Writes the template with one change applied by the caller, then expects
 * case_read to refuse it with the given phrases. */
#define M0 5
#define N0 48
#define K0 64

static void raw_expect_fail(const raw_t *r, const char *tag, const char *n1, const char *n2,
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
static void raw_read_ok(const raw_t *r, const char *tag, uint64_t seed, char *path, case_t *c)
{
    test_tmp_path(path, 512, tag);
    raw_write(path, r, seed);
    kr_error_t err = {{0}};
    if (case_read(path, c, &err) != 0)
        fail_msg("%s: %s", path, err.msg);
}

/* raw_default at M x N x K, written (TAG, SEED) and read into *c. */
static void raw_default_read_ok(int64_t M, int64_t N, int64_t K, const char *tag, uint64_t seed,
                                char *path, case_t *c)
{
    raw_t r;
    raw_default(&r, M, N, K);
    raw_read_ok(&r, tag, seed, path, c);
}

/* The default layout (raw_default at M0 x N0 x K0) without dataset `ds`. */
static void raw_default_without(raw_t *r, const char *ds)
{
    raw_default(r, M0, N0, K0);
    raw_ds(r, ds)->present = 0;
}

/* ------------------------------------------------------------ round trips */

static void round_trip(const case_spec_t *s, uint64_t seed, const char *tag)
{
    char path[512];
    test_tmp_path(path, sizeof path, tag);
    case_t a, b;
    kr_error_t err = {{0}};
    make_case(&a, s, seed);
    if (case_write(path, &a, &err) != 0)
        fail_msg("case_write: %s", err.msg);
    if (case_read(path, &b, &err) != 0)
        fail_msg("case_read: %s", err.msg);
    assert_case_equal(&a, &b);
    assert_non_null(b.path);
    assert_string_equal(b.path, path);
    assert_int_equal(count_tmp_files(path), 0);
    case_free(&a);
    case_free(&b);
    assert_case_empty(&b);
    unlink(path);
}

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

/* A valid case written by the writer, big enough that half of it cuts data. */
static void write_valid(const char *path, uint64_t seed)
{
    case_spec_t s = {.M = 8, .N = 256, .K = 512, .layout = SCALE_LAYOUT_NK,
                     .x_storage = X_STORED_BF16, .with_fp8 = 1, .ref_len = 256,
                     .with_outputs = 1, .with_prov = 1};
    case_t a;
    kr_error_t err;
    make_case(&a, &s, seed);
    if (case_write(path, &a, &err) != 0)
        fail_msg("%s", err.msg);
    case_free(&a);
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
        test_bad_missing_weight, test_bad_missing_weight_scale, test_bad_weight_dtype,
        test_bad_weight_shape, test_bad_weight_scale_layout, test_bad_x_u16_without_dtype,
        test_bad_x_pairing, test_bad_dims, test_bad_dims_overflow, test_bad_schema,
        test_bad_weight_ref_and_outputs, test_bad_fragment_dims, test_bad_weight_is_group,
        test_bad_truncated, test_bad_truncated_patched_eoa, test_bad_corrupt_header,
        test_bad_not_hdf5, test_bad_nonexistent, test_round_trip_weight_bf16,
        test_reader_weight_bf16_only, test_bad_no_weight_at_all, test_bad_weight_bf16,
        test_bad_mxfp4_half_pair, test_validate_weight_bf16, test_validate, test_write_atomic,
        test_h5dump_sees_datasets);
}
