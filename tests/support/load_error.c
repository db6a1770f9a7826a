#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "load_error.h"

void test_expect_load_error(const char *what, unsigned long i, const test_bad_yaml_t *bad,
                            const char *path, int rc, const char *msg)
{
    char where[2200];
    snprintf(where, sizeof where, "%s:%d: ", path, bad->line);
    if (rc != -1 || strstr(msg, where) != msg || !strstr(msg, bad->phrase) || strchr(msg, '\n'))
        fprintf(stderr, "bad %s #%lu:\n%s\n-> rc %d: %s\n   wanted %s ... %s\n", what, i,
                bad->yaml, rc, msg, where, bad->phrase);
    assert_int_equal(rc, -1);
    assert_non_null(strstr(msg, where));
    assert_ptr_equal(strstr(msg, where), msg);
    assert_non_null(strstr(msg, bad->phrase));
    assert_null(strchr(msg, '\n'));
}
