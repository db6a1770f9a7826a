/* Runs tests/python/h5py_interop.py with the system Python when it has h5py
 * (scripts/setup.sh --tests installs python3-h5py).  Without it the test
 * exits 77, which ctest reports as skipped, not passed. */
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

static void test_h5py_interop(void **state)
{
    (void)state;
    char dir[1024], args[4096];
    test_tmp_dir(dir, sizeof dir, "h5py");
    snprintf(args, sizeof args, "'%s' '%s/cases/samples/moe_gate_N256_K2048_M8.h5' '%s'",
             KREPLAY_BINARY, KREPLAY_SOURCE_DIR, dir);
    assert_int_equal(test_run_python("h5py_interop.py", args), 0);
}

KR_TEST_MAIN_UNLESS(
    test_python_lacks("h5py, numpy", "h5py is not available to /usr/bin/python3: skipped"),
    test_h5py_interop);
