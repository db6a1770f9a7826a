/* docs/ci-examples/ (the GitHub Actions and GitLab CI nightly jobs): they
 * parse as YAML, carry the keys their CI needs, and use only kreplay options
 * the built binary knows (tests/python/ci_examples_test.py).  Without
 * python3-yaml the test exits 77 (skipped). */
/* ctest-labels: docs */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>

#include "python_ready.h"
#include "test_main.h"
#include "test_support.h"

static void test_ci_examples(void **state)
{
    (void)state;
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s/tests/python/ci_examples_test.py' '%s' '%s'",
             KREPLAY_SOURCE_DIR, KREPLAY_BINARY, KREPLAY_SOURCE_DIR);
    assert_int_equal(system(cmd), 0);
}

KR_TEST_MAIN_UNLESS(
    test_python_lacks("yaml", "python3-yaml is not available to /usr/bin/python3: skipped"),
    test_ci_examples);
