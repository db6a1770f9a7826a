#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include "kr_error.h"
static void t(void **s) { (void)s; kr_error_t e; assert_int_equal(kr_fail(&e, "x%d", 1), -1); assert_string_equal(e.msg, "x1"); }
int main(void) { const struct CMUnitTest tests[] = { cmocka_unit_test(t) }; return cmocka_run_group_tests(tests, NULL, NULL); }
