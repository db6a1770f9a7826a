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

int main(void)
{
    if (system("/usr/bin/python3 -c 'import h5py, numpy' >/dev/null 2>&1") != 0) {
        fprintf(stderr, "h5py is not available to /usr/bin/python3: skipped\n");
        return TEST_SKIPPED;
    }
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_h5py_interop)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
