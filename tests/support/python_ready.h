/* Whether the system Python the interop tests run can import what a test
 * needs; a test without it is skipped (exit 77), not failed. */
#ifndef KR_PYTHON_READY_H
#define KR_PYTHON_READY_H

/* 1 when /usr/bin/python3 imports every module of MODULES (an import list,
 * "torch, numpy"); otherwise 0, having said on stderr that the test is
 * skipped for want of them. */
int test_python_imports(const char *modules);

#endif
