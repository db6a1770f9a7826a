/* The README's Python commands work as written on Debian 12 with a
 * pyenv-like python3 (no numpy, no h5py) first on PATH and no network, and
 * `pip install ./python` leaves the package's sources as they were
 * (tests/python/readme_python_test.py).  Without pandas, h5py or venv the
 * test exits 77 (skipped, not passed). */
/* ctest-labels: interop;python */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "python_ready.h"
#include "test_main.h"
#include "test_support.h"

static void test_readme_python_block(void **state)
{
    (void)state;
    assert_int_equal(test_run_python_tool("readme_python_test.py", "readme-python"), 0);
}

KR_TEST_MAIN_FULL(test_python_missing("h5py, numpy, pandas, venv, ensurepip"), NULL, NULL,
    test_readme_python_block);
