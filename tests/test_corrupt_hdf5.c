/* Files that crash or hang libhdf5 1.10 itself (found by fuzzing: a damaged
 * global heap under a string attribute, an overflowing attribute name):
 * kreplay reads cases in a child process, so each gives one error line and
 * exit 2, never a crash or a hang of kreplay. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_main.h"
#include "test_support.h"

static void check(const char *name, const char *phrase)
{
    char args[2048], *out = NULL;
    snprintf(args, sizeof args, "inspect '%s/tests/fixtures/corrupt_h5/%s'", KREPLAY_SOURCE_DIR, name);
    assert_int_equal(test_run_kreplay(args, &out), 2);
    assert_non_null(strstr(out, "kreplay: error:"));
    assert_non_null(strstr(out, name));
    if (phrase)
        assert_non_null(strstr(out, phrase));
    free(out);
}

static void test_segfault_in_libhdf5(void **state)
{
    (void)state;
    check("segv_global_heap.h5", "the HDF5 library crashed reading it");
}

static void test_hang_in_libhdf5(void **state)
{
    (void)state;
    check("hang_global_heap.h5", "did not finish");
}

static void test_other_corruptions(void **state)
{
    (void)state;
    check("overflow_attr_name.h5", NULL);
    check("overlap_str_attr.h5", NULL);
}

int main(void)
{
    /* The hang must end in the test's lifetime: kreplay gives up on a read after this. */
    setenv("KREPLAY_READ_TIMEOUT", "5", 1);
    KR_RUN_TESTS(NULL, NULL,
        test_segfault_in_libhdf5, test_hang_in_libhdf5, test_other_corruptions);
}
