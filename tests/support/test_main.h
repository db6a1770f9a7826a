/* One-line cmocka mains for the tests/test_*.c files: each file names its
 * test functions once, and main is built from the list.  A file whose main
 * does more first (sets the environment, quiets a library) calls
 * KR_RUN_TESTS from its own main; one with a teardown per test, several
 * groups or arguments keeps a main of its own.
 * Include after <cmocka.h>. */
#ifndef KR_TEST_MAIN_H
#define KR_TEST_MAIN_H

#include <stdio.h>

#include "test_support.h"

/* The statements ending a main: the group "tests" of cmocka_unit_test(NAME)
 * for each NAME, run with SETUP and TEARDOWN (either may be NULL). */
#define KR_RUN_TESTS(setup, teardown, ...)                                                      \
    const struct CMUnitTest tests[] = {KR_FOR_EACH(cmocka_unit_test, __VA_ARGS__)};              \
    return cmocka_run_group_tests(tests, setup, teardown)

/* main, skipped (exit TEST_SKIPPED, the reason said on stderr) when the
 * expression SKIP_REASON is not NULL: a missing tool or module is no failure. */
#define KR_TEST_MAIN_FULL(skip_reason, setup, teardown, ...)                                    \
    int main(void)                                                                               \
    {                                                                                            \
        const char *kr_skip_reason = (skip_reason);                                              \
        if (kr_skip_reason) {                                                                    \
            fprintf(stderr, "%s\n", kr_skip_reason);                                             \
            return TEST_SKIPPED;                                                                 \
        }                                                                                        \
        KR_RUN_TESTS(setup, teardown, __VA_ARGS__);                                              \
    }                                                                                            \
    struct kr_test_main_end /* takes the use's closing ';' */

#define KR_TEST_MAIN(...) KR_TEST_MAIN_FULL(NULL, NULL, NULL, __VA_ARGS__)
#define KR_TEST_MAIN_SETUP(setup, teardown, ...) \
    KR_TEST_MAIN_FULL(NULL, setup, teardown, __VA_ARGS__)
#define KR_TEST_MAIN_UNLESS(skip_reason, ...) \
    KR_TEST_MAIN_FULL(skip_reason, NULL, NULL, __VA_ARGS__)

/* KR_FOR_EACH(M, a, b, ...) is "M(a), M(b), ..." for 1 to 64 arguments. */
#define KR_FOR_EACH(m, ...) KR_FE_CAT(KR_FE_, KR_FE_COUNT(__VA_ARGS__))(m, __VA_ARGS__)
#define KR_FE_CAT(a, b) KR_FE_CAT_(a, b)
#define KR_FE_CAT_(a, b) a##b
#define KR_FE_COUNT(...) \
    KR_FE_COUNT_(__VA_ARGS__, 64, 63, 62, 61, 60, 59, 58, 57, 56, 55, 54, 53, 52, 51, 50, 49, \
    48, 47, 46, 45, 44, 43, 42, 41, 40, 39, 38, 37, 36, 35, 34, 33, 32, 31, 30, 29, 28, 27, 26, \
    25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, \
    0)
#define KR_FE_COUNT_(_1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14, _15, _16, _17, \
    _18, _19, _20, _21, _22, _23, _24, _25, _26, _27, _28, _29, _30, _31, _32, _33, _34, _35, \
    _36, _37, _38, _39, _40, _41, _42, _43, _44, _45, _46, _47, _48, _49, _50, _51, _52, _53, \
    _54, _55, _56, _57, _58, _59, _60, _61, _62, _63, _64, n, ...) n
#define KR_FE_1(m, x) m(x)
#define KR_FE_2(m, x, ...) m(x), KR_FE_1(m, __VA_ARGS__)
#define KR_FE_3(m, x, ...) m(x), KR_FE_2(m, __VA_ARGS__)
#define KR_FE_4(m, x, ...) m(x), KR_FE_3(m, __VA_ARGS__)
#define KR_FE_5(m, x, ...) m(x), KR_FE_4(m, __VA_ARGS__)
#define KR_FE_6(m, x, ...) m(x), KR_FE_5(m, __VA_ARGS__)
#define KR_FE_7(m, x, ...) m(x), KR_FE_6(m, __VA_ARGS__)
#define KR_FE_8(m, x, ...) m(x), KR_FE_7(m, __VA_ARGS__)
#define KR_FE_9(m, x, ...) m(x), KR_FE_8(m, __VA_ARGS__)
#define KR_FE_10(m, x, ...) m(x), KR_FE_9(m, __VA_ARGS__)
#define KR_FE_11(m, x, ...) m(x), KR_FE_10(m, __VA_ARGS__)
#define KR_FE_12(m, x, ...) m(x), KR_FE_11(m, __VA_ARGS__)
#define KR_FE_13(m, x, ...) m(x), KR_FE_12(m, __VA_ARGS__)
#define KR_FE_14(m, x, ...) m(x), KR_FE_13(m, __VA_ARGS__)
#define KR_FE_15(m, x, ...) m(x), KR_FE_14(m, __VA_ARGS__)
#define KR_FE_16(m, x, ...) m(x), KR_FE_15(m, __VA_ARGS__)
#define KR_FE_17(m, x, ...) m(x), KR_FE_16(m, __VA_ARGS__)
#define KR_FE_18(m, x, ...) m(x), KR_FE_17(m, __VA_ARGS__)
#define KR_FE_19(m, x, ...) m(x), KR_FE_18(m, __VA_ARGS__)
#define KR_FE_20(m, x, ...) m(x), KR_FE_19(m, __VA_ARGS__)
#define KR_FE_21(m, x, ...) m(x), KR_FE_20(m, __VA_ARGS__)
#define KR_FE_22(m, x, ...) m(x), KR_FE_21(m, __VA_ARGS__)
#define KR_FE_23(m, x, ...) m(x), KR_FE_22(m, __VA_ARGS__)
#define KR_FE_24(m, x, ...) m(x), KR_FE_23(m, __VA_ARGS__)
#define KR_FE_25(m, x, ...) m(x), KR_FE_24(m, __VA_ARGS__)
#define KR_FE_26(m, x, ...) m(x), KR_FE_25(m, __VA_ARGS__)
#define KR_FE_27(m, x, ...) m(x), KR_FE_26(m, __VA_ARGS__)
#define KR_FE_28(m, x, ...) m(x), KR_FE_27(m, __VA_ARGS__)
#define KR_FE_29(m, x, ...) m(x), KR_FE_28(m, __VA_ARGS__)
#define KR_FE_30(m, x, ...) m(x), KR_FE_29(m, __VA_ARGS__)
#define KR_FE_31(m, x, ...) m(x), KR_FE_30(m, __VA_ARGS__)
#define KR_FE_32(m, x, ...) m(x), KR_FE_31(m, __VA_ARGS__)
#define KR_FE_33(m, x, ...) m(x), KR_FE_32(m, __VA_ARGS__)
#define KR_FE_34(m, x, ...) m(x), KR_FE_33(m, __VA_ARGS__)
#define KR_FE_35(m, x, ...) m(x), KR_FE_34(m, __VA_ARGS__)
#define KR_FE_36(m, x, ...) m(x), KR_FE_35(m, __VA_ARGS__)
#define KR_FE_37(m, x, ...) m(x), KR_FE_36(m, __VA_ARGS__)
#define KR_FE_38(m, x, ...) m(x), KR_FE_37(m, __VA_ARGS__)
#define KR_FE_39(m, x, ...) m(x), KR_FE_38(m, __VA_ARGS__)
#define KR_FE_40(m, x, ...) m(x), KR_FE_39(m, __VA_ARGS__)
#define KR_FE_41(m, x, ...) m(x), KR_FE_40(m, __VA_ARGS__)
#define KR_FE_42(m, x, ...) m(x), KR_FE_41(m, __VA_ARGS__)
#define KR_FE_43(m, x, ...) m(x), KR_FE_42(m, __VA_ARGS__)
#define KR_FE_44(m, x, ...) m(x), KR_FE_43(m, __VA_ARGS__)
#define KR_FE_45(m, x, ...) m(x), KR_FE_44(m, __VA_ARGS__)
#define KR_FE_46(m, x, ...) m(x), KR_FE_45(m, __VA_ARGS__)
#define KR_FE_47(m, x, ...) m(x), KR_FE_46(m, __VA_ARGS__)
#define KR_FE_48(m, x, ...) m(x), KR_FE_47(m, __VA_ARGS__)
#define KR_FE_49(m, x, ...) m(x), KR_FE_48(m, __VA_ARGS__)
#define KR_FE_50(m, x, ...) m(x), KR_FE_49(m, __VA_ARGS__)
#define KR_FE_51(m, x, ...) m(x), KR_FE_50(m, __VA_ARGS__)
#define KR_FE_52(m, x, ...) m(x), KR_FE_51(m, __VA_ARGS__)
#define KR_FE_53(m, x, ...) m(x), KR_FE_52(m, __VA_ARGS__)
#define KR_FE_54(m, x, ...) m(x), KR_FE_53(m, __VA_ARGS__)
#define KR_FE_55(m, x, ...) m(x), KR_FE_54(m, __VA_ARGS__)
#define KR_FE_56(m, x, ...) m(x), KR_FE_55(m, __VA_ARGS__)
#define KR_FE_57(m, x, ...) m(x), KR_FE_56(m, __VA_ARGS__)
#define KR_FE_58(m, x, ...) m(x), KR_FE_57(m, __VA_ARGS__)
#define KR_FE_59(m, x, ...) m(x), KR_FE_58(m, __VA_ARGS__)
#define KR_FE_60(m, x, ...) m(x), KR_FE_59(m, __VA_ARGS__)
#define KR_FE_61(m, x, ...) m(x), KR_FE_60(m, __VA_ARGS__)
#define KR_FE_62(m, x, ...) m(x), KR_FE_61(m, __VA_ARGS__)
#define KR_FE_63(m, x, ...) m(x), KR_FE_62(m, __VA_ARGS__)
#define KR_FE_64(m, x, ...) m(x), KR_FE_63(m, __VA_ARGS__)

#endif
