/* Rows, provenance and a private folder for the results-store tests
 * (test_results_store.c, test_results_store_files.c): see results_rows.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "result_fields.h"
#include "results_rows.h"
#include "results_store.h"
#include "test_support.h"

/* ---------------------------------------------------------------- paths */

/* Every file of a test lives in its own folder (one per process), so
 * counting leftover temporary files is not confused by other tests running
 * in parallel. */
static char test_dir[512];

const char *rs_dir(void) { return test_dir; }

int rs_dir_setup(void **state)
{
    (void)state;
    test_tmp_path(test_dir, sizeof test_dir, "results_store");
    return mkdir(test_dir, 0777);
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

int rs_dir_teardown(void **state)
{
    (void)state;
    if (test_dir[0] && !getenv("KR_TEST_KEEP_TMP"))
        remove_tree(test_dir);
    return 0;
}

void rs_tpath(char *buf, size_t cap, const char *name)
{
    static int n;
    if ((size_t)snprintf(buf, cap, "%s/%d-%s", test_dir, n++, name) >= cap)
        fail_msg("path too long");
}

/* ---------------------------------------------------------------- rows */

static void fill_str(char *dst, size_t cap, test_rng_t *r, const char *prefix, size_t len)
{
    /* len >= cap: no terminator at all, the writer must cut it at cap - 1. */
    const size_t plen = strlen(prefix);
    size_t i = 0;
    for (; i < plen && i < cap; i++)
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

void rs_make_rows(result_list_t *l, int n, uint64_t seed)
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
void rs_expect_cut(result_t *r)
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

void rs_assert_lists_equal(const result_list_t *a, const result_list_t *b)
{
    assert_int_equal(a->count, b->count);
    for (int64_t i = 0; i < a->count; i++)
        assert_row_equal(&a->rows[i], &b->rows[i], i);
}

void rs_copy_list(result_list_t *dst, const result_list_t *src)
{
    memset(dst, 0, sizeof *dst);
    for (int64_t i = 0; i < src->count; i++) {
        result_t *r = result_list_add(dst);
        assert_non_null(r);
        *r = src->rows[i];
    }
}

void rs_set_meta(results_meta_t *m, const char *tag, const char *suite_hash, const char *shard)
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

void rs_assert_meta_equal(const results_meta_t *a, const results_meta_t *b)
{
    assert_string_equal(b->schema, RESULTS_SCHEMA_V2);
    META_EQ(version); META_EQ(git_commit); META_EQ(host); META_EQ(device);
    META_EQ(kernel_build_id); META_EQ(suite_name); META_EQ(suite_hash);
    META_EQ(time_utc); META_EQ(command); META_EQ(shard);
}

/* One line, naming the file, containing every phrase given. */
void rs_assert_error(const kr_error_t *err, const char *path, const char *p1, const char *p2)
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

int rs_file_exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

/* Files in dir whose name contains s. */
int rs_count_matching(const char *dir, const char *s)
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
