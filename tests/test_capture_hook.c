/* Runs tests/python/capture_hook_test.py with the system Python: the capture
 * hook (scripts/capture/kreplay_capture.py) writes schema-v1 cases from numpy
 * arrays (and torch tensors when torch is importable), its selection, budgets
 * and graph-capture skip are checked, and every written case must replay in
 * the kreplay binary with exit 0.  Without h5py/numpy the test exits 77, which
 * ctest reports as skipped, not passed. */
/* ctest-labels: interop */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "python_ready.h"
#include "test_main.h"
#include "test_support.h"

static void test_capture_hook(void **state)
{
    (void)state;
    char dir[1024], args[4096];
    test_tmp_dir(dir, sizeof dir, "capture");
    snprintf(args, sizeof args, "--kreplay '%s' --tmp '%s'", KREPLAY_BINARY, dir);
    assert_int_equal(test_run_python("capture_hook_test.py", args), 0);
}

/* The serve side: real torch.save dumps through the decorated stand-in entry points (vLLM's
 * warm-ups skipped, the W4A4 route recorded, provenance complete), imported and replayed. */
static void test_capture_serve(void **state)
{
    (void)state;
    if (system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") != 0) {
        fprintf(stderr, "torch is not available to /usr/bin/python3: serve test skipped\n");
        skip();
    }
    char dir[1024], args[4096];
    test_tmp_dir(dir, sizeof dir, "capture-serve");
    snprintf(args, sizeof args, "--kreplay '%s' --tmp '%s'", KREPLAY_BINARY, dir);
    assert_int_equal(test_run_python("capture_serve_test.py", args), 0);
}

KR_TEST_MAIN_UNLESS(
    test_python_lacks("h5py, numpy", "h5py/numpy are not available to /usr/bin/python3: skipped"),
    test_capture_hook, test_capture_serve);
