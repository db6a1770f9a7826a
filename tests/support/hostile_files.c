#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zip.h>

#include "hostile_files.h"
#include "kr_string.h"
#include "test_support.h"

const char *hostile_binary(void)
{
    const char *binary = getenv("KREPLAY_HOSTILE_BINARY");
    return binary && *binary ? binary : KREPLAY_BINARY;
}

int hostile_run(char **out, const char *fmt, ...)
{
    char args[8192], cmd[9000];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "timeout -k 5 60 '%s' %s", hostile_binary(), args);
    return test_sh(cmd, out);
}

void hostile_sh(const char *fmt, ...)
{
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    char *out = NULL;
    const int rc = test_sh(cmd, &out);
    if (rc != 0)
        fail_msg("%s: exit %d: %s", cmd, rc, out);
    free(out);
}

void hostile_expect(const char *out, const char *needle)
{
    if (!out || !strstr(out, needle))
        fail_msg("expected \"%s\" in:\n%s", needle, out ? out : "(null)");
}

void hostile_rows(result_list_t *rows, int n, verdict_t v)
{
    memset(rows, 0, sizeof *rows);
    for (int i = 0; i < n; i++) {
        result_t *r = result_list_add(rows);
        assert_non_null(r);
        snprintf(r->case_path, sizeof r->case_path, "hostile/case%d.h5", i);
        snprintf(r->case_name, sizeof r->case_name, "case%d", i);
        snprintf(r->case_id, sizeof r->case_id, "%016x", 0x1000u + (unsigned)i);
        r->M = 8;
        r->N = 64;
        r->K = 256;
        kr_strlcpy(r->band, "decode", sizeof r->band);
        kr_strlcpy(r->kernel, "w4a8.folded", sizeof r->kernel);
        kr_strlcpy(r->reference, "R_exact", sizeof r->reference);
        r->metrics.rel_fro = 1e-3 * (i + 1);
        r->threshold = 4e-3;
        r->verdict = v;
        kr_strlcpy(r->device, "cpu", sizeof r->device);
        snprintf(r->out_digest, sizeof r->out_digest, "%016x", 0xabc0u + (unsigned)i);
    }
}

void hostile_meta(results_meta_t *m, const char *suite, const char *when)
{
    results_meta_init(m);
    kr_strlcpy(m->suite_name, suite, sizeof m->suite_name);
    kr_strlcpy(m->suite_hash, "0123456789abcdef", sizeof m->suite_hash);
    kr_strlcpy(m->git_commit, "hostile", sizeof m->git_commit);
    kr_strlcpy(m->version, "0.1.0", sizeof m->version);
    kr_strlcpy(m->time_utc, when, sizeof m->time_utc);
}

void hostile_write(const char *path, const result_list_t *rows, const results_meta_t *m)
{
    kr_error_t err = {{0}};
    if (results_store_write(path, rows, m, &err))
        fail_msg("cannot write %s: %s", path, err.msg);
}

void hostile_tiny_run(char *dir, size_t cap, const char *name, int run)
{
    assert_int_equal(test_tmp_dir(dir, cap, name), 0);
    char suite[1200];
    snprintf(suite, sizeof suite, "%s/tiny.yaml", dir);
    assert_int_equal(test_write_text(suite, "suite: tiny\n"
                                            "cases:\n"
                                            "  - synth:\n"
                                            "      shapes: [64x256]\n"
                                            "      m: [1, 8]\n"
                                            "      seeds: [1, 2]\n"
                                            "kernels: [\"w4a8.folded\"]\n"),
                     0);
    if (!run)
        return;
    char *out = NULL;
    const int rc = hostile_run(&out, "gate '%s' -o '%s/run' -q", suite, dir);
    if (rc != 0)
        fail_msg("the clean gate run failed (exit %d): %s", rc, out);
    free(out);
}

void hostile_write_pt(const char *path, const char *prefix, const void *pkl, size_t pkl_len,
                      size_t bytes, int level)
{
    static const char *const names[] = {"data.pkl", "byteorder", "data/0"};
    void *zeros = calloc(bytes ? bytes : 1, 1);
    assert_non_null(zeros);
    const void *data[] = {pkl, "little", zeros};
    const size_t len[] = {pkl_len, 6, bytes};
    unlink(path);
    int code = 0;
    zip_t *za = zip_open(path, ZIP_CREATE | ZIP_TRUNCATE, &code);
    assert_non_null(za);
    for (int i = 0; i < 3; i++) {
        char name[256];
        snprintf(name, sizeof name, "%s/%s", prefix, names[i]);
        zip_source_t *s = zip_source_buffer(za, data[i], len[i], 0);
        const zip_int64_t idx = zip_file_add(za, name, s, ZIP_FL_ENC_UTF_8);
        assert_true(idx >= 0);
        zip_set_file_compression(za, (zip_uint64_t)idx, i < 2 ? ZIP_CM_STORE : ZIP_CM_DEFLATE,
                                 i < 2 ? 0 : (zip_uint32_t)level);
    }
    assert_int_equal(zip_close(za), 0);
    free(zeros);
}

void hostile_set_attr(const char *path, const char *name, const char *value)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    const hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    assert_true(f >= 0);
    if (H5Aexists(f, name) > 0)
        assert_int_equal(H5Adelete(f, name), 0);
    const hid_t type = H5Tcopy(H5T_C_S1), space = H5Screate(H5S_SCALAR);
    H5Tset_size(type, H5T_VARIABLE);
    const hid_t attr = H5Acreate2(f, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
    assert_int_equal(H5Awrite(attr, type, &value), 0);
    H5Aclose(attr);
    H5Sclose(space);
    H5Tclose(type);
    H5Fclose(f);
}
