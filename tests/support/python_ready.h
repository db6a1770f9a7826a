/* Whether the system Python the interop tests run can import what a test
 * needs; a test without it is skipped (exit 77), not failed.  The answers
 * are skip reasons for KR_TEST_MAIN_UNLESS (test_main.h). */
#ifndef KR_PYTHON_READY_H
#define KR_PYTHON_READY_H

/* NULL when /usr/bin/python3 imports every module of MODULES (an import
 * list, "torch, numpy"); otherwise WHY, the sentence the test says. */
const char *test_python_lacks(const char *modules, const char *why);

/* test_python_lacks with the sentence "MODULES: not all available to
 * /usr/bin/python3: skipped". */
const char *test_python_missing(const char *modules);

#endif
