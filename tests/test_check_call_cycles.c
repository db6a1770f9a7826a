/* scripts/check_call_cycles.py on planted object files: two files of a
 * library that call each other are named, a one-way call is not, and a
 * build directory without library objects is an error, not a pass. */
/* ctest-labels: lint */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "python_ready.h"
#include "test_main.h"
#include "test_support.h"

/* Compiles `code` as <build>/CMakeFiles/kr_planted.dir/<name>.c.o, where the
 * checker looks for a library's objects. */
static void planted_object(const char *build, const char *name, const char *code)
{
    char src[4400], cmd[9200], *out;
    snprintf(src, sizeof src, "%s/%s.c", build, name);
    FILE *f = fopen(src, "w");
    assert_non_null(f);
    fputs(code, f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "mkdir -p '%s/CMakeFiles/kr_planted.dir' && cc -c '%s' -o '%s/CMakeFiles/kr_planted.dir/%s.c.o' 2>&1",
             build, src, build, name);
    assert_int_equal(test_sh(cmd, &out), 0);
    free(out);
}

static int run_checker(const char *build, char **out)
{
    char cmd[4400];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s/scripts/check_call_cycles.py' '%s' 2>&1", KREPLAY_SOURCE_DIR,
             build);
    return test_sh(cmd, out);
}

static void test_mutual_calls_named(void **state)
{
    (void)state;
    char build[4096], *out;
    test_tmp_path(build, sizeof build, "cycles");
    assert_int_equal(mkdir(build, 0755), 0);
    planted_object(build, "upper", "int lower(int);\nint upper(int a) { return lower(a) + 1; }\n");
    planted_object(build, "lower", "int lower(int a) { return 2 * a; }\n");
    assert_int_equal(run_checker(build, &out), 0);     /* one way: allowed */
    assert_non_null(strstr(out, "0 pairs that call each other"));
    free(out);
    /* the lower file calls back up: a circle */
    planted_object(build, "lower", "int upper(int);\nint lower(int a) { return a > 0 ? upper(a - 1) : 0; }\n");
    assert_int_equal(run_checker(build, &out), 1);
    assert_non_null(strstr(out, "call cycle: lower.c <-> upper.c"));
    free(out);
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", build);      /* not left where a build's objects are */
    assert_int_equal(system(cmd), 0);
}

static void test_no_objects_is_an_error(void **state)
{
    (void)state;
    char build[4096], *out;
    test_tmp_path(build, sizeof build, "cycles-empty");
    assert_int_equal(mkdir(build, 0755), 0);
    assert_int_equal(run_checker(build, &out), 2);
    assert_non_null(strstr(out, "no object files"));
    free(out);
}

KR_TEST_MAIN_UNLESS(test_python_lacks("sys", "/usr/bin/python3 is not available: skipped"),
                    test_mutual_calls_named, test_no_objects_is_an_error);
