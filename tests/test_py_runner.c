/* The Python-kernel runner (kernels/plugins/python/kreplay_py_runner.py) as the
 * persistent plugin starts it, through the kreplay binary with /usr/bin/python3:
 *  - one interpreter serves every launch of the run: two kernels, two cases,
 *    two runs each, all from one pid; a kernel that segfaults ends its worker
 *    and interpreter (CRASHED) and the launches after it share one new pid;
 *  - isolated mode: a numpy.py in the working directory is never imported in
 *    place of numpy, while a kernel module in that directory (a dotted name)
 *    is still found there.
 * Skipped (77) when /usr/bin/python3 cannot import numpy. */
/* ctest-labels: interop */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "python_ready.h"
#include "test_main.h"
#include "test_support.h"

#define KERNELS KREPLAY_SOURCE_DIR "/tests/python/py_runner_kernels.py"
#define CASES KREPLAY_SOURCE_DIR "/cases/samples/moe_gate_N256_K2048_M8.h5 " \
              KREPLAY_SOURCE_DIR "/cases/samples/gdn_in_proj_ba_N48_K5120_M17.h5"

/* The distinct pids in the log, in order of first appearance (at most 8). */
static int distinct_pids(const char *log, long pids[8], int *lines)
{
    char *text = test_read_file(log, NULL);
    int n = 0;
    *lines = 0;
    for (char *save = NULL, *p = strtok_r(text ? text : (char[]){""}, "\n", &save); p;
         p = strtok_r(NULL, "\n", &save)) {
        const long pid = strtol(p, NULL, 10);
        (*lines)++;
        int seen = 0;
        for (int i = 0; i < n; i++)
            seen |= pids[i] == pid;
        if (!seen && n < 8)
            pids[n++] = pid;
    }
    free(text);
    return n;
}

static json_t *run(const char *env, const char *dir, const char *args, int *rc)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "cd '%s' && %s KREPLAY_PYTHON=/usr/bin/python3 '%s' replay --json %s "
             "2>/dev/null", dir, env, KREPLAY_BINARY, args);
    char *out = NULL;
    *rc = test_exit_code(test_shell(cmd, &out));
    json_error_t je;
    json_t *root = json_loads(out ? out : "", 0, &je);
    if (!root)
        fail_msg("%s: no JSON (exit %d)", args, *rc);
    free(out);
    return root;
}

/* Rows of kernel with this verdict (NULL: any) whose note holds `note` (NULL: any). */
static int rows_where(json_t *root, const char *kernel, const char *verdict, const char *note)
{
    json_t *rows = json_object_get(root, "results"), *r;
    size_t i;
    int n = 0;
    json_array_foreach(rows, i, r) {
        const char *k = json_string_value(json_object_get(r, "kernel"));
        const char *v = json_string_value(json_object_get(r, "verdict"));
        const char *t = json_string_value(json_object_get(r, "note"));
        n += !strcmp(k, kernel) && (!verdict || !strcmp(v, verdict)) && (!note || strstr(t, note));
    }
    return n;
}

static void test_one_interpreter_per_run(void **state)
{
    (void)state;
    char dir[512], env[1024];
    assert_int_equal(test_tmp_dir(dir, sizeof dir, "pyrunner"), 0);
    snprintf(env, sizeof env, "KR_TEST_PID_LOG='%s/pids'", dir);
    int rc;
    json_t *root = run(env, dir, "--py " KERNELS ":zeros_with_pid --py " KERNELS ":crash_once "
                       "--kernels 'py.*' --refs exact --reruns 2 " CASES, &rc);
    /* the crash: one row; every other launch gave rows */
    assert_int_equal(rows_where(root, "py.py_runner_kernels.crash_once", "CRASHED", "SIGSEGV"), 1);
    assert_int_equal(rows_where(root, "py.py_runner_kernels.crash_once", NULL, NULL), 2);
    assert_int_equal(rows_where(root, "py.py_runner_kernels.zeros_with_pid", NULL, NULL), 2);
    json_decref(root);
    char log[600];
    snprintf(log, sizeof log, "%s/pids", dir);
    long pids[8];
    int lines;
    /* case 1: zeros_with_pid twice in the first interpreter, crash_once kills it;
     * case 2: both kernels twice in the second. */
    assert_int_equal(distinct_pids(log, pids, &lines), 2);
    assert_int_equal(lines, 6);
}

static void test_cwd_numpy_never_imported(void **state)
{
    (void)state;
    char dir[512], path[700];
    assert_int_equal(test_tmp_dir(dir, sizeof dir, "pycwd"), 0);
    snprintf(path, sizeof path, "%s/numpy.py", dir);
    assert_int_equal(test_write_text(path, "raise ImportError(\"the working directory's numpy.py "
                                           "was imported instead of numpy\")\n"), 0);
    snprintf(path, sizeof path, "%s/cwdkern.py", dir);
    assert_int_equal(test_write_text(path, "import numpy as np\n\n\ndef fn(M, N, K):\n"
                                           "    return np.zeros((M, N), dtype=np.uint16)\n"), 0);
    int rc;
    json_t *root = run("", dir, "--py cwdkern:fn --kernels 'py.*' --refs exact --reruns 1 " CASES, &rc);
    /* Both launches ran the real numpy: an all-zero output (judged), no ERROR. */
    assert_int_equal(rows_where(root, "py.cwdkern.fn", NULL, NULL), 2);
    assert_int_equal(rows_where(root, "py.cwdkern.fn", "ERROR", NULL), 0);
    json_decref(root);
}

KR_TEST_MAIN_UNLESS(test_python_missing("numpy"), test_one_interpreter_per_run,
                    test_cwd_numpy_never_imported);
