/* Case files for the case reader's and writer's tests: see case_files.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "case_files.h"
#include "formats.h"        /* f32_from_bits */
#include "test_cases.h"
#include "test_support.h"

static char *xstrdup(const char *s)
{
    char *p = strdup(s);
    assert_non_null(p);
    return p;
}

/* A case with random non-zero contents in every array the spec asks for. */
void make_case(case_t *c, const case_spec_t *s, uint64_t seed)
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

void assert_case_equal(const case_t *a, const case_t *b)
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

void assert_case_empty(const case_t *c)
{
    case_t z;
    memset(&z, 0, sizeof z);
    assert_memory_equal(c, &z, sizeof z);
}

char *slurp(const char *path, size_t *len)
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

void spit(const char *path, const void *buf, size_t len)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(buf, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

/* Number of entries in path's directory whose name starts with
 * "<basename(path)>.tmp." (the writer's temporary files). */
int count_tmp_files(const char *path)
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
void expect_read_fail(const char *path, const char *n1, const char *n2, const char *n3)
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
void expect_bytes_refused(const char *path, const void *buf, size_t len, const char *n1,
                                 const char *n2, const char *n3)
{
    spit(path, buf, len);
    expect_read_fail(path, n1, n2, n3);
}

void round_trip(const case_spec_t *s, uint64_t seed, const char *tag)
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


/* A valid case written by the writer, big enough that half of it cuts data. */
void write_valid(const char *path, uint64_t seed)
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
