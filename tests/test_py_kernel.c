/* Python callables as kernels (`kreplay replay --py MODULE:FUNCTION`, the plugin
 * kernels/plugins/python): the kreplay binary runs them on synthetic cases with
 * /usr/bin/python3 and Debian's torch, each launch in the isolated worker:
 *  - the pure-torch W4A8 per-block example is bit-identical to the registry's
 *    w4a8.perblock model (--vs: every output identical) and passes both
 *    references;
 *  - the torch bf16 matmul example passes against R_source;
 *  - a kernel that raises is an ERROR row carrying the exception's last line,
 *    one that segfaults through ctypes is CRASHED by SIGSEGV, one that sleeps
 *    is TIMEOUT, one that returns float32 is an ERROR naming the dtype; the
 *    registry kernel beside them still PASSes (the run goes on);
 *  - a malformed spec is refused with exit 2;
 *  - a suite's `python:` entry runs the example in `kreplay gate` beside its
 *    kernels: glob, and a missing file is refused with the suite's line.
 * Skipped (77) when /usr/bin/python3 cannot import torch. */
/* ctest-labels: interop;slow */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "json_rows.h"
#include "python_ready.h"
#include "test_main.h"
#include "test_support.h"

#define EX KREPLAY_SOURCE_DIR "/kernels/plugins/python/examples"
#define FAULTY KREPLAY_SOURCE_DIR "/tests/python/py_kernels_faulty.py"

static char g_cases[1024];

static int setup(void **state)
{
    (void)state;
    char args[2048];
    test_tmp_path(g_cases, sizeof g_cases, "pycases");
    snprintf(args, sizeof args, "synth --shape 96x256 --m 5,16 --seed 3 --out '%s'", g_cases);
    return test_run_kreplay(args, NULL) == 0 ? 0 : -1;
}

/* The JSON of `kreplay replay --json ARGS g_cases`; fails the test when it printed none. */
static json_t *replay_json_or_fail(const char *args, int *rc)
{
    return json_rows_replay_py(args, g_cases, rc);
}

/* The rows of kernel k against reference ref (NULL: any), counted; each must have verdict v
 * (NULL: any) and, if note is given, a note containing it. */
static int rows_where(json_t *root, const char *k, const char *ref, const char *v, const char *note)
{
    const json_rows_want_t want = {k, ref, 0, v, note, NULL, IDENTICAL_UNCHECKED};
    return json_rows_count(root, &want);
}

static void test_w4a8_example_bit_identical(void **state)
{
    (void)state;
    int rc;
    json_t *root = replay_json_or_fail("--py " EX "/w4a8_perblock_torch.py:w4a8_perblock "
                                       "--kernels 'py.*,w4a8.perblock' --vs w4a8.perblock", &rc);
    const char *k = "py.w4a8_perblock_torch.w4a8_perblock";
    assert_int_equal(rows_where(root, k, "R_exact", "PASS", NULL), 2);
    assert_int_equal(rows_where(root, k, "R_source", "PASS", NULL), 2);
    /* bit-identical to the model: every output element, both cases */
    const json_rows_want_t vs = {k, "w4a8.perblock", 1, NULL, NULL, NULL, IDENTICAL_EVERY_ROW};
    assert_int_equal(json_rows_count(root, &vs), 2);
    assert_int_equal(rc, 0);
    json_decref(root);
}

static void test_bf16_example_passes_source(void **state)
{
    (void)state;
    int rc;
    json_t *root = replay_json_or_fail("--py " EX "/bf16_matmul_torch.py:bf16_matmul --kernels 'py.*' "
                                       "--refs source", &rc);
    assert_int_equal(rows_where(root, "py.bf16_matmul_torch.bf16_matmul", "R_source", "PASS", NULL),
                     2);
    assert_int_equal(rc, 0);
    json_decref(root);
}

static void test_faulty_kernels_reported(void **state)
{
    (void)state;
    /* one case: each launch imports torch (seconds on a loaded machine), and the sleeping
     * kernel costs the whole timeout, which must leave the others time to import torch */
    char one[1200];
    snprintf(one, sizeof one, "%s/synth_N96_K256_M5_s3.h5", g_cases);
    int rc;
    json_t *root = json_rows_replay_py("--timeout 40 --py " FAULTY ":raises --py " FAULTY ":segfaults "
                                       "--py " FAULTY ":sleeps --py " FAULTY ":wrong_dtype "
                                       "--kernels 'py.*,w4a8.perblock' --refs exact", one, &rc);
    assert_int_equal(rc, 1);
    assert_true(rows_where(root, "py.py_kernels_faulty.raises", NULL, "ERROR",
                           "ValueError: refusing M=5") == 1);
    assert_true(rows_where(root, "py.py_kernels_faulty.raises", NULL, NULL,
                           "py_kernels_faulty.py:") == 1);
    assert_true(rows_where(root, "py.py_kernels_faulty.segfaults", NULL, "CRASHED", "SIGSEGV") == 1);
    assert_true(rows_where(root, "py.py_kernels_faulty.sleeps", NULL, "TIMEOUT", NULL) == 1);
    assert_true(rows_where(root, "py.py_kernels_faulty.wrong_dtype", NULL, "ERROR",
                           "torch.float32") == 1);
    assert_int_equal(rows_where(root, "w4a8.perblock", "R_exact", "PASS", NULL), 1);
    json_decref(root);
}

/* A suite's python: entry runs the example beside its kernels: glob in `kreplay gate`. */
static void test_suite_python_kernels(void **state)
{
    (void)state;
    char dir[1024], suite[1200], cmd[8192];
    test_tmp_path(dir, sizeof dir, "pysuite");
    mkdir(dir, 0777);
    snprintf(suite, sizeof suite, "%s/suite.yaml", dir);
    FILE *fp = fopen(suite, "w");
    assert_non_null(fp);
    fprintf(fp, "suite: python\ncases:\n  - files: [\"%s/synth_N96_K256_M5_s3.h5\"]\n"
                "kernels: [\"w4a8.perblock\"]\nreferences: [exact]\nreruns: 1\n"
                "python: [\"%s/w4a8_perblock_torch.py:w4a8_perblock\"]\n", g_cases, EX);
    fclose(fp);
    snprintf(cmd, sizeof cmd, "KREPLAY_PYTHON=/usr/bin/python3 '%s' gate '%s' -o '%s/run' "
                              ">'%s/gate.log' 2>&1", KREPLAY_BINARY, suite, dir, dir);
    int st = system(cmd);
    char path[1300];
    snprintf(path, sizeof path, "%s/run/results.json", dir);
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root)
        fail_msg("gate wrote no %s (status %d; see %s/gate.log)", path, st, dir);
    assert_int_equal(rows_where(root, "py.w4a8_perblock_torch.w4a8_perblock", "R_exact", "PASS",
                                NULL), 1);
    assert_int_equal(rows_where(root, "w4a8.perblock", "R_exact", "PASS", NULL), 1);
    json_decref(root);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);

    /* a spec that names no file is refused with the suite's line */
    fp = fopen(suite, "w");
    fprintf(fp, "suite: python\ncases:\n  - files: [\"%s/synth_N96_K256_M5_s3.h5\"]\n"
                "python: [\"missing.py:fn\"]\n", g_cases);
    fclose(fp);
    char *out = NULL, args[2400];
    snprintf(args, sizeof args, "gate '%s' -o '%s/run2'", suite, dir);
    assert_int_equal(test_run_kreplay(args, &out), 2);
    assert_non_null(strstr(out, "python[0]: 'missing.py'"));
    assert_non_null(strstr(out, "suite.yaml:"));
    free(out);
}

static void test_bad_spec_refused(void **state)
{
    (void)state;
    char *out = NULL;
    char args[2048];
    snprintf(args, sizeof args, "replay --py no_colon_here '%s'", g_cases);
    assert_int_equal(test_run_kreplay(args, &out), 2);
    assert_non_null(strstr(out, "'no_colon_here' is not MODULE:FUNCTION"));
    free(out);
}

KR_TEST_MAIN_FULL(test_python_missing("torch, numpy"), setup, NULL,
    test_w4a8_example_bit_identical, test_bf16_example_passes_source, test_faulty_kernels_reported,
    test_bad_spec_refused, test_suite_python_kernels);
