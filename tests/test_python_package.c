/* The kreplay Python package (python/): pip-installed into a venv that sees
 * Debian's numpy, h5py and pandas (scripts/setup.sh --tests), it reads a real
 * run's results.h5 into a DataFrame that must agree cell for cell with
 * results.csv and results.json, and writes a case kreplay replays
 * (tests/python/python_package_test.py).  Without pandas, h5py or venv the
 * test exits 77 (skipped, not passed). */
/* ctest-labels: interop;python;slow */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "python_ready.h"
#include "test_main.h"
#include "test_support.h"

static void test_python_package(void **state)
{
    (void)state;
    assert_int_equal(test_run_python_tool("python_package_test.py", "python-package"), 0);
}

KR_TEST_MAIN_FULL(test_python_missing("h5py, numpy, pandas, venv, ensurepip"), NULL, NULL,
    test_python_package);
