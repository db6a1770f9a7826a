"""Python kernels for tests/test_py_runner.c: they say which interpreter ran them."""
import os

import numpy as np


def zeros_with_pid(M, N, K):
    """An all-zero output, after appending this interpreter's pid to $KR_TEST_PID_LOG."""
    with open(os.environ["KR_TEST_PID_LOG"], "a") as f:
        f.write(f"{os.getpid()}\n")
    return np.zeros((M, N), dtype=np.uint16)


def crash_once(M, N, K):
    """Segfaults the first time its marker file is absent (then creates it): one crash."""
    marker = os.environ["KR_TEST_PID_LOG"] + ".crashed"
    if not os.path.exists(marker):
        open(marker, "w").close()
        import ctypes
        ctypes.string_at(0)
    return zeros_with_pid(M, N, K)
